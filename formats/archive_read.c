/* archive_read.c - models inside tar, tar.gz, tar.zst and zip archives (the
 * writer of deployment bundles is archive_write.c).
 *
 * Reading never extracts to disk. libarchive lists the members (tar: ustar,
 * pax and GNU; zip) with only the formats and filters we need enabled; every
 * member is checked (name, type, mode, size, duplicates, caps) before any is
 * used. Members of an uncompressed tar are windows of the archive file;
 * compressed bytes are decompressed once, with caps, into sealed memfds. The
 * model inside (one .gguf/.safetensors/.qpk file, a GGUF split set, a
 * safetensors index, or a Hugging Face directory) is then opened by its own
 * reader through a qtk_vfs mount at "<archive>!", so an error names the
 * archive and the member: "model.tar!/dir/model.safetensors".
 */
#include "qtk_archive.h"
#include "st_json.h"
#include "la.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- limits ---------------------------------------------------------------- */

static qtk_ar_limits lim_cur;
static bool lim_set;

static qtk_ar_limits lim_default(void)
{
	qtk_ar_limits l = {0};
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : (8ull << 30);
	l.mem = ram / 2;
	if (l.mem > (64ull << 30))
		l.mem = 64ull << 30;
	if (l.mem < (1ull << 30))
		l.mem = 1ull << 30;
	uint64_t v;
	const char *e = getenv("QTK_ARCHIVE_MAX_MEM");
	if (e && qtk_parse_u64(e, &v) && v)
		l.mem = v;
	l.entry = l.mem;
	l.entries = 100000;
	l.depth = 32;
	l.name = 1024;
	l.ratio = 200;
	l.ratio_slack = 1ull << 20;
	l.window_log = 27;
	return l;
}

const qtk_ar_limits *qtk_ar_limits_get(void)
{
	if (!lim_set) {
		lim_cur = lim_default();
		lim_set = true;
	}
	return &lim_cur;
}

void qtk_ar_limits_set(const qtk_ar_limits *l)
{
	lim_cur = l ? *l : lim_default();
	lim_set = true;
}

/* ---- memfds ------------------------------------------------------------------ */

int qtk_ar_memfd(const char *label, const char *path, qtk_err *err)
{
	int fd = memfd_create(label, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return qtk_err_sys(err, path, "cannot create an in-memory file");
	return fd;
}

int qtk_ar_memfd_write(int fd, const void *d, size_t n, const char *path, qtk_err *err)
{
	const uint8_t *p = d;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return qtk_err_sys(err, path, "cannot hold decompressed data in memory");
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int qtk_ar_memfd_seal(int fd, const char *path, qtk_err *err)
{
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
		return qtk_err_sys(err, path, "cannot seal in-memory file");
	return 0;
}

/* ---- the archive being read ----------------------------------------------- */

typedef struct ar_ent {
	char *name;     /* normalised: no "./" prefix, no trailing '/' */
	bool dir;
	int fd;         /* data: ar.fd or one of ar.memfds (not owned here) */
	uint64_t base, size;
} ar_ent;

typedef struct ar {
	qtk_model *m;
	const char *path;   /* the archive, for messages */
	const char *kind;   /* "tar", "tar.gz", "tar.zst", "zip", "zst" */
	const qtk_ar_limits *lim;
	int fd;             /* tar stream: the archive file or a memfd (not owned) */
	uint64_t size;
	bool in_memory;     /* fd's bytes are held in memory */
	ar_ent *e;
	size_t n, cap;
	int *memfds;        /* owned */
	size_t nmem, capmem;
	uint64_t mem_used;
	char *root;         /* mount root "<archive>!" */
} ar;

static int oom(ar *a) { return qtk_err_set(&a->m->err, QTK_E_IO, a->path, -1, NULL, "out of memory"); }

/* A QTK_E_DATA error about member `name` (NULL: the archive itself). */
static int arerr(ar *a, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int arerr(ar *a, const char *name, const char *fmt, ...)
{
	char msg[400], subj[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (name) /* hostile names are shown escaped by qtk_err_format */
		snprintf(subj, sizeof subj, "member '%.240s'", name);
	return qtk_err_set(&a->m->err, QTK_E_DATA, a->path, -1, name ? subj : NULL, "%s", msg);
}

static void ar_free(ar *a)
{
	for (size_t i = 0; i < a->n; i++)
		qtk_free(a->e[i].name);
	qtk_free(a->e);
	for (size_t i = 0; i < a->nmem; i++)
		close(a->memfds[i]);
	qtk_free(a->memfds);
	qtk_free(a->root);
	memset(a, 0, sizeof *a);
}

static int add_memfd(ar *a, int fd)
{
	if (a->nmem == a->capmem) {
		size_t nc = a->capmem ? a->capmem * 2 : 16;
		int *p = qtk_realloc(a->memfds, nc * sizeof *p);
		if (!p)
			return oom(a);
		a->memfds = p;
		a->capmem = nc;
	}
	a->memfds[a->nmem++] = fd;
	return 0;
}

/* Take ownership of name. */
static int add_ent(ar *a, char *name, bool dir, int fd, uint64_t base, uint64_t size)
{
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 32;
		ar_ent *p = qtk_realloc(a->e, nc * sizeof *p);
		if (!p) {
			qtk_free(name);
			return oom(a);
		}
		a->e = p;
		a->cap = nc;
	}
	a->e[a->n++] = (ar_ent){name, dir, fd, base, size};
	return 0;
}

/* ---- member checks -------------------------------------------------------- */

static bool reserved_win_name(const char *c, size_t n)
{
	static const char *const r[] = {"con", "prn", "aux", "nul"};
	size_t k = 0;
	while (k < n && c[k] != '.')
		k++;
	char b[8];
	if (k < 3 || k > 4)
		return false;
	for (size_t i = 0; i < k; i++)
		b[i] = (char)(c[i] >= 'A' && c[i] <= 'Z' ? c[i] + 32 : c[i]);
	b[k] = 0;
	for (size_t i = 0; i < 4; i++)
		if (k == 3 && strcmp(b, r[i]) == 0)
			return true;
	return k == 4 && (!strncmp(b, "com", 3) || !strncmp(b, "lpt", 3)) && b[3] >= '1' && b[3] <= '9';
}

/* Check a member name (C.2 row 43) and return its normalised form in *out
 * (NULL for the archive's own root "./"). Never "sanitises and continues". */
static int check_name(ar *a, const char *raw, char **out)
{
	*out = NULL;
	if (!raw || !*raw)
		return arerr(a, NULL, "member with an empty or unreadable name");
	size_t n = strlen(raw);
	if (n > a->lim->name)
		return arerr(a, raw, "name longer than %u bytes", a->lim->name);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)raw[i];
		if (c < 0x20 || c == 0x7f)
			return arerr(a, raw, "name contains a control character");
		if (c >= 0x80)
			return arerr(a, raw, "name is not ASCII (refused: Unicode forms could collide)");
		if (c == '\\')
			return arerr(a, raw, "name contains a backslash");
		if (c == ':')
			return arerr(a, raw, "name contains ':' (drive letter or stream)");
	}
	if (raw[0] == '/')
		return arerr(a, raw, "absolute path");
	const char *s = raw;
	if (s[0] == '.' && s[1] == '/')
		s += 2;
	n = strlen(s);
	while (n && s[n - 1] == '/')
		n--;
	if (n == 0 || (n == 1 && s[0] == '.'))
		return 0; /* "./": the root itself */
	uint32_t depth = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && s[j] != '/')
			j++;
		size_t cl = j - i;
		if (cl == 0)
			return arerr(a, raw, "name has an empty path component");
		if (cl == 2 && s[i] == '.' && s[i + 1] == '.')
			return arerr(a, raw, "path contains '..'");
		if (cl == 1 && s[i] == '.')
			return arerr(a, raw, "path contains '.'");
		if (reserved_win_name(s + i, cl))
			return arerr(a, raw, "name is a reserved device name on Windows");
		if (++depth > a->lim->depth)
			return arerr(a, raw, "path deeper than %u components", a->lim->depth);
		i = j + 1;
	}
	*out = qtk_strndup(s, n);
	return *out ? 0 : oom(a);
}

