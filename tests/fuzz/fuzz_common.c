/* fuzz_common.c - temporary files and the shared read path of the fuzz targets. */
#include "fuzz.h"
#include "view/decode.h"
#include "record/digest.h"
#include "record/prov.h"
#include "qtk_archive.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FZ_READ_BUDGET (4u << 20)       /* bytes read from tensor parts per input */
#define FZ_CHUNK (64u << 10)            /* one read */
#define FZ_DECODE_PARAMS (1u << 16)     /* decode tensors up to this many values */
#define FZ_DIGEST_BYTES (1u << 20)      /* content digests when the model is this small */

static char base_dir[512];
static char in_dir[600];
static char primary_path[700];
static volatile uint64_t sink; /* keeps the reads of metadata bytes alive */

static void rm_files(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	char p[1024];
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    (size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < sizeof p)
			unlink(p);
	closedir(d);
}

static void cleanup(void)
{
	if (!base_dir[0])
		return;
	rm_files(in_dir);
	rmdir(in_dir);
	rmdir(base_dir);
	base_dir[0] = 0;
}

void fz_init(void)
{
	static int done;
	if (done)
		return;
	done = 1;
	/* archive caps small enough for the fuzzer's memory limit */
	qtk_ar_limits l = *qtk_ar_limits_get();
	l.mem = 64u << 20;
	l.entry = 32u << 20;
	if (l.entries > 4096)
		l.entries = 4096;
	qtk_ar_limits_set(&l);
	const char *t = getenv("TMPDIR");
	if (!t || !*t)
		t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	if ((size_t)snprintf(base_dir, sizeof base_dir, "%s/qtk-fuzz-XXXXXX", t) >= sizeof base_dir ||
	    !mkdtemp(base_dir)) {
		perror("fuzz: cannot create a temporary directory");
		abort();
	}
	snprintf(in_dir, sizeof in_dir, "%s/in", base_dir);
	atexit(cleanup);
}

const char *fz_indir(void) { return in_dir; }

void fz_clear(void)
{
	rm_files(in_dir);
	rmdir(in_dir);
}

static bool name_ok(const uint8_t *s, size_t n)
{
	if (n == 0 || n > 64 || s[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-'))
			return false;
	}
	return true;
}

static int write_file(const char *name, const uint8_t *d, size_t n)
{
	char p[800];
	if ((size_t)snprintf(p, sizeof p, "%s/%s", in_dir, name) >= sizeof p)
		return -1;
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror("fuzz: cannot write an input file");
		abort();
	}
	while (n) {
		ssize_t w = write(fd, d, n);
		if (w <= 0) {
			perror("fuzz: cannot write an input file");
			abort();
		}
		d += w;
		n -= (size_t)w;
	}
	close(fd);
	return 0;
}

/* Position of the next "\n#QF#" at or after `from`, or n. */
static size_t next_mark(const uint8_t *d, size_t n, size_t from)
{
	static const char mk[] = "\n" FZ_MARK;
	size_t k = sizeof mk - 1;
	for (size_t i = from; i + k <= n; i++)
		if (d[i] == '\n' && memcmp(d + i, mk, k) == 0)
			return i;
	return n;
}

/* Parse "#QF#name\n" at d[at]; returns the position after the newline, or 0. */
static size_t parse_name(const uint8_t *d, size_t n, size_t at, char *name, size_t nn)
{
	size_t k = strlen(FZ_MARK);
	if (at + k > n || memcmp(d + at, FZ_MARK, k) != 0)
		return 0;
	size_t s = at + k, e = s;
	while (e < n && e - s <= 64 && d[e] != '\n')
		e++;
	if (e >= n || d[e] != '\n')
		return 0;
	if (name_ok(d + s, e - s) && e - s < nn) {
		memcpy(name, d + s, e - s);
		name[e - s] = 0;
	} else {
		name[0] = 0; /* dropped */
	}
	return e + 1;
}

int fz_materialize(const uint8_t *d, size_t n, const char *defname, const char **primary)
{
	fz_init();
	fz_clear();
	if (mkdir(in_dir, 0700) != 0) {
		perror("fuzz: cannot create the input directory");
		abort();
	}
	char name[80];
	snprintf(name, sizeof name, "%s", defname);
	size_t pos = 0, q = parse_name(d, n, 0, name, sizeof name);
	if (q)
		pos = q;
	int nfiles = 0;
	primary_path[0] = 0;
	for (;;) {
		size_t end = next_mark(d, n, pos);
		if (name[0] && nfiles < FZ_MAX_FILES) {
			write_file(name, d + pos, end - pos);
			if (!nfiles)
				snprintf(primary_path, sizeof primary_path, "%s/%s", in_dir, name);
			nfiles++;
		}
		if (end >= n)
			break;
		q = parse_name(d, n, end + 1, name, sizeof name);
		if (!q)
			break;
		pos = q;
	}
	if (!nfiles)
		snprintf(primary_path, sizeof primary_path, "%s/%s", in_dir, defname);
	*primary = primary_path;
	return nfiles;
}

void fz_check_rc(int rc, const qtk_err *e, const char *what)
{
	if (rc == 0)
		return;
	if (rc == QTK_E_INTERNAL || rc < QTK_E_INTERNAL || rc > 0) {
		fprintf(stderr, "fuzz: %s returned %d (internal error = a bug)\n", what, rc);
		if (e)
			fprintf(stderr, "fuzz:   file '%s' offset %lld subject '%s': %s\n", e->file, (long long)e->offset,
				e->subject, e->msg);
		abort();
	}
}

