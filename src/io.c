/* io.c - regular-file input, the bounded cursor, atomic output files. */
#include "internal.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <openssl/evp.h>
#include "lc.h"
#include <pthread.h>
#include <stdatomic.h>

static size_t max_read; /* test knob: cap on bytes per read call */

void qtk_test_max_read(size_t n) { max_read = n; }

/* ---- windows and mounts ------------------------------------------------- */

/* Registered windows: fd -> [base, base+size) of the file it duplicates. */
typedef struct win {
	int fd;
	uint64_t base, size;
} win;
static pthread_mutex_t win_mu = PTHREAD_MUTEX_INITIALIZER;
static win *wins;
static size_t nwins, capwins;
static atomic_size_t wins_live; /* nwins, read without the lock on the fast path */

static _Thread_local const qtk_vfs *cur_vfs;

const qtk_vfs *qtk_vfs_enter(const qtk_vfs *v)
{
	const qtk_vfs *old = cur_vfs;
	cur_vfs = v;
	return old;
}

/* rel of path under the current mount, or NULL when it is not below it. */
static const char *vfs_rel(const char *path)
{
	if (!cur_vfs)
		return NULL;
	size_t n = strlen(cur_vfs->root);
	if (strncmp(path, cur_vfs->root, n) != 0)
		return NULL;
	if (path[n] == 0)
		return path + n;
	return path[n] == '/' ? path + n + 1 : NULL;
}

static int vfs_lookup(const char *rel, int *fd, uint64_t *base, uint64_t *size)
{
	int f = -1;
	uint64_t b = 0, s = 0;
	int k = cur_vfs->lookup(cur_vfs->ctx, rel, &f, &b, &s);
	if (fd)
		*fd = f;
	if (base)
		*base = b;
	if (size)
		*size = s;
	return k;
}

static bool win_find(int fd, uint64_t *base, uint64_t *size)
{
	bool hit = false;
	pthread_mutex_lock(&win_mu);
	for (size_t i = 0; i < nwins; i++)
		if (wins[i].fd == fd) {
			*base = wins[i].base;
			*size = wins[i].size;
			hit = true;
			break;
		}
	pthread_mutex_unlock(&win_mu);
	return hit;
}

int qtk_window_open(int fd, uint64_t base, uint64_t size, const char *path, qtk_err *err)
{
	uint64_t end;
	if (!qtk_add_u64(base, size, &end) || end > INT64_MAX)
		return qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "window beyond the largest file offset");
	int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (nfd < 0)
		return qtk_err_sys(err, path, "cannot duplicate descriptor");
	pthread_mutex_lock(&win_mu);
	if (nwins == capwins) {
		size_t nc = capwins ? capwins * 2 : 16;
		win *w = qtk_realloc(wins, nc * sizeof *w);
		if (!w) {
			pthread_mutex_unlock(&win_mu);
			close(nfd);
			return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
		}
		wins = w;
		capwins = nc;
	}
	wins[nwins++] = (win){nfd, base, size};
	atomic_store(&wins_live, nwins);
	pthread_mutex_unlock(&win_mu);
	return nfd;
}

void qtk_file_close(int fd)
{
	if (fd < 0)
		return;
	if (atomic_load(&wins_live)) {
		pthread_mutex_lock(&win_mu);
		for (size_t i = 0; i < nwins; i++)
			if (wins[i].fd == fd) {
				wins[i] = wins[--nwins];
				break;
			}
		atomic_store(&wins_live, nwins);
		pthread_mutex_unlock(&win_mu);
	}
	close(fd);
}

int qtk_file_open(const char *path, uint64_t *size, qtk_err *err)
{
	const char *rel = vfs_rel(path);
	if (rel) {
		int fd;
		uint64_t base;
		int k = vfs_lookup(rel, &fd, &base, size);
		if (k == 2)
			return qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "is a directory, not a model file");
		if (k != 1)
			return qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "no such member in the archive");
		return qtk_window_open(fd, base, *size, path, err);
	}
	struct stat st;
	if (lstat(path, &st) != 0)
		return qtk_err_sys(err, path, "cannot open");
	if (S_ISLNK(st.st_mode) && stat(path, &st) != 0)
		return qtk_err_sys(err, path, "cannot follow link");
	if (S_ISDIR(st.st_mode))
		return qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "is a directory, not a model file");
	if (!S_ISREG(st.st_mode))
		return qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "not a regular file");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return qtk_err_sys(err, path, "cannot open");
	struct stat st2;
	if (fstat(fd, &st2) != 0 || !S_ISREG(st2.st_mode)) {
		close(fd);
		return qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "not a regular file");
	}
	*size = (uint64_t)st2.st_size;
	return fd;
}