/* Regular files and directories only, no special modes (C.2 row 44). */
static int check_type(ar *a, struct archive_entry *e, const char *name, bool *dir)
{
	if (archive_entry_hardlink(e))
		return arerr(a, name, "hard link refused (regular files only)");
	unsigned t = (unsigned)archive_entry_filetype(e);
	const char *what = NULL;
	switch (t) {
	case AE_IFREG: *dir = false; break;
	case AE_IFDIR: *dir = true; break;
	case AE_IFLNK: what = "symbolic link"; break;
	case AE_IFCHR: what = "character device"; break;
	case AE_IFBLK: what = "block device"; break;
	case AE_IFIFO: what = "FIFO"; break;
	case AE_IFSOCK: what = "socket"; break;
	default: what = "member of unknown type"; break;
	}
	if (what)
		return arerr(a, name, "%s refused (regular files only)", what);
	if (archive_entry_mode(e) & 07000)
		return arerr(a, name, "setuid, setgid or sticky mode refused");
	if (archive_entry_sparse_count(e) > 0)
		return arerr(a, name, "sparse member refused");
	if (!*dir && (!archive_entry_size_is_set(e) && strcmp(a->kind, "zip") != 0))
		return arerr(a, name, "member has no size");
	if (archive_entry_size(e) < 0)
		return arerr(a, name, "negative size");
	return 0;
}

static int cmp_fold(const void *x, const void *y)
{
	const ar_ent *p = *(const ar_ent *const *)x, *q = *(const ar_ent *const *)y;
	int c = qtk_strcasecmp(p->name, q->name);
	return c ? c : strcmp(p->name, q->name);
}

/* Duplicates, case-fold collisions, a file used as a directory (row 46). */
static int check_dups(ar *a)
{
	if (a->n < 2)
		return 0;
	ar_ent **v = qtk_malloc(a->n * sizeof *v);
	if (!v)
		return oom(a);
	for (size_t i = 0; i < a->n; i++)
		v[i] = &a->e[i];
	qsort(v, a->n, sizeof *v, cmp_fold);
	int rc = 0;
	for (size_t i = 1; i < a->n && !rc; i++)
		if (qtk_strcasecmp(v[i - 1]->name, v[i]->name) == 0) {
			if (strcmp(v[i - 1]->name, v[i]->name) == 0 && v[i - 1]->dir && v[i]->dir)
				continue; /* a directory listed twice is harmless */
			rc = strcmp(v[i - 1]->name, v[i]->name) == 0
				     ? arerr(a, v[i]->name, "duplicate member name")
				     : arerr(a, v[i]->name, "name collides with '%.200s' when case is ignored", v[i - 1]->name);
		}
	for (size_t i = 0; i < a->n && !rc; i++) {
		const char *nm = a->e[i].name;
		for (const char *s = strchr(nm, '/'); s && !rc; s = strchr(s + 1, '/')) {
			char *pre = qtk_strndup(nm, (size_t)(s - nm));
			if (!pre) {
				rc = oom(a);
				break;
			}
			ar_ent key = {.name = pre}, *kp = &key;
			ar_ent **hit = bsearch(&kp, v, a->n, sizeof *v, cmp_fold);
			if (hit && !(*hit)->dir)
				rc = arerr(a, pre, "member is both a file and a directory");
			qtk_free(pre);
		}
	}
	qtk_free(v);
	return rc;
}

/* ---- caps while decompressing -------------------------------------------- */

/* out bytes produced from in compressed bytes so far: ratio and totals. */
static int check_bomb(ar *a, const char *name, uint64_t out, uint64_t in, uint64_t total)
{
	const qtk_ar_limits *l = a->lim;
	if (out > l->ratio_slack && (in == 0 || out / in >= l->ratio))
		return arerr(a, name, "decompression ratio above %u:1 (%llu bytes from %llu): refused as a bomb",
			     l->ratio, (unsigned long long)out, (unsigned long long)in);
	if (out > l->entry)
		return arerr(a, name, "decompresses to more than the limit of %llu bytes for one member",
			     (unsigned long long)l->entry);
	if (total > l->mem)
		return arerr(a, name, "decompressed data exceed the limit of %llu bytes held in memory",
			     (unsigned long long)l->mem);
	return 0;
}