static void touch(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t s = 0;
	for (size_t i = 0; i < n; i++)
		s += b[i];
	sink += s;
}

static void exercise_meta(const qtk_model *m)
{
	for (size_t i = 0; i < m->nkv; i++) {
		const qtk_kv *kv = &m->kv[i];
		touch(kv->key, strlen(kv->key));
		const qtk_value *v = &kv->val;
		sink += strlen(qtk_value_type_name(v->type));
		if (v->type == QTK_V_STR) {
			touch(v->v.str.s, (size_t)v->v.str.len);
		} else if (v->type == QTK_V_ARR && v->arr) {
			if (v->elem == QTK_V_STR) {
				const qtk_str *s = v->arr;
				for (uint64_t k = 0; k < v->n; k++)
					touch(s[k].s, (size_t)s[k].len);
			} else {
				touch(v->arr, (size_t)(v->n * qtk_value_size(v->elem)));
			}
		}
	}
	for (size_t i = 0; i < m->nblobs; i++) {
		touch(m->blobs[i].name, strlen(m->blobs[i].name));
		touch(m->blobs[i].data, m->blobs[i].len);
	}
}

/* Read every part of t (within the remaining budget: the whole part, or its
 * first and last chunks). */
static void read_parts(qtk_model *m, const qtk_tensor *t, uint8_t *buf, uint64_t *budget)
{
	for (int p = 0; p < t->nparts; p++) {
		uint64_t nb = t->parts[p].nbytes;
		if (nb <= *budget) {
			for (uint64_t off = 0; off < nb; off += FZ_CHUNK) {
				size_t k = (size_t)(nb - off < FZ_CHUNK ? nb - off : FZ_CHUNK);
				int rc = qtk_read_part(m, t, p, off, buf, k);
				fz_check_rc(rc, &m->err, "qtk_read_part");
				if (rc)
					return;
				touch(buf, k);
			}
			*budget -= nb;
		} else if (nb && *budget >= 2 * FZ_CHUNK) {
			size_t k = (size_t)(nb < FZ_CHUNK ? nb : FZ_CHUNK);
			int rc = qtk_read_part(m, t, p, 0, buf, k);
			fz_check_rc(rc, &m->err, "qtk_read_part");
			if (!rc)
				rc = qtk_read_part(m, t, p, nb - k, buf, k);
			fz_check_rc(rc, &m->err, "qtk_read_part");
			*budget -= 2 * FZ_CHUNK;
		}
	}
}

void fz_exercise(qtk_model *m)
{
	char id[128];
	sink += strlen(qtk_model_format(m));
	exercise_meta(m);
	uint8_t *buf = malloc(FZ_CHUNK);
	if (!buf)
		abort();
	uint64_t budget = FZ_READ_BUDGET, total = 0;
	bool is_qpk = strcmp(qtk_model_format(m), "qpk") == 0;
	for (size_t i = 0; i < m->ntensors; i++) {
		const qtk_tensor *t = &m->tensors[i];
		qtk_layout_id(&t->layout, id, sizeof id);
		sink += strlen(id) + strlen(qtk_layout_type_name(&t->layout)) + strlen(t->name);
		total += t->n_bytes;
		read_parts(m, t, buf, &budget);
		if (qtk_can_decode(t) && t->n_params && t->n_params <= FZ_DECODE_PARAMS && t->n_bytes <= budget) {
			float *dst = malloc((size_t)t->n_params * sizeof *dst);
			if (!dst)
				abort();
			int rc = qtk_decode_tensor(m, t, dst);
			fz_check_rc(rc, &m->err, "qtk_decode_tensor");
			if (!rc)
				touch(dst, (size_t)t->n_params * sizeof *dst);
			free(dst);
			budget -= t->n_bytes;
		}
		if (is_qpk && t->n_bytes <= budget) {
			int rc = qtk_qpk_verify_tensor(m, i);
			fz_check_rc(rc, &m->err, "qtk_qpk_verify_tensor");
			budget -= t->n_bytes;
		}
	}
	free(buf);
	if (total <= FZ_DIGEST_BYTES) {
		qtk_digests d;
		qtk_digest_opts o = {0};
		qtk_err e;
		qtk_err_clear(&e);
		o.threads = 1;
		int rc = qtk_digest_model(m, &o, &d, &e);
		fz_check_rc(rc, &e, "qtk_digest_model");
		if (!rc)
			qtk_digests_free(&d);
	}
	size_t len = 0;
	const char *where = NULL;
	const char *rec = qtk_prov_find(m, &len, &where);
	if (rec) {
		cJSON *j = NULL;
		qtk_err e;
		qtk_err_clear(&e);
		int rc = qtk_prov_parse(rec, len, m->path, &j, &e);
		fz_check_rc(rc, &e, "qtk_prov_parse");
		cJSON_Delete(j);
	}
}

void fz_open_and_exercise(const char *path)
{
	qtk_err e;
	qtk_model *m = qtk_open(path, &e);
	if (getenv("QTK_FUZZ_DEBUG")) {
		if (m)
			fprintf(stderr, "fuzz: open %s: %s, %zu tensors\n", path, qtk_model_format(m), m->ntensors);
		else
			fprintf(stderr, "fuzz: open %s: error %d: %s\n", path, e.code, e.msg);
	}
	if (!m) {
		if (e.code >= 0 || !e.msg[0]) {
			fprintf(stderr, "fuzz: qtk_open failed without an error (code %d, msg '%s')\n", e.code, e.msg);
			abort();
		}
		fz_check_rc(e.code, &e, "qtk_open");
		return;
	}
	fz_exercise(m);
	qtk_close(m);
}