int qtk_pread_full(int fd, const char *path, void *buf, size_t n, uint64_t off, qtk_err *err)
{
	uint8_t *p = buf;
	uint64_t wbase, wsize;
	if (atomic_load(&wins_live) && win_find(fd, &wbase, &wsize)) {
		if (off > wsize || n > wsize - off)
			return qtk_err_set(err, QTK_E_DATA, path, (int64_t)off, NULL,
					   "truncated: file ends at 0x%llx while %zu bytes at 0x%llx were expected",
					   (unsigned long long)wsize, n, (unsigned long long)off);
		off += wbase;
	}
	while (n) {
		size_t want = n;
		if (max_read && want > max_read)
			want = max_read;
		ssize_t r = pread(fd, p, want, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return qtk_err_sys(err, path, "read failed");
		}
		if (r == 0)
			return qtk_err_set(err, QTK_E_DATA, path, (int64_t)off, NULL,
					   "truncated: file ends at 0x%llx while %zu more bytes were expected",
					   (unsigned long long)off, n);
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int qtk_slurp(const char *path, uint64_t cap, uint8_t **out, size_t *len, qtk_err *err)
{
	uint64_t size;
	int fd = qtk_file_open(path, &size, err);
	if (fd < 0)
		return fd;
	int rc = 0;
	if (size > cap) {
		rc = qtk_err_set(err, QTK_E_DATA, path, 0, NULL, "file too large: %llu bytes, limit %llu",
				 (unsigned long long)size, (unsigned long long)cap);
		goto out;
	}
	uint8_t *b = qtk_malloc((size_t)size + 1);
	if (!b) {
		rc = qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
		goto out;
	}
	rc = qtk_pread_full(fd, path, b, (size_t)size, 0, err);
	if (rc) {
		qtk_free(b);
		goto out;
	}
	b[size] = 0;
	*out = b;
	*len = (size_t)size;
out:
	qtk_file_close(fd);
	return rc;
}

bool qtk_is_dir(const char *path)
{
	const char *rel = vfs_rel(path);
	if (rel)
		return vfs_lookup(rel, NULL, NULL, NULL) == 2;
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int qtk_dir_list(const char *path, qtk_dir_fn fn, void *arg, qtk_err *err)
{
	const char *rel = vfs_rel(path);
	if (rel) {
		if (vfs_lookup(rel, NULL, NULL, NULL) != 2 || !cur_vfs->list)
			return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "cannot read directory: not a directory");
		int rc = cur_vfs->list(cur_vfs->ctx, rel, fn, arg);
		return rc == QTK_E_IO ? qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory") : rc;
	}
	DIR *d = opendir(path);
	if (!d)
		return qtk_err_sys(err, path, "cannot read directory");
	struct dirent *e;
	int rc = 0;
	while (!rc && (e = readdir(d))) {
		const char *n = e->d_name;
		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		bool dir = e->d_type == DT_DIR;
		struct stat st;
		if (e->d_type == DT_UNKNOWN && fstatat(dirfd(d), n, &st, 0) == 0)
			dir = S_ISDIR(st.st_mode);
		rc = fn(arg, n, dir);
	}
	closedir(d);
	return rc;
}

bool qtk_path_exists(const char *path)
{
	const char *rel = vfs_rel(path);
	if (rel)
		return vfs_lookup(rel, NULL, NULL, NULL) != 0;
	struct stat st;
	return lstat(path, &st) == 0;
}

char *qtk_path_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	while (a > 1 && dir[a - 1] == '/')
		a--;
	char *p = qtk_malloc(a + b + 2);
	if (!p)
		return NULL;
	memcpy(p, dir, a);
	p[a] = '/';
	memcpy(p + a + 1, name, b + 1);
	return p;
}

char *qtk_path_dir(const char *path)
{
	const char *s = strrchr(path, '/');
	if (!s)
		return qtk_strdup(".");
	if (s == path)
		return qtk_strdup("/");
	return qtk_strndup(path, (size_t)(s - path));
}

const char *qtk_path_base(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* ---- cursor ------------------------------------------------------------ */

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

void qtk_prefault(void *p, size_t n)
{
#ifdef __linux__
	/* one call instead of a page fault per 4 KiB as the read fills the pages (a 520 KB record:
	 * 127 faults, ~1.4 ms in a virtual machine); kernels before 5.14 refuse it, harmlessly */
	const uintptr_t pg = 4096, a = ((uintptr_t)p + pg - 1) & ~(pg - 1), e = ((uintptr_t)p + n) & ~(pg - 1);
	if (n >= 16 * pg && e > a)
		madvise((void *)a, e - a, MADV_POPULATE_WRITE);
#else
	(void)p;
	(void)n;
#endif
}

void qtk_cur_init(qtk_cur *c, int fd, const char *path, uint64_t size, qtk_err *err)
{
	c->fd = fd;
	c->path = path;
	c->pos = 0;
	c->end = size;
	c->bpos = 0;
	c->blen = 0;
	c->fill = 16384;
	c->err = err;
}

int qtk_cur_bytes(qtk_cur *c, void *dst, size_t n, const char *field)
{
	if (n > c->end - c->pos)
		return qtk_err_set(c->err, QTK_E_DATA, c->path, (int64_t)c->pos, NULL,
				   "truncated: need %zu bytes for %s at 0x%llx, file ends at 0x%llx",
				   n, field, (unsigned long long)c->pos, (unsigned long long)c->end);
	uint8_t *d = dst;
	while (n) {
		if (c->pos >= c->bpos && c->pos < c->bpos + c->blen) {
			size_t at = (size_t)(c->pos - c->bpos);
			size_t k = c->blen - at;
			if (k > n)
				k = n;
			memcpy(d, c->buf + at, k);
			d += k;
			n -= k;
			c->pos += k;
			continue;
		}
		if (n >= sizeof c->buf) { /* large: read directly */
			qtk_prefault(d, n);
			int rc = qtk_pread_full(c->fd, c->path, d, n, c->pos, c->err);
			if (rc)
				return rc;
			c->pos += n;
			return 0;
		}
		uint64_t want = c->end - c->pos;
		if (!c->fill || c->fill > sizeof c->buf)
			c->fill = sizeof c->buf;
		if (want > c->fill)
			want = c->fill;
		c->fill *= 2;
		int rc = qtk_pread_full(c->fd, c->path, c->buf, (size_t)want, c->pos, c->err);
		if (rc)
			return rc;
		c->bpos = c->pos;
		c->blen = (size_t)want;
	}
	return 0;
}

int qtk_cur_u8(qtk_cur *c, uint8_t *v, const char *field) { return qtk_cur_bytes(c, v, 1, field); }

int qtk_cur_u16(qtk_cur *c, uint16_t *v, const char *field)
{
	uint8_t b[2];
	int rc = qtk_cur_bytes(c, b, 2, field);
	if (!rc)
		*v = qtk_rd16(b);
	return rc;
}

int qtk_cur_u32(qtk_cur *c, uint32_t *v, const char *field)
{
	uint8_t b[4];
	int rc = qtk_cur_bytes(c, b, 4, field);
	if (!rc)
		*v = qtk_rd32(b);
	return rc;
}

int qtk_cur_u64(qtk_cur *c, uint64_t *v, const char *field)
{
	uint8_t b[8];
	int rc = qtk_cur_bytes(c, b, 8, field);
	if (!rc)
		*v = qtk_rd64(b);
	return rc;
}

int qtk_cur_skip(qtk_cur *c, uint64_t n, const char *field)
{
	if (n > c->end - c->pos)
		return qtk_err_set(c->err, QTK_E_DATA, c->path, (int64_t)c->pos, NULL,
				   "truncated: need %llu bytes for %s at 0x%llx, file ends at 0x%llx",
				   (unsigned long long)n, field, (unsigned long long)c->pos,
				   (unsigned long long)c->end);
	c->pos += n;
	return 0;
}

/* ---- temporaries removed on signals ------------------------------------ */

#define MAX_TMP 1024
static char *volatile tmp_paths[MAX_TMP];
static volatile bool tmp_tree[MAX_TMP]; /* a directory whose entries are all ours */

static void cleanup_add(const char *p, bool tree)
{
	for (int i = 0; i < MAX_TMP; i++)
		if (!tmp_paths[i]) {
			tmp_tree[i] = tree;
			tmp_paths[i] = (char *)p;
			return;
		}
}

void qtk_cleanup_register(const char *p) { cleanup_add(p, false); }
void qtk_cleanup_register_dir(const char *p) { cleanup_add(p, true); }

void qtk_cleanup_unregister(const char *p)
{
	for (int i = 0; i < MAX_TMP; i++)
		if (tmp_paths[i] == p)
			tmp_paths[i] = NULL;
}

/* Unlink the entries of directory p (one level), with system calls only (async-signal-safe). */
static void empty_dir(const char *p)
{
#ifdef SYS_getdents64
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	char buf[4096] __attribute__((aligned(8)));
	for (int round = 0; round < 64; round++) {
		long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
		if (n <= 0)
			break;
		for (long at = 0; at < n;) {
			/* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, char name[] */
			unsigned short reclen;
			memcpy(&reclen, buf + at + 16, sizeof reclen);
			const char *name = buf + at + 19;
			if (!reclen)
				break;
			if (strcmp(name, ".") && strcmp(name, ".."))
				(void)unlinkat(fd, name, 0);
			at += reclen;
		}
	}
	close(fd);
#else
	DIR *d = opendir(p); /* not strictly async-signal-safe: the best this system offers */
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			(void)unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
#endif
}

void qtk_cleanup_run(void)
{
	/* newest first: files before the directories that hold them */
	for (int i = MAX_TMP - 1; i >= 0; i--) {
		const char *p = tmp_paths[i];
		if (!p)
			continue;
		if (tmp_tree[i])
			empty_dir(p);
		if (unlink(p) != 0)
			(void)rmdir(p);
	}
}

/* ---- inputs no output may replace ------------------------------------------- */

static struct prot {
	dev_t dev;
	ino_t ino;
	char *path;
} *prot;
static size_t nprot, cap_prot;
static pthread_mutex_t prot_lock = PTHREAD_MUTEX_INITIALIZER;

int qtk_protect_input(const char *path)
{
	struct stat st;
	if (!path || stat(path, &st) != 0)
		return 0;
	pthread_mutex_lock(&prot_lock);
	int rc = 0;
	for (size_t i = 0; i < nprot; i++)
		if (prot[i].dev == st.st_dev && prot[i].ino == st.st_ino)
			goto out;
	if (nprot == cap_prot) {
		size_t nc = cap_prot ? 2 * cap_prot : 16;
		struct prot *np = qtk_realloc(prot, nc * sizeof *np);
		if (!np) {
			rc = QTK_E_IO;
			goto out;
		}
		prot = np;
		cap_prot = nc;
	}
	prot[nprot].path = qtk_strdup(path);
	if (!prot[nprot].path) {
		rc = QTK_E_IO;
		goto out;
	}
	prot[nprot].dev = st.st_dev;
	prot[nprot].ino = st.st_ino;
	nprot++;
out:
	pthread_mutex_unlock(&prot_lock);
	return rc;
}

const char *qtk_protected_input(const char *path)
{
	struct stat st;
	if (!path || stat(path, &st) != 0)
		return NULL;
	const char *hit = NULL;
	pthread_mutex_lock(&prot_lock);
	for (size_t i = 0; i < nprot && !hit; i++)
		if (prot[i].dev == st.st_dev && prot[i].ino == st.st_ino)
			hit = prot[i].path;
	pthread_mutex_unlock(&prot_lock);
	return hit;
}

void qtk_protect_clear(void)
{
	pthread_mutex_lock(&prot_lock);
	for (size_t i = 0; i < nprot; i++)
		qtk_free(prot[i].path);
	qtk_free(prot);
	prot = NULL;
	nprot = cap_prot = 0;
	pthread_mutex_unlock(&prot_lock);
}

/* ---- atomic output ------------------------------------------------------ */

/* Write exactly n bytes at off (loops over short writes). */
int qtk_pwrite_full(int fd, const char *path, const void *buf, size_t n, uint64_t off, qtk_err *err)
{
	const uint8_t *p = buf;
	while (n) {
		ssize_t r = pwrite(fd, p, n, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return qtk_err_sys(err, path, "write failed");
		}
		if (r == 0)
			return qtk_err_set(err, QTK_E_IO, path, (int64_t)off, NULL, "write failed: no progress");
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int qtk_scratch_open(const char *near, qtk_err *err)
{
	char *p = qtk_strdup(near);
	size_t pn = p ? strlen(p) : 0;
	while (pn > 1 && p[pn - 1] == '/') /* a directory named "out/": beside it */
		p[--pn] = 0;
	char *dir = p ? qtk_path_dir(p) : NULL;
	qtk_free(p);
	if (!dir)
		return qtk_err_set(err, QTK_E_IO, near, -1, NULL, "out of memory");
	int fd = -1;
#ifdef O_TMPFILE
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
	if (fd < 0) { /* no O_TMPFILE here: a named file, unlinked at once */
		size_t n = strlen(dir) + 32;
		char *tmp = qtk_malloc(n);
		if (tmp) {
			snprintf(tmp, n, "%s/.qtk-scratch-XXXXXX", dir);
			fd = mkostemp(tmp, O_CLOEXEC);
			if (fd >= 0)
				(void)unlink(tmp);
			qtk_free(tmp);
		}
	}
	int rc = fd >= 0 ? fd : qtk_err_sys(err, dir, "cannot create a scratch file");
	qtk_free(dir);
	return rc;
}

#define OBUF (1u << 20)

int qtk_ofile_open(qtk_ofile *f, const char *path, qtk_err *err)
{
	memset(f, 0, sizeof *f);
	f->fd = -1;
	f->err = err;
	const char *in = qtk_protected_input(path);
	if (in)
		return qtk_err_set(err, QTK_E_USAGE, path, -1, NULL, "this output would replace the input %s", in);
	char *dir = qtk_path_dir(path);
	const char *base = qtk_path_base(path);
	size_t n = (dir ? strlen(dir) : 0) + strlen(base) + 32;
	f->tmp_path = qtk_malloc(n);
	f->final_path = qtk_strdup(path);
	f->buf = qtk_malloc(OBUF);
	if (!dir || !f->tmp_path || !f->final_path || !f->buf) {
		qtk_free(dir);
		qtk_ofile_abort(f);
		return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
	}
	f->md = EVP_MD_CTX_new();
	if (!f->md || EVP_DigestInit_ex(f->md, EVP_sha256(), NULL) != 1) {
		qtk_free(dir);
		qtk_ofile_abort(f);
		return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "cannot initialise SHA-256");
	}
	snprintf(f->tmp_path, n, "%s/.%s.qtk-XXXXXX", dir, base);
	qtk_free(dir);
	f->fd = mkstemp(f->tmp_path);
	if (f->fd < 0) {
		int rc = qtk_err_sys(err, path, "cannot create output");
		qtk_free(f->tmp_path);
		f->tmp_path = NULL;
		qtk_ofile_abort(f);
		return rc;
	}
	qtk_cleanup_register(f->tmp_path);
	return 0;
}

void qtk_ofile_list(qtk_ofile *f, qtk_outlist *outs)
{
	f->outs = outs;
	f->skip_hash = !outs;
}

/* The file's SHA-256 runs on a thread of its own: a written buffer is handed to it and the
 * writer goes on with a free one (OHQ_N buffers in all), so hashing overlaps the next buffer's
 * copy and write instead of adding to them. The hash sees the buffers in the order written. */
#define OHQ_N 4
/* queue entries: the buffers, and ranges copied in the kernel (qtk_ofile_copy_from), which the
 * thread reads back from the file to hash */
#define OHQ_SLOTS (2 * OHQ_N)

typedef struct ohash_q {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint8_t *buf[OHQ_SLOTS];  /* NULL: the range of len bytes at roff, read back from fd */
	uint64_t len[OHQ_SLOTS];
	uint64_t roff[OHQ_SLOTS];
	unsigned head, count; /* queued entries: head, head + 1, ... (mod OHQ_SLOTS) */
	bool taken;           /* the head entry is being hashed */
	unsigned nfree;
	uint8_t *freeb[OHQ_N];
	bool stop, failed, rfailed;
	qtk_err rerr;         /* the failed read-back's message */
	int fd;
	const char *path;
	uint8_t *scratch;     /* read-back buffer */
	void *md;
} ohash_q;

/* Hash n bytes of the file from off (bytes copied in the kernel, or a range read by the caller).
 * 0; 1 when reading back failed or *cancel (may be NULL) became non-zero (the message in err);
 * -1 when the digest itself did. */
static int hash_back(int fd, const char *path, void *md, uint8_t **scratch, uint64_t off, uint64_t n,
		     const int *cancel, qtk_err *err)
{
	if (!*scratch && !(*scratch = qtk_malloc(OBUF))) {
		qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
		return 1;
	}
	for (size_t k; n; off += k, n -= k) {
		k = n < OBUF ? (size_t)n : OBUF;
		if (cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED)) {
			qtk_err_set(err, QTK_E_IO, path, -1, NULL, "cancelled");
			return 1;
		}
		if (qtk_pread_full(fd, path, *scratch, k, off, err))
			return 1;
		if (EVP_DigestUpdate(md, *scratch, k) != 1)
			return -1;
	}
	return 0;
}

static void *ohash_main(void *arg)
{
	ohash_q *q = arg;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (!q->count && !q->stop)
			pthread_cond_wait(&q->cv, &q->mu);
		if (!q->count)
			break;
		uint8_t *b = q->buf[q->head];
		uint64_t n = q->len[q->head], ro = q->roff[q->head];
		q->taken = true;
		pthread_mutex_unlock(&q->mu);
		qtk_err re;
		qtk_err_clear(&re);
		const int hb = b ? 0 : hash_back(q->fd, q->path, q->md, &q->scratch, ro, n, NULL, &re);
		bool ok = hb != -1 && (!b || EVP_DigestUpdate(q->md, b, (size_t)n) == 1);
		pthread_mutex_lock(&q->mu);
		q->failed = q->failed || !ok;
		if (hb == 1 && !q->rfailed) {
			q->rfailed = true;
			q->rerr = re;
		}
		q->taken = false;
		q->head = (q->head + 1) % OHQ_SLOTS;
		q->count--;
		if (b)
			q->freeb[q->nfree++] = b;
		pthread_cond_broadcast(&q->cv);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

/* Start the thread; on failure hashing stays on the writing thread (f->hq NULL). */
static void ohash_start(qtk_ofile *f)
{
	ohash_q *q = qtk_calloc(1, sizeof *q);
	if (!q)
		return;
	q->md = f->md;
	q->fd = f->fd;
	q->path = f->final_path;
	for (int i = 0; i < OHQ_N - 1; i++)
		if (!(q->freeb[q->nfree] = qtk_malloc(OBUF)))
			break;
		else
			q->nfree++;
	bool ok = q->nfree == OHQ_N - 1 && !pthread_mutex_init(&q->mu, NULL);
	if (ok && pthread_cond_init(&q->cv, NULL)) {
		pthread_mutex_destroy(&q->mu);
		ok = false;
	}
	if (ok && pthread_create(&q->th, NULL, ohash_main, q)) {
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->mu);
		ok = false;
	}
	if (!ok) {
		for (unsigned i = 0; i < q->nfree; i++)
			qtk_free(q->freeb[i]);
		qtk_free(q);
		return;
	}
	f->hq = q;
}

/* The thread's failure, if any, into f->err (the lock held, or the thread ended). */
static int ohash_fail(qtk_ofile *f, const ohash_q *q)
{
	if (q->rfailed) {
		*f->err = q->rerr;
		return q->rerr.code;
	}
	return q->failed ? qtk_err_set(f->err, QTK_E_INTERNAL, f->final_path, -1, NULL, "SHA-256 update failed") : 0;
}

/* Queue an entry (the lock held): wait for a slot. A range that continues the last queued
 * range, not yet taken, extends it, so copies in the kernel never wait for the hash (which
 * reads them back as one range): a GGUF copy's tensors are copied and the fsync started while
 * the hash catches up, instead of the copy waiting tensor by tensor for a free slot. */
static void ohash_enqueue(ohash_q *q, uint8_t *b, uint64_t n, uint64_t off)
{
	if (!b && q->count) {
		const unsigned last = (q->head + q->count - 1) % OHQ_SLOTS;
		if (!q->buf[last] && q->roff[last] + q->len[last] == off && !(last == q->head && q->taken)) {
			q->len[last] += n;
			pthread_cond_broadcast(&q->cv);
			return;
		}
	}
	while (q->count == OHQ_SLOTS)
		pthread_cond_wait(&q->cv, &q->mu);
	unsigned at = (q->head + q->count) % OHQ_SLOTS;
	q->buf[at] = b;
	q->len[at] = n;
	q->roff[at] = off;
	q->count++;
	pthread_cond_broadcast(&q->cv);
}

/* Hand f->buf (blen bytes, already written) to the thread and take a free buffer. */
static int ohash_push(qtk_ofile *f)
{
	ohash_q *q = f->hq;
	pthread_mutex_lock(&q->mu);
	ohash_enqueue(q, f->buf, f->blen, 0);
	while (!q->nfree)
		pthread_cond_wait(&q->cv, &q->mu);
	f->buf = q->freeb[--q->nfree];
	const int rc = ohash_fail(f, q);
	pthread_mutex_unlock(&q->mu);
	return rc;
}

/* Hand the thread n bytes of the file from off, to read back and hash. */
static int ohash_push_range(qtk_ofile *f, uint64_t off, uint64_t n)
{
	ohash_q *q = f->hq;
	pthread_mutex_lock(&q->mu);
	ohash_enqueue(q, NULL, n, off);
	const int rc = ohash_fail(f, q);
	pthread_mutex_unlock(&q->mu);
	return rc;
}

/* Wait until every buffer is hashed, stop the thread, free its buffers; 0 or the failure. */
static int ohash_end(qtk_ofile *f)
{
	ohash_q *q = f->hq;
	if (!q)
		return 0;
	pthread_mutex_lock(&q->mu);
	q->stop = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	pthread_join(q->th, NULL);
	const int rc = ohash_fail(f, q);
	for (unsigned i = 0; i < q->nfree; i++)
		qtk_free(q->freeb[i]);
	qtk_free(q->scratch);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	qtk_free(q);
	f->hq = NULL;
	return rc;
}

int qtk_ofile_idle(qtk_ofile *f)
{
	return ohash_end(f);
}

/* Start the disk writes of what is written, every OFILE_WB bytes, without waiting for them:
 * the fsync at the end then waits for little more than the last few (a 202 MB output: the
 * fsync took ~0.11 s of a 0.35 s copy). Linux only; elsewhere the fsync does it all. */
#define OFILE_WB ((uint64_t)16 << 20)

static void ofile_writeback(qtk_ofile *f)
{
#ifdef SYNC_FILE_RANGE_WRITE
	if (f->written - f->wb_from >= OFILE_WB) {
		(void)sync_file_range(f->fd, (off_t)f->wb_from, (off_t)(f->written - f->wb_from), SYNC_FILE_RANGE_WRITE);
		f->wb_from = f->written;
	}
#else
	(void)f;
#endif
}

#define OFILE_SMALL ((size_t)64 << 10)

static int ofile_flush(qtk_ofile *f)
{
	size_t off = 0;
	/* a full buffer is hashed on the thread; a last partial one (or without the thread) here */
	const bool now = !f->defer_hash && !f->skip_hash; /* hashed as written */
	if (f->blen == OBUF && now && !f->hq)
		ohash_start(f);
	const bool async = f->blen && now && f->hq;
	if (f->blen && now && !async && EVP_DigestUpdate(f->md, f->buf, f->blen) != 1)
		return qtk_err_set(f->err, QTK_E_INTERNAL, f->final_path, -1, NULL, "SHA-256 update failed");
	while (off < f->blen) {
		ssize_t w = write(f->fd, f->buf + off, f->blen - off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return qtk_err_sys(f->err, f->final_path, "write failed");
		}
		off += (size_t)w;
	}
	/* a few bytes (padding, a header between copies) are read back like a copied range, so they
	 * join the ranges around them rather than take a slot of their own */
	int rc = !async ? 0 : f->blen < OFILE_SMALL ? ohash_push_range(f, f->written - f->blen, f->blen) : ohash_push(f);
	f->blen = 0;
	ofile_writeback(f);
	return rc;
}

int qtk_ofile_put(void *ctx, const uint8_t *p, size_t n) { return qtk_ofile_write(ctx, p, n); }

int qtk_ofile_write(qtk_ofile *f, const void *d, size_t n)
{
	const uint8_t *p = d;
	while (n) {
		size_t k = OBUF - f->blen;
		if (k > n)
			k = n;
		memcpy(f->buf + f->blen, p, k);
		f->blen += k;
		p += k;
		n -= k;
		f->written += k;
		if (f->blen == OBUF) {
			int rc = ofile_flush(f);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static atomic_bool no_copy_range;
void qtk_test_copy_range(bool on) { atomic_store(&no_copy_range, !on); }

int qtk_ofile_copy_from(qtk_ofile *f, int fd, const char *src_path, uint64_t off, uint64_t n, void *back)
{
	int rc = ofile_flush(f); /* the file position is then f->written */
	const uint64_t start = f->written;
	uint64_t done = 0;
#ifdef __linux__
	while (!rc && done < n && !f->no_kcopy && !atomic_load(&no_copy_range)) {
		loff_t in = (loff_t)(off + done);
		size_t k = n - done > ((size_t)1 << 30) ? (size_t)1 << 30 : (size_t)(n - done);
		ssize_t c = copy_file_range(fd, &in, f->fd, NULL, k, 0);
		if (c < 0 && errno == EINTR)
			continue;
		if (c <= 0) {
			f->no_kcopy = true; /* not here (another file system, an old kernel): read and write */
			break;
		}
		done += (uint64_t)c;
	}
#endif
	if (!rc && done) {
		f->written += done;
		const bool now = !f->defer_hash && !f->skip_hash;
		if (now && !f->hq)
			ohash_start(f);
		if (now && f->hq) {
			rc = ohash_push_range(f, start, done);
		} else if (now) { /* no thread: here */
			uint8_t *scratch = NULL;
			const int e = hash_back(f->fd, f->final_path, f->md, &scratch, start, done, NULL, f->err);
			qtk_free(scratch);
			if (e == -1)
				rc = qtk_err_set(f->err, QTK_E_INTERNAL, f->final_path, -1, NULL, "SHA-256 update failed");
			else if (e)
				rc = f->err->code;
		}
		ofile_writeback(f);
	}
	while (!rc && done < n) {
		size_t k = OBUF - f->blen;
		if (k > n - done)
			k = (size_t)(n - done);
		rc = qtk_pread_full(fd, src_path, f->buf + f->blen, k, off + done, f->err);
		if (rc)
			break;
		f->blen += k;
		f->written += k;
		done += k;
		if (f->blen == OBUF)
			rc = ofile_flush(f);
	}
	if (!rc && back && n) {
		rc = ofile_flush(f);
		rc = rc ? rc : qtk_pread_full(f->fd, f->final_path, back, (size_t)n, start, f->err);
	}
	return rc;
}

int qtk_ofile_pad(qtk_ofile *f, uint64_t n)
{
	static const uint8_t zeros[4096];
	while (n) {
		size_t k = n > sizeof zeros ? sizeof zeros : (size_t)n;
		int rc = qtk_ofile_write(f, zeros, k);
		if (rc)
			return rc;
		n -= k;
	}
	return 0;
}

int qtk_ofile_write_at(qtk_ofile *f, uint64_t off, const void *buf, size_t n)
{
	uint64_t end;
	if (f->synced || !qtk_add_u64(off, n, &end) || end > f->written)
		return qtk_err_set(f->err, QTK_E_INTERNAL, f->final_path, -1, NULL, "rewrite outside the written bytes");
	int rc = ofile_flush(f);
	rc = rc ? rc : qtk_pwrite_full(f->fd, f->final_path, buf, n, off, f->err);
	if (!rc)
		f->rehash = true;
	return rc;
}

int qtk_ofile_patch(qtk_ofile *f, uint64_t off, uint64_t n, int (*fn)(void *ctx, uint8_t *buf, size_t n),
		    void *ctx)
{
	uint64_t end;
	if (f->synced || !qtk_add_u64(off, n, &end) || end > f->written || n > SIZE_MAX)
		return qtk_err_set(f->err, QTK_E_INTERNAL, f->final_path, -1, NULL, "patch outside the written bytes");
	int rc = ofile_flush(f);
	uint8_t *b = rc ? NULL : qtk_malloc(n ? (size_t)n : 1);
	if (!rc && !b)
		rc = qtk_err_set(f->err, QTK_E_IO, f->final_path, -1, NULL, "out of memory");
	if (!rc)
		rc = qtk_pread_full(f->fd, f->tmp_path, b, (size_t)n, off, f->err);
	if (!rc)
		rc = fn(ctx, b, (size_t)n);
	if (!rc)
		rc = qtk_pwrite_full(f->fd, f->final_path, b, (size_t)n, off, f->err);
	qtk_free(b);
	if (!rc)
		f->rehash = true;
	return rc;
}

/* ---- hashing a file with its reads on a second thread ----
 * The reads (a copy out of the page cache each) go to a reader thread that fills a ring of
 * buffers while the caller hashes them in order, so a pass over a file that is only hashed
 * costs the SHA-256 alone on its thread. A tap (qtk_sha256_fd_tap) is a second consumer of the
 * same buffers on a thread of its own: whatever else wants the file's bytes in order (its
 * tensors' digests) gets them from this one read. A buffer is read again once both have seen
 * it. */
#define RA_BS ((size_t)1 << 20)
#define RA_NB 4

/* The reads of a range: RA_BS at a time, and a read starts at every cut (a tap's tensors
 * start a buffer of their own, so their pieces are whole within it). */
typedef struct {
	uint64_t cur, end;
	const uint64_t *cuts;
	size_t ncuts, ci;
} ra_iter;

static size_t ra_next(ra_iter *it, uint64_t *at)
{
	if (it->cur >= it->end)
		return 0;
	while (it->ci < it->ncuts && it->cuts[it->ci] <= it->cur)
		it->ci++;
	uint64_t lim = it->end - it->cur < RA_BS ? it->end : it->cur + RA_BS;
	if (it->ci < it->ncuts && it->cuts[it->ci] < lim)
		lim = it->cuts[it->ci];
	*at = it->cur;
	const size_t k = (size_t)(lim - it->cur);
	it->cur = lim;
	return k;
}

typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int fd;
	const char *path;
	ra_iter it;            /* the reader's */
	uint64_t nchunks;
	uint64_t nread;        /* chunks read so far: chunk c is in slot c % RA_NB */
	uint8_t *buf[RA_NB];
	size_t len[RA_NB];
	uint64_t at[RA_NB];
	int pend[RA_NB];       /* consumers yet to see the slot's chunk (0: free) */
	int nc;                /* consumers: the caller, and the tap thread when there is one */
	bool stop, failed;
	qtk_err err;           /* the reader's failure */
	const qtk_fd_tap *tap;
} rahead;

static void *rahead_main(void *arg)
{
	rahead *r = arg;
	for (uint64_t c = 0; c < r->nchunks; c++) {
		const int s = (int)(c % RA_NB);
		pthread_mutex_lock(&r->mu);
		while (r->pend[s] && !r->stop)
			pthread_cond_wait(&r->cv, &r->mu);
		const bool stop = r->stop;
		pthread_mutex_unlock(&r->mu);
		if (stop)
			return NULL;
		uint64_t at = 0;
		const size_t k = ra_next(&r->it, &at);
		qtk_err e;
		qtk_err_clear(&e);
		const int rc = qtk_pread_full(r->fd, r->path, r->buf[s], k, at, &e);
		pthread_mutex_lock(&r->mu);
		if (rc) { /* this chunk never comes: the consumers stop at it */
			r->failed = true;
			r->err = e;
		} else {
			r->len[s] = k;
			r->at[s] = at;
			r->pend[s] = r->nc;
			r->nread = c + 1;
		}
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
		if (rc)
			return NULL;
	}
	return NULL;
}

/* Chunk c for a consumer: its slot, or -1 when it will not come (a read failed, or stop). */
static int ra_wait(rahead *r, uint64_t c)
{
	pthread_mutex_lock(&r->mu);
	while (r->nread <= c && !r->failed && !r->stop)
		pthread_cond_wait(&r->cv, &r->mu);
	const int s = r->nread > c ? (int)(c % RA_NB) : -1;
	pthread_mutex_unlock(&r->mu);
	return s;
}

static void ra_done(rahead *r, int s)
{
	pthread_mutex_lock(&r->mu);
	r->pend[s]--;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static void *ratap_main(void *arg)
{
	rahead *r = arg;
	for (uint64_t c = 0; c < r->nchunks; c++) {
		const int s = ra_wait(r, c);
		if (s < 0)
			break;
		r->tap->fn(r->tap->ctx, r->at[s], r->buf[s], r->len[s]);
		ra_done(r, s);
	}
	return NULL;
}

/* Without threads (or their memory) the reads, and the tap, are the caller's. */
static int ra_inline(int fd, const char *path, void *md, ra_iter it, const int *cancel, const qtk_fd_tap *tap,
		     qtk_err *err)
{
	if (!tap) {
		uint8_t *scratch = NULL;
		const int rc = hash_back(fd, path, md, &scratch, it.cur, it.end - it.cur, cancel, err);
		qtk_free(scratch);
		return rc;
	}
	const size_t bs = it.end - it.cur < RA_BS ? (size_t)(it.end - it.cur) : RA_BS;
	uint8_t *b = qtk_malloc(bs);
	if (!b) {
		qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
		return 1;
	}
	int rc = 0;
	uint64_t at = 0;
	for (size_t k; !rc && (k = ra_next(&it, &at)) > 0;) {
		if (cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED)) {
			qtk_err_set(err, QTK_E_IO, path, -1, NULL, "cancelled");
			rc = 1;
		} else if (qtk_pread_full(fd, path, b, k, at, err)) {
			rc = 1;
		} else if (EVP_DigestUpdate(md, b, k) != 1) {
			rc = -1;
		} else {
			tap->fn(tap->ctx, at, b, k);
		}
	}
	qtk_free(b);
	return rc;
}

int qtk_sha256_fd_range(int fd, const char *path, void *md, uint64_t off, uint64_t n, const int *cancel,
			qtk_err *err)
{
	return qtk_sha256_fd_tap(fd, path, md, off, n, cancel, NULL, err);
}

int qtk_sha256_fd_tap(int fd, const char *path, void *md, uint64_t off, uint64_t n, const int *cancel,
		      const qtk_fd_tap *tap, qtk_err *err)
{
	if (n > UINT64_MAX - off) {
		qtk_err_set(err, QTK_E_INTERNAL, path, (int64_t)(off & INT64_MAX), NULL, "range past 2^64 bytes");
		return 1;
	}
	if (!n)
		return 0;
	const ra_iter it0 = {off, off + n, tap ? tap->cuts : NULL, tap ? tap->ncuts : 0, 0};
	rahead r = {.fd = fd, .path = path, .it = it0, .nc = 1, .tap = tap};
	{
		ra_iter it = it0;
		uint64_t at;
		while (ra_next(&it, &at))
			r.nchunks++;
	}
	pthread_t th, tth;
	bool live = false, tlive = false, mem = r.nchunks > 1;
	const size_t bs = n < RA_BS ? (size_t)n : RA_BS; /* a read is at most this */
	for (int i = 0; i < RA_NB && mem; i++)
		mem = (r.buf[i] = qtk_malloc(bs)) != NULL;
	if (mem && !pthread_mutex_init(&r.mu, NULL)) {
		if (!pthread_cond_init(&r.cv, NULL)) {
			/* the tap's thread first: the reader counts its consumers once */
			tlive = tap && pthread_create(&tth, NULL, ratap_main, &r) == 0;
			r.nc = tlive ? 2 : 1;
			live = pthread_create(&th, NULL, rahead_main, &r) == 0;
			if (!live && tlive) {
				pthread_mutex_lock(&r.mu);
				r.stop = true;
				pthread_cond_broadcast(&r.cv);
				pthread_mutex_unlock(&r.mu);
				pthread_join(tth, NULL);
				tlive = false;
			}
			if (!live)
				pthread_cond_destroy(&r.cv);
		}
		if (!live)
			pthread_mutex_destroy(&r.mu);
	}
	if (!live) {
		for (int i = 0; i < RA_NB; i++)
			qtk_free(r.buf[i]);
		return ra_inline(fd, path, md, it0, cancel, tap, err);
	}
	int rc = 0;
	bool cancelled = false;
	for (uint64_t c = 0; c < r.nchunks && !rc; c++) {
		const int s = ra_wait(&r, c);
		if (s < 0) { /* the read of this chunk failed */
			rc = 1;
			break;
		}
		if (cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED)) {
			rc = 1;
			cancelled = true;
			qtk_err_set(err, QTK_E_IO, path, -1, NULL, "cancelled");
			break;
		}
		if (EVP_DigestUpdate(md, r.buf[s], r.len[s]) != 1)
			rc = -1;
		else if (tap && !tlive)
			tap->fn(tap->ctx, r.at[s], r.buf[s], r.len[s]);
		ra_done(&r, s);
	}
	if (rc) {
		pthread_mutex_lock(&r.mu);
		r.stop = true;
		pthread_cond_broadcast(&r.cv);
		pthread_mutex_unlock(&r.mu);
	}
	pthread_join(th, NULL);
	if (tlive) /* it sees every chunk read (all of them, unless this failed) */
		pthread_join(tth, NULL);
	if (r.failed && rc != -1 && !cancelled) { /* a read failed: its error, whatever cancel says now */
		*err = r.err;
		rc = 1;
	}
	pthread_cond_destroy(&r.cv);
	pthread_mutex_destroy(&r.mu);
	for (int i = 0; i < RA_NB; i++)
		qtk_free(r.buf[i]);
	return rc;
}

int qtk_sha256_file(int fd, const char *path, uint64_t size, const int *cancel, const qtk_fd_tap *tap, uint8_t out[32],
		    qtk_err *err)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md)
		return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
	int rc = 0;
	unsigned len = 0;
	const int r = EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1 ? -1 : qtk_sha256_fd_tap(fd, path, md, 0, size, cancel, tap, err);
	if (r == -1 || (!r && (EVP_DigestFinal_ex(md, out, &len) != 1 || len != 32)))
		rc = qtk_err_set(err, QTK_E_INTERNAL, path, -1, NULL, "SHA-256 failed");
	else if (r)
		rc = err->code ? err->code : qtk_err_set(err, QTK_E_IO, path, -1, NULL, "read failed");
	EVP_MD_CTX_free(md);
	return rc;
}

/* SHA-256 of the whole temporary file (after a patch). */
static int ofile_rehash(qtk_ofile *f)
{
	if (EVP_DigestInit_ex(f->md, EVP_sha256(), NULL) != 1)
		return qtk_err_set(f->err, QTK_E_INTERNAL, f->final_path, -1, NULL, "SHA-256 failed");
	const int rc = qtk_sha256_fd_range(f->fd, f->tmp_path, f->md, 0, f->written, NULL, f->err);
	if (rc == -1)
		return qtk_err_set(f->err, QTK_E_INTERNAL, f->final_path, -1, NULL, "SHA-256 update failed");
	return !rc ? 0 : f->err->code ? f->err->code : qtk_err_set(f->err, QTK_E_IO, f->final_path, -1, NULL, "read failed");
}

typedef struct {
	int fd, rc, err;
} fsync_job;

static void *fsync_main(void *arg)
{
	fsync_job *j = arg;
	j->rc = fsync(j->fd);
	j->err = errno;
	return NULL;
}

int qtk_ofile_sync(qtk_ofile *f)
{
	if (f->synced)
		return 0;
	int rc = ofile_flush(f);
	if (rc) {
		qtk_err keep = *f->err;
		(void)ohash_end(f);
		*f->err = keep;
		return rc;
	}
	/* every byte is written: the fsync writes them back while the hash thread catches up, or
	 * while the hash pass reads the page cache */
	const bool hash = (f->rehash || f->defer_hash) && !f->skip_hash;
	fsync_job fj = {f->fd, 0, 0};
	pthread_t th;
	const bool threaded = (hash || f->hq) && pthread_create(&th, NULL, fsync_main, &fj) == 0;
	rc = ohash_end(f);
	if (hash && !rc)
		rc = ofile_rehash(f);
	if (threaded) {
		pthread_join(th, NULL);
	} else {
		fj.rc = fsync(f->fd);
		fj.err = errno;
	}
	if (rc)
		return rc;
	if (fj.rc != 0) {
		errno = fj.err;
		return qtk_err_sys(f->err, f->final_path, "fsync failed");
	}
	if (fchmod(f->fd, 0644) != 0)
		return qtk_err_sys(f->err, f->final_path, "chmod failed");
	if (close(f->fd) != 0) {
		f->fd = -1;
		return qtk_err_sys(f->err, f->final_path, "close failed");
	}
	f->fd = -1;
	unsigned dl = 0;
	if (EVP_DigestFinal_ex(f->md, f->sha256, &dl) != 1 || dl != 32)
		return qtk_err_set(f->err, QTK_E_INTERNAL, f->final_path, -1, NULL, "SHA-256 failed");
	f->synced = true;
	return 0;
}

int qtk_ofile_commit(qtk_ofile *f)
{
	int rc = qtk_ofile_sync(f);
	if (rc)
		return rc;
	if (rename(f->tmp_path, f->final_path) != 0)
		return qtk_err_sys(f->err, f->final_path, "cannot rename into place");
	if (f->outs) {
		qtk_outfile *o = qtk_realloc(f->outs->f, (f->outs->n + 1) * sizeof *o);
		if (o) {
			f->outs->f = o;
			o += f->outs->n;
			o->path = qtk_strdup(f->final_path);
			o->size = f->written;
			memcpy(o->sha256, f->sha256, 32);
			if (o->path)
				f->outs->n++;
		}
	}
	qtk_cleanup_unregister(f->tmp_path);
	/* fsync the directory so the rename is durable */
	char *dir = qtk_path_dir(f->final_path);
	if (dir) {
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			(void)fsync(dfd);
			close(dfd);
		}
		qtk_free(dir);
	}
	qtk_free(f->tmp_path);
	f->tmp_path = NULL;
	qtk_free(f->final_path);
	f->final_path = NULL;
	qtk_free(f->buf);
	f->buf = NULL;
	EVP_MD_CTX_free(f->md);
	f->md = NULL;
	return 0;
}