/* ---- tar --------------------------------------------------------------------- */

bool qtk_ar_is_tar(const uint8_t *h, size_t n)
{
	if (n < 512 || memcmp(h + 257, "ustar", 5) != 0)
		return false;
	uint64_t want = 0;
	int i = 148;
	while (i < 156 && h[i] == ' ')
		i++;
	for (; i < 156 && h[i] >= '0' && h[i] <= '7'; i++)
		want = want * 8 + (uint64_t)(h[i] - '0');
	uint64_t sum = 0;
	for (int k = 0; k < 512; k++)
		sum += (k >= 148 && k < 156) ? ' ' : h[k];
	return sum == want;
}

static const char *ar_msg(struct archive *x)
{
	const char *s = archive_error_string(x);
	return s ? s : "unknown error";
}

/* List the members of the tar stream a->fd. Regular members become windows
 * of a->fd; their position is checked against the data libarchive reads. */

/* The next member of an archive being listed: its checked name (NULL when the member is
 * skipped) and whether it is a directory; *end at the end of the archive. The member-count
 * limit, name and type checks are those of every archive kind. */
static int next_member(ar *a, struct archive *x, struct archive_entry **e, char **name, bool *dir, bool *end)
{
	int r = archive_read_next_header(x, e);
	if (r == ARCHIVE_EOF) {
		*end = true;
		return 0;
	}
	if (r != ARCHIVE_OK)
		return arerr(a, NULL, "damaged %s archive after %zu members: %s", a->kind, a->n, ar_msg(x));
	if (a->n >= a->lim->entries)
		return arerr(a, NULL, "more than %llu members", (unsigned long long)a->lim->entries);
	const char *raw = archive_entry_pathname(*e);
	int rc = check_name(a, raw, name);
	if (!rc)
		rc = check_type(a, *e, raw, dir);
	if (rc) {
		qtk_free(*name);
		*name = NULL;
	}
	return rc;
}
static int read_tar(ar *a)
{
	if (qtk_la_load() != 0)
		return qtk_err_set(&a->m->err, QTK_E_IO, a->path, -1, NULL, "%s", qtk_la_error());
	struct archive *x = archive_read_new();
	if (!x)
		return oom(a);
	int rc = 0;
	if (archive_read_support_format_tar(x) != ARCHIVE_OK) {
		rc = arerr(a, NULL, "libarchive cannot read tar: %s", ar_msg(x));
		goto out;
	}
	if (lseek(a->fd, 0, SEEK_SET) != 0 || archive_read_open_fd(x, a->fd, 1 << 16) != ARCHIVE_OK) {
		rc = arerr(a, NULL, "not a readable %s archive: %s", a->kind, ar_msg(x));
		goto out;
	}
	for (;;) {
		struct archive_entry *e;
		char *name = NULL;
		bool dir = false, last = false;
		if ((rc = next_member(a, x, &e, &name, &dir, &last)))
			goto out;
		if (last)
			break;
		if (!name)
			continue;
		if (dir) {
			if ((rc = add_ent(a, name, true, -1, 0, 0)))
				goto out;
			continue;
		}
		uint64_t size = (uint64_t)archive_entry_size(e), base = (uint64_t)archive_filter_bytes(x, 0), end;
		if (!qtk_add_u64(base, size, &end) || end > a->size) {
			rc = arerr(a, name, "declares %llu bytes at 0x%llx but the archive ends at 0x%llx",
				   (unsigned long long)size, (unsigned long long)base, (unsigned long long)a->size);
			qtk_free(name);
			goto out;
		}
		if (a->in_memory && size > a->lim->entry) {
			rc = arerr(a, name, "member of %llu bytes exceeds the limit of %llu bytes held in memory",
				   (unsigned long long)size, (unsigned long long)a->lim->entry);
			qtk_free(name);
			goto out;
		}
		/* the window must hold what libarchive itself reads there */
		uint8_t b1[512], b2[512];
		size_t k = size < sizeof b1 ? (size_t)size : sizeof b1;
		la_ssize_t got = k ? archive_read_data(x, b1, k) : 0;
		if (got != (la_ssize_t)k || (k && qtk_pread_full(a->fd, a->path, b2, k, base, &a->m->err)) ||
		    memcmp(b1, b2, k) != 0) {
			rc = got < 0 ? arerr(a, name, "cannot read member data: %s", ar_msg(x))
				     : a->m->err.code ? a->m->err.code
						      : arerr(a, name, "member data is not where the header says (size %llu)",
							      (unsigned long long)size);
			qtk_free(name);
			goto out;
		}
		if ((rc = add_ent(a, name, false, a->fd, base, size)))
			goto out;
	}
out:
	archive_read_free(x);
	return rc;
}

/* ---- zip -------------------------------------------------------------------- */

/* One member as the central directory describes it. */
typedef struct zrange {
	uint64_t start, end; /* local header .. end of its data */
} zrange;

static int cmp_zrange(const void *x, const void *y)
{
	const zrange *p = x, *q = y;
	return p->start < q->start ? -1 : p->start > q->start;
}

/* A ZIP64 extended-information field overrides the 0xFFFFFFFF fields, in
 * the order uncompressed size, compressed size, local header offset. */
static bool zip64_fields(const uint8_t *x, size_t n, uint64_t *usize, uint64_t *csize, uint64_t *off)
{
	for (size_t i = 0; i + 4 <= n;) {
		unsigned id = qtk_rd16(x + i), len = qtk_rd16(x + i + 2);
		if (i + 4 + len > n)
			return false;
		if (id == 1) {
			const uint8_t *v = x + i + 4;
			size_t k = 0;
			uint64_t *f[3] = {usize, csize, off};
			for (int j = 0; j < 3; j++)
				if (*f[j] == 0xFFFFFFFFu) {
					if (k + 8 > len)
						return false;
					*f[j] = qtk_rd64(v + k);
					k += 8;
				}
			return true;
		}
		i += 4 + len;
	}
	return *usize != 0xFFFFFFFFu && *csize != 0xFFFFFFFFu && *off != 0xFFFFFFFFu;
}

/* Find the end of central directory: entries, CD offset and size. */
static int zip_eocd(ar *a, uint64_t *count, uint64_t *cdoff, uint64_t *cdsize, uint64_t *cdlimit)
{
	uint64_t tail = a->size < 65557 ? a->size : 65557;
	uint8_t *b = qtk_malloc((size_t)tail + 1);
	if (!b)
		return oom(a);
	int rc = qtk_pread_full(a->fd, a->path, b, (size_t)tail, a->size - tail, &a->m->err);
	int64_t at = -1;
	for (int64_t i = (int64_t)tail - 22; !rc && i >= 0; i--)
		if (!memcmp(b + i, "PK\x05\x06", 4) && (uint64_t)i + 22 + qtk_rd16(b + i + 20) == tail) {
			at = i;
			break;
		}
	if (rc || at < 0) {
		qtk_free(b);
		return rc ? rc : arerr(a, NULL, "zip: no end of central directory record");
	}
	const uint8_t *e = b + at;
	uint64_t epos = a->size - tail + (uint64_t)at;
	*count = qtk_rd16(e + 10);
	*cdsize = qtk_rd32(e + 12);
	*cdoff = qtk_rd32(e + 16);
	*cdlimit = epos;
	bool z64 = *count == 0xFFFF || *cdsize == 0xFFFFFFFFu || *cdoff == 0xFFFFFFFFu;
	if (qtk_rd16(e + 4) || qtk_rd16(e + 6) || qtk_rd16(e + 8) != qtk_rd16(e + 10))
		rc = arerr(a, NULL, "multi-volume zip archives are not supported");
	qtk_free(b);
	if (rc || !z64)
		return rc;
	uint8_t l[20], z[56];
	if (epos < 20 || (rc = qtk_pread_full(a->fd, a->path, l, 20, epos - 20, &a->m->err)))
		return rc ? rc : arerr(a, NULL, "zip: ZIP64 locator missing");
	uint64_t zo = qtk_rd64(l + 8);
	if (memcmp(l, "PK\x06\x07", 4) || zo > epos - 20 || epos - 20 - zo < 56 ||
	    (rc = qtk_pread_full(a->fd, a->path, z, 56, zo, &a->m->err)) || memcmp(z, "PK\x06\x06", 4))
		return rc ? rc : arerr(a, NULL, "zip: bad ZIP64 end of central directory");
	*count = qtk_rd64(z + 32);
	*cdsize = qtk_rd64(z + 40);
	*cdoff = qtk_rd64(z + 48);
	*cdlimit = zo;
	return 0;
}

/* ZIP structure cross-check before libarchive reads it (C.2 row 51): the
 * central directory and every local header agree on name, method, flags and
 * sizes, and the members' byte ranges neither overlap (Fifield's overlap
 * bomb) nor run into the central directory. */
static int zip_check(ar *a)
{
	uint64_t count = 0, cdoff = 0, cdsize = 0, cdlimit = 0, end;
	int rc = zip_eocd(a, &count, &cdoff, &cdsize, &cdlimit);
	if (rc)
		return rc;
	if (!qtk_add_u64(cdoff, cdsize, &end) || end > cdlimit)
		return arerr(a, NULL, "zip: central directory beyond its end record");
	if (count > a->lim->entries)
		return arerr(a, NULL, "more than %llu members", (unsigned long long)a->lim->entries);
	if (count > cdsize / 46)
		return arerr(a, NULL, "zip: %llu members cannot fit a %llu-byte central directory",
			     (unsigned long long)count, (unsigned long long)cdsize);
	uint8_t *cd = qtk_malloc((size_t)cdsize + 1);
	zrange *r = qtk_calloc(count ? (size_t)count : 1, sizeof *r);
	if (!cd || !r) {
		qtk_free(cd);
		qtk_free(r);
		return oom(a);
	}
	rc = qtk_pread_full(a->fd, a->path, cd, (size_t)cdsize, cdoff, &a->m->err);
	size_t p = 0;
	uint64_t declared = 0; /* what the members declare, all held in memory once read */
	for (uint64_t i = 0; i < count && !rc; i++) {
		if (p + 46 > cdsize || memcmp(cd + p, "PK\x01\x02", 4)) {
			rc = arerr(a, NULL, "zip: central directory entry %llu is malformed", (unsigned long long)i);
			break;
		}
		const uint8_t *c = cd + p;
		size_t nl = qtk_rd16(c + 28), xl = qtk_rd16(c + 30), cl = qtk_rd16(c + 32);
		if (p + 46 + nl + xl + cl > cdsize) {
			rc = arerr(a, NULL, "zip: central directory entry %llu is malformed", (unsigned long long)i);
			break;
		}
		char name[300];
		snprintf(name, sizeof name, "%.*s", (int)(nl < 256 ? nl : 256), (const char *)c + 46);
		uint64_t usize = qtk_rd32(c + 24), csize = qtk_rd32(c + 20), loff = qtk_rd32(c + 42);
		unsigned flags = qtk_rd16(c + 8), method = qtk_rd16(c + 10);
		uint8_t lh[30];
		if (!zip64_fields(c + 46 + nl, xl, &usize, &csize, &loff))
			rc = arerr(a, name, "zip: bad ZIP64 extra field");
		else if (qtk_rd16(c + 34))
			rc = arerr(a, name, "multi-volume zip archives are not supported");
		else if (loff > cdoff || cdoff - loff < 30)
			rc = arerr(a, name, "zip: local header offset 0x%llx outside the member area",
				   (unsigned long long)loff);
		else if (!(rc = qtk_pread_full(a->fd, a->path, lh, 30, loff, &a->m->err))) {
			size_t lnl = qtk_rd16(lh + 26), lxl = qtk_rd16(lh + 28);
			uint8_t ln[256];
			uint64_t dstart = loff + 30 + lnl + lxl, dend;
			if (memcmp(lh, "PK\x03\x04", 4))
				rc = arerr(a, name, "zip: no local header at 0x%llx", (unsigned long long)loff);
			else if (lnl != nl || (nl <= sizeof ln && ((rc = qtk_pread_full(a->fd, a->path, ln, nl, loff + 30,
											   &a->m->err)) ||
								   memcmp(ln, c + 46, nl))))
				rc = rc ? rc : arerr(a, name, "zip: central directory and local header disagree on the name");
			else if (qtk_rd16(lh + 6) != flags || qtk_rd16(lh + 8) != method)
				rc = arerr(a, name, "zip: central directory and local header disagree on flags or method");
			else if (!(flags & 8) && qtk_rd32(lh + 18) != 0xFFFFFFFFu &&
				 (qtk_rd32(lh + 18) != csize || qtk_rd32(lh + 22) != usize || qtk_rd32(lh + 14) != qtk_rd32(c + 16)))
				rc = arerr(a, name, "zip: central directory and local header disagree on sizes or CRC");
			else if (!qtk_add_u64(dstart, csize, &dend) || dend > cdoff)
				rc = arerr(a, name, "zip: member data run into the central directory");
			else if (!qtk_add_u64(declared, usize, &declared) || declared > a->lim->mem)
				rc = arerr(a, NULL,
					   "the members declare more than %llu bytes in all (%llu up to '%.200s'), the limit "
					   "held in memory (QTK_ARCHIVE_MAX_MEM): refused before extracting any",
					   (unsigned long long)a->lim->mem, (unsigned long long)declared, name);
			else
				r[i] = (zrange){loff, dend};
		}
		p += 46 + nl + xl + cl;
	}
	if (!rc) {
		qsort(r, (size_t)count, sizeof *r, cmp_zrange);
		for (uint64_t i = 1; i < count && !rc; i++)
			if (r[i].start < r[i - 1].end)
				rc = arerr(a, NULL, "zip: members overlap at 0x%llx (overlap bomb or parser differential)",
					   (unsigned long long)r[i].start);
	}
	qtk_free(cd);
	qtk_free(r);
	return rc;
}