void qtk_outlist_free(qtk_outlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		qtk_free(l->f[i].path);
	qtk_free(l->f);
	l->f = NULL;
	l->n = 0;
}

struct qtk_sha256 {
	EVP_MD_CTX *md;
	bool ok;
};

qtk_sha256 *qtk_sha256_begin(void)
{
	qtk_sha256 *h = qtk_malloc(sizeof *h);
	if (!h)
		return NULL;
	h->md = EVP_MD_CTX_new();
	h->ok = h->md && EVP_DigestInit_ex(h->md, EVP_sha256(), NULL) == 1;
	return h;
}

void qtk_sha256_add(qtk_sha256 *h, const void *p, size_t n)
{
	if (h && h->ok)
		h->ok = EVP_DigestUpdate(h->md, p, n) == 1;
}

bool qtk_sha256_end(qtk_sha256 *h, uint8_t out[32])
{
	if (!h)
		return false;
	unsigned dl = 0;
	bool ok = h->ok && EVP_DigestFinal_ex(h->md, out, &dl) == 1 && dl == 32;
	EVP_MD_CTX_free(h->md);
	qtk_free(h);
	return ok;
}

void qtk_hex(const uint8_t *d, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[d[i] >> 4];
		out[2 * i + 1] = hx[d[i] & 15];
	}
	out[2 * n] = 0;
}

void qtk_ofile_abort(qtk_ofile *f)
{
	(void)ohash_end(f);
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	if (f->tmp_path) {
		unlink(f->tmp_path);
		qtk_cleanup_unregister(f->tmp_path);
		qtk_free(f->tmp_path);
	}
	f->tmp_path = NULL;
	qtk_free(f->final_path);
	f->final_path = NULL;
	qtk_free(f->buf);
	f->buf = NULL;
	EVP_MD_CTX_free(f->md);
	f->md = NULL;
}