/* Read one zip member's data into a new memfd with the caps. */
static int zip_member(ar *a, struct archive *x, struct archive_entry *e, const char *name, int *fdout,
		      uint64_t *sizeout)
{
	bool declared = archive_entry_size_is_set(e);
	uint64_t want = declared ? (uint64_t)archive_entry_size(e) : 0;
	if (declared && want > a->lim->entry)
		return arerr(a, name, "member of %llu bytes exceeds the limit of %llu bytes held in memory",
			     (unsigned long long)want, (unsigned long long)a->lim->entry);
	int fd = qtk_ar_memfd("qtk-zip-member", a->path, &a->m->err);
	if (fd < 0)
		return fd;
	int rc = add_memfd(a, fd);
	if (rc) {
		close(fd);
		return rc;
	}
	uint64_t in0 = (uint64_t)archive_filter_bytes(x, -1), out = 0;
	for (;;) {
		const void *buf;
		size_t n;
		la_int64_t off;
		int r = archive_read_data_block(x, &buf, &n, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK)
			return arerr(a, name, "cannot decompress: %s", ar_msg(x));
		if (off < 0 || (uint64_t)off != out)
			return arerr(a, name, "member data has holes");
		out += n;
		a->mem_used += n;
		uint64_t in = (uint64_t)archive_filter_bytes(x, -1) - in0;
		if ((rc = check_bomb(a, name, out, in, a->mem_used)))
			return rc;
		if (declared && out > want)
			return arerr(a, name, "member holds more than the %llu bytes it declares", (unsigned long long)want);
		if ((rc = qtk_ar_memfd_write(fd, buf, n, a->path, &a->m->err)))
			return rc;
	}
	if (declared && out != want)
		return arerr(a, name, "member holds %llu bytes but declares %llu", (unsigned long long)out,
			     (unsigned long long)want);
	if ((rc = qtk_ar_memfd_seal(fd, a->path, &a->m->err)))
		return rc;
	*fdout = fd;
	*sizeout = out;
	return 0;
}

static int read_zip(ar *a)
{
	if (qtk_la_load() != 0)
		return qtk_err_set(&a->m->err, QTK_E_IO, a->path, -1, NULL, "%s", qtk_la_error());
	struct archive *x = archive_read_new();
	if (!x)
		return oom(a);
	int rc = 0;
	if (archive_read_support_format_zip_seekable(x) != ARCHIVE_OK) {
		rc = arerr(a, NULL, "libarchive cannot read zip: %s", ar_msg(x));
		goto out;
	}
	if (lseek(a->fd, 0, SEEK_SET) != 0 || archive_read_open_fd(x, a->fd, 1 << 16) != ARCHIVE_OK) {
		rc = arerr(a, NULL, "not a readable zip archive: %s", ar_msg(x));
		goto out;
	}
	for (;;) {
		struct archive_entry *e;
		char *name = NULL;
		bool dir = false, last = false;
		if ((rc = next_member(a, x, &e, &name, &dir, &last)))
			goto out;
		if (last)
			break;
		if (!name)
			continue;
		int fd = -1;
		uint64_t size = 0;
		if (!dir && (rc = zip_member(a, x, e, name, &fd, &size))) {
			qtk_free(name);
			goto out;
		}
		if ((rc = add_ent(a, name, dir, fd, 0, size)))
			goto out;
	}
out:
	archive_read_free(x);
	return rc;
}

/* ---- gzip ------------------------------------------------------------------ */

/* Decompress the gzip file a->fd into a new memfd (libarchive's zlib filter,
 * never an external program). */
static int gunzip(ar *a, int *fdout, uint64_t *sizeout)
{
	if (qtk_la_load() != 0)
		return qtk_err_set(&a->m->err, QTK_E_IO, a->path, -1, NULL, "%s", qtk_la_error());
	struct archive *x = archive_read_new();
	if (!x)
		return oom(a);
	int rc = 0, fd = -1;
	struct archive_entry *e;
	if (archive_read_support_filter_gzip(x) != ARCHIVE_OK) {
		rc = arerr(a, NULL, "gzip would need an external program: refused");
		goto out;
	}
	if (archive_read_support_format_raw(x) != ARCHIVE_OK ||
	    archive_read_open_fd(x, a->fd, 1 << 16) != ARCHIVE_OK ||
	    archive_read_next_header(x, &e) != ARCHIVE_OK) {
		rc = arerr(a, NULL, "not a readable gzip stream: %s", ar_msg(x));
		goto out;
	}
	if (archive_filter_count(x) != 2 || archive_filter_code(x, 0) != ARCHIVE_FILTER_GZIP) {
		rc = arerr(a, NULL, "unexpected compression filter '%s'", archive_filter_name(x, 0));
		goto out;
	}
	/* the trailer's ISIZE (the last member's size modulo 2^32) is at most what the stream holds */
	uint8_t isz[4];
	if (a->size >= 18 && !qtk_pread_full(a->fd, a->path, isz, 4, a->size - 4, &a->m->err) &&
	    qtk_rd32(isz) > a->lim->mem) {
		rc = arerr(a, NULL,
			   "gzip trailer declares %llu bytes, more than the limit of %llu held in memory "
			   "(QTK_ARCHIVE_MAX_MEM): refused before decompressing",
			   (unsigned long long)qtk_rd32(isz), (unsigned long long)a->lim->mem);
		goto out;
	}
	if (a->m->err.code) {
		rc = a->m->err.code;
		goto out;
	}
	if ((fd = qtk_ar_memfd("qtk-tar-gz", a->path, &a->m->err)) < 0) {
		rc = fd;
		goto out;
	}
	uint64_t out = 0;
	uint8_t *buf = qtk_malloc(1 << 20);
	if (!buf) {
		rc = oom(a);
		goto out;
	}
	for (;;) {
		la_ssize_t r = archive_read_data(x, buf, 1 << 20);
		if (r == 0)
			break;
		if (r < 0) {
			rc = arerr(a, NULL, "gzip stream: %s", ar_msg(x));
			break;
		}
		out += (uint64_t)r;
		if ((rc = check_bomb(a, NULL, out, (uint64_t)archive_filter_bytes(x, -1), out)) ||
		    (rc = qtk_ar_memfd_write(fd, buf, (size_t)r, a->path, &a->m->err)))
			break;
	}
	qtk_free(buf);
	if (!rc)
		rc = qtk_ar_memfd_seal(fd, a->path, &a->m->err);
	if (!rc) {
		*fdout = fd;
		*sizeout = out;
		fd = -1;
	}
out:
	if (fd >= 0)
		close(fd);
	archive_read_free(x);
	return rc;
}

/* ---- which model is inside ------------------------------------------------ */

static const char *base_of(const char *s)
{
	const char *p = strrchr(s, '/');
	return p ? p + 1 : s;
}

/* Length of the directory part of a member name (0 at the root). */
static size_t dir_len(const char *s)
{
	const char *p = strrchr(s, '/');
	return p ? (size_t)(p - s) : 0;
}

static bool same_dir(const char *a, const char *b)
{
	size_t n = dir_len(a);
	return n == dir_len(b) && strncmp(a, b, n) == 0;
}

/* Magic numbers of archives and compressed streams (a member must not be one). */
static const char *nested_kind(const uint8_t *h, size_t n)
{
	static const struct {
		const char *what;
		size_t len;
		const char *magic;
	} tab[] = {
		{"zip", 4, "PK\x03\x04"}, {"zip", 4, "PK\x05\x06"}, {"gzip", 2, "\x1f\x8b"},
		{"zstd", 4, "\x28\xb5\x2f\xfd"}, {"xz", 6, "\xfd\x37\x7a\x58\x5a\x00"}, {"bzip2", 3, "BZh"},
		{"7z", 6, "7z\xbc\xaf\x27\x1c"}, {"rar", 4, "Rar!"}, {"lz4", 4, "\x04\x22\x4d\x18"},
		{"lzip", 4, "LZIP"}, {"compress", 2, "\x1f\x9d"},
	};
	for (size_t i = 0; i < sizeof tab / sizeof *tab; i++)
		if (n >= tab[i].len && memcmp(h, tab[i].magic, tab[i].len) == 0)
			return tab[i].what;
	if (n >= 4 && (qtk_rd32(h) & 0xFFFFFFF0u) == 0x184D2A50u)
		return "zstd skippable frame";
	if (qtk_ar_is_tar(h, n))
		return "tar";
	return NULL;
}

static bool pickle_name(const char *s)
{
	return qtk_ends_with(s, ".pkl") || qtk_ends_with(s, ".pickle");
}

static bool torch_name(const char *s)
{
	return qtk_ends_with(s, ".bin") || qtk_ends_with(s, ".pt") || qtk_ends_with(s, ".pth") || qtk_ends_with(s, ".ckpt");
}

/* The model formats a member can hold, strongest first. */
static const qtk_format *const inner_formats[] = {&qtk_format_qpk, &qtk_format_gguf, &qtk_format_safetensors};

/* Classify a member by content: a model file (*fmt set), or refused. */
static int classify(ar *a, const ar_ent *e, const qtk_format **fmt)
{
	*fmt = NULL;
	if (pickle_name(e->name))
		return arerr(a, e->name, "pickle-based checkpoint refused: convert it to safetensors in a sandbox first");
	uint8_t h[4096];
	size_t n = e->size < sizeof h ? (size_t)e->size : sizeof h;
	int rc = n ? qtk_pread_full(e->fd, a->path, h, n, e->base, &a->m->err) : 0;
	if (rc)
		return rc;
	int best = 0;
	for (size_t i = 0; i < sizeof inner_formats / sizeof *inner_formats; i++) {
		int s = inner_formats[i]->probe(h, n, e->size);
		if (s > best) {
			best = s;
			*fmt = inner_formats[i];
		}
	}
	if (best >= 40)
		return 0; /* structurally a model file: its reader validates it */
	*fmt = NULL;
	const char *nk = nested_kind(h, n);
	if (nk && !strcmp(nk, "zip") && torch_name(e->name))
		return arerr(a, e->name, "pickle-based checkpoint (PyTorch zip) refused: convert it to safetensors "
					 "in a sandbox first");
	if (nk)
		return arerr(a, e->name, "nested %s inside the archive refused (no recursive extraction)", nk);
	if (n >= 2 && h[0] == 0x80 && h[1] >= 2 && h[1] <= 5)
		return arerr(a, e->name, "pickle data refused: convert it to safetensors in a sandbox first");
	return 0;
}

/* "<prefix>-00001-of-00003.gguf": 1 for the first shard, 2 for a later one, 0 otherwise. */
static int gguf_shard(const char *s)
{
	static const char pat[] = "-#####-of-#####.gguf";
	size_t n = strlen(s), k = sizeof pat - 1;
	if (n <= k)
		return 0;
	const char *t = s + n - k;
	for (size_t i = 0; i < k; i++)
		if (pat[i] == '#' ? (t[i] < '0' || t[i] > '9') : t[i] != pat[i])
			return 0;
	return memcmp(t + 1, "00001", 5) == 0 ? 1 : 2;
}

typedef struct pick {
	const ar_ent *ent;        /* model file, or config.json of an HF directory */
	const qtk_format *fmt;    /* NULL: HF directory */
} pick;

/* Record a model found; a second one is an error. */
static int found(ar *a, pick *p, const char **first, const ar_ent *e, const qtk_format *fmt)
{
	if (*first)
		return arerr(a, NULL, "holds more than one model ('%.150s' and '%.150s')", *first, e->name);
	*first = e->name;
	p->ent = e;
	p->fmt = fmt;
	return 0;
}

/* Order members by directory, then name. */
static int cmp_by_dir(const void *x, const void *y)
{
	const ar_ent *p = *(const ar_ent *const *)x, *q = *(const ar_ent *const *)y;
	size_t m = dir_len(p->name), n = dir_len(q->name);
	int c = strncmp(p->name, q->name, m < n ? m : n);
	if (c)
		return c;
	if (m != n)
		return m < n ? -1 : 1;
	return strcmp(p->name, q->name);
}

/* Choose the one model in the archive: per directory, config.json with
 * safetensors (or an index) is an HF directory that takes the whole
 * directory; else a safetensors index takes the .safetensors next to it;
 * every other model file counts alone (a GGUF split set as its first shard). */
static int choose(ar *a, pick *p)
{
	memset(p, 0, sizeof *p);
	const char *first = NULL;
	int rc = 0;
	size_t n = a->n;
	const qtk_format **fmts = qtk_calloc(n ? n : 1, sizeof *fmts);
	const ar_ent **v = qtk_calloc(n ? n : 1, sizeof *v);
	if (!fmts || !v) {
		qtk_free(fmts);
		qtk_free(v);
		return oom(a);
	}
	for (size_t i = 0; i < n && !rc; i++)
		if (!a->e[i].dir)
			rc = classify(a, &a->e[i], &fmts[i]);
	for (size_t i = 0; i < n; i++)
		v[i] = &a->e[i];
	qsort(v, n, sizeof *v, cmp_by_dir);
	for (size_t g = 0; g < n && !rc;) {
		size_t h = g + 1;
		while (h < n && same_dir(v[g]->name, v[h]->name))
			h++;
		const ar_ent *cfg = NULL, *index = NULL;
		bool st = false;
		for (size_t i = g; i < h; i++) {
			const char *b = base_of(v[i]->name);
			if (v[i]->dir)
				continue;
			if (!strcmp(b, "config.json"))
				cfg = v[i];
			else if (qtk_st_is_index_name(b) && index) /* two indexes: two models */
				rc = found(a, p, &first, v[i], &qtk_format_safetensors);
			else if (qtk_st_is_index_name(b))
				index = v[i];
			else if (qtk_ends_with(b, ".safetensors"))
				st = true;
		}
		if (!rc && cfg && (st || index))
			rc = found(a, p, &first, cfg, NULL);
		else if (!rc && index)
			rc = found(a, p, &first, index, &qtk_format_safetensors);
		for (size_t i = g; i < h && !rc; i++) {
			const qtk_format *f = fmts[v[i] - a->e];
			if (!f || (cfg && (st || index)) || (index && qtk_ends_with(v[i]->name, ".safetensors")) ||
			    (f == &qtk_format_gguf && gguf_shard(v[i]->name) == 2))
				continue;
			rc = found(a, p, &first, v[i], f);
		}
		g = h;
	}
	if (!rc && !first)
		rc = arerr(a, NULL, "no model inside: expected a .gguf, .safetensors or .qpk file or a Hugging Face "
				    "directory (config.json + safetensors)");
	qtk_free(fmts);
	qtk_free(v);
	return rc;
}

/* ---- the mount ------------------------------------------------------------- */

static int ar_lookup(void *ctx, const char *rel, int *fd, uint64_t *base, uint64_t *size)
{
	const ar *a = ctx;
	if (!*rel)
		return 2;
	size_t rl = strlen(rel);
	for (size_t i = 0; i < a->n; i++) {
		const ar_ent *e = &a->e[i];
		if (strcmp(e->name, rel) == 0) {
			if (e->dir)
				return 2;
			*fd = e->fd;
			*base = e->base;
			*size = e->size;
			return 1;
		}
		if (strncmp(e->name, rel, rl) == 0 && e->name[rl] == '/')
			return 2;
	}
	return 0;
}

/* One entry of a directory listing: a name inside a member's name. */
typedef struct ar_child {
	const char *s;
	size_t len;
	bool dir;
} ar_child;

static int cmp_child(const void *x, const void *y)
{
	const ar_child *p = x, *q = y;
	size_t n = p->len < q->len ? p->len : q->len;
	int c = memcmp(p->s, q->s, n);
	if (c)
		return c;
	return p->len < q->len ? -1 : p->len > q->len ? 1 : (int)q->dir - (int)p->dir; /* directories first */
}

/* The entries directly inside directory rel: each member below it names one (the next
 * component), a directory when more components follow; sorted, each name once. */
static int ar_list(void *ctx, const char *rel, qtk_dir_fn fn, void *arg)
{
	const ar *a = ctx;
	size_t rl = strlen(rel), n = 0, maxlen = 0;
	ar_child *c = qtk_calloc(a->n ? a->n : 1, sizeof *c);
	if (!c)
		return QTK_E_IO;
	for (size_t i = 0; i < a->n; i++) {
		const char *nm = a->e[i].name;
		if (rl && (strncmp(nm, rel, rl) != 0 || nm[rl] != '/'))
			continue;
		const char *s = rl ? nm + rl + 1 : nm, *slash = strchr(s, '/');
		if (!*s)
			continue;
		c[n].s = s;
		c[n].len = slash ? (size_t)(slash - s) : strlen(s);
		c[n].dir = slash || a->e[i].dir;
		if (c[n].len > maxlen)
			maxlen = c[n].len;
		n++;
	}
	qsort(c, n, sizeof *c, cmp_child);
	char *name = qtk_malloc(maxlen + 1);
	int rc = name ? 0 : QTK_E_IO;
	for (size_t i = 0; i < n && !rc; i++) {
		if (i && c[i].len == c[i - 1].len && !memcmp(c[i].s, c[i - 1].s, c[i].len))
			continue; /* the directory sorted first already said it */
		memcpy(name, c[i].s, c[i].len);
		name[c[i].len] = 0;
		rc = fn(arg, name, c[i].dir);
	}
	qtk_free(name);
	qtk_free(c);
	return rc;
}

/* Open the chosen model through the mount. */
static int open_inner(ar *a, const pick *p)
{
	qtk_model *m = a->m;
	size_t pl = strlen(a->path);
	if (!(a->root = qtk_malloc(pl + 2)))
		return oom(a);
	memcpy(a->root, a->path, pl);
	memcpy(a->root + pl, "!", 2);
	size_t hl = p->fmt ? 0 : dir_len(p->ent->name);
	char *rel = p->fmt ? qtk_strdup(p->ent->name) : qtk_strndup(p->ent->name, hl);
	char *vpath = rel ? (*rel ? qtk_path_join(a->root, rel) : qtk_strdup(a->root)) : NULL;
	if (!vpath) {
		qtk_free(rel);
		return oom(a);
	}
	qtk_vfs v = {a->root, ar_lookup, a, ar_list};
	const qtk_vfs *old = qtk_vfs_enter(&v);
	char *saved = m->path;
	m->path = vpath;
	m->fmt = p->fmt ? p->fmt : &qtk_format_hf; /* an HF directory: the HF reader, through the listing */
	int rc = m->fmt->open(m);
	m->path = saved;
	qtk_vfs_enter(old);
	if (rc && !m->err.code)
		qtk_err_set(&m->err, rc, vpath, -1, NULL, "cannot open");
	qtk_free(vpath);
	qtk_free(rel);
	return rc;
}

static int finish_open(ar *a)
{
	pick p;
	int rc = check_dups(a);
	if (!rc)
		rc = choose(a, &p);
	if (!rc)
		rc = open_inner(a, &p);
	return rc;
}

int qtk_ar_open_stream(qtk_model *m, int fd, uint64_t size, const char *kind, const char *name)
{
	ar a;
	memset(&a, 0, sizeof a);
	a.m = m;
	a.path = m->path;
	a.kind = kind;
	a.lim = qtk_ar_limits_get();
	a.fd = fd;
	a.size = size;
	a.in_memory = true;
	uint8_t h[512];
	size_t n = size < sizeof h ? (size_t)size : sizeof h;
	int rc = qtk_pread_full(fd, m->path, h, n, 0, &m->err);
	if (!rc && qtk_ar_is_tar(h, n)) {
		rc = read_tar(&a);
	} else if (!rc) {
		a.kind = "zst";
		char *nm = qtk_strdup(name);
		rc = nm ? add_ent(&a, nm, false, fd, 0, size) : oom(&a);
	}
	if (!rc)
		rc = finish_open(&a);
	ar_free(&a);
	return rc;
}

/* ---- the plugin ------------------------------------------------------------- */

static int ar_probe(const uint8_t *h, size_t n, uint64_t size)
{
	(void)size;
	if (qtk_ar_is_tar(h, n))
		return 100;
	if (n >= 4 && (!memcmp(h, "PK\x03\x04", 4) || !memcmp(h, "PK\x05\x06", 4)))
		return 90;
	if (n >= 3 && h[0] == 0x1f && h[1] == 0x8b && h[2] == 8)
		return 90;
	return 0;
}

/* List the members of the archive a->fd, told apart by its first bytes h.
 * A tar.gz is decompressed into a memfd first (*zfd, the caller closes). */
static int list_members(ar *a, uint8_t *h, size_t n, int *zfd)
{
	if (qtk_ar_is_tar(h, n)) {
		a->kind = "tar";
		return read_tar(a);
	}
	if (n >= 4 && h[0] == 'P' && h[1] == 'K') {
		a->kind = "zip";
		a->in_memory = true;
		int rc = zip_check(a);
		return rc ? rc : read_zip(a);
	}
	if (n < 2 || h[0] != 0x1f || h[1] != 0x8b)
		return arerr(a, NULL, "unsupported archive format (tar, tar.gz, tar.zst and zip are supported)");
	a->kind = "tar.gz";
	uint64_t zs = 0;
	int rc = gunzip(a, zfd, &zs);
	if (rc)
		return rc;
	n = zs < 512 ? (size_t)zs : 512;
	if ((rc = qtk_pread_full(*zfd, a->path, h, n, 0, &a->m->err)))
		return rc;
	if (!qtk_ar_is_tar(h, n))
		return arerr(a, NULL, "gzip data is not a tar archive (only .tar.gz is supported)");
	a->fd = *zfd;
	a->size = zs;
	a->in_memory = true;
	return read_tar(a);
}

static int ar_open(qtk_model *m)
{
	ar a;
	memset(&a, 0, sizeof a);
	a.m = m;
	a.path = m->path;
	a.lim = qtk_ar_limits_get();
	uint64_t size;
	int afd = qtk_file_open(m->path, &size, &m->err), zfd = -1;
	if (afd < 0)
		return afd;
	a.fd = afd;
	a.size = size;
	uint8_t h[512];
	size_t n = size < sizeof h ? (size_t)size : sizeof h;
	int rc = qtk_pread_full(afd, m->path, h, n, 0, &m->err);
	if (!rc)
		rc = list_members(&a, h, n, &zfd);
	if (!rc)
		rc = finish_open(&a);
	ar_free(&a);
	if (zfd >= 0)
		close(zfd);
	qtk_file_close(afd);
	return rc;
}

static const char *const ar_ext[] = {".tar", ".tar.zst", ".zip", NULL};

const qtk_format qtk_format_archive = {
	.name = "archive",
	.probe = ar_probe,
	.open = ar_open,
	.out = QTK_OUT_ARCHIVE,
	.writer = &qtk_archive_writer_ops,
	.out_ext = ar_ext,
	.can_store = qtk_ar_can_store,
};
