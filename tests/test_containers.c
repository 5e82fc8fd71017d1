/* test_containers.c - the container table (src/container.c): output kinds from path
 * forms, names, writers and capabilities derived from the descriptors; the same
 * capability message through the planner's question and the writer; the vfs
 * directory listing on the file system, on a mount, and inside a tar (the HF
 * reader's weight-file chooser running on an archive member directory). */
#include "internal.h"
#include "t.h"
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp[256];

static const char *tp(const char *name)
{
	static char b[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(b[k], sizeof b[k], "%s/%s", tmp, name);
	return b[k];
}

static void test_path_forms(void)
{
	static const struct {
		const char *path;
		qtk_out_kind kind;
		const char *name;
	} cases[] = {
		{"m.gguf", QTK_OUT_GGUF, "gguf"},
		{"M.GGUF", QTK_OUT_GGUF, "gguf"},
		{"m.safetensors", QTK_OUT_SAFETENSORS, "safetensors"},
		{"m.qpk", QTK_OUT_QPK, "qpk"},
		{"m.awq", QTK_OUT_QPK, "qpk"},
		{"m.gptq", QTK_OUT_QPK, "qpk"},
		{"m.tar", QTK_OUT_ARCHIVE, "archive"},
		{"m.tar.zst", QTK_OUT_ARCHIVE, "archive"},
		{"m.zip", QTK_OUT_ARCHIVE, "archive"},
		{"out/", QTK_OUT_HF, "hf"},
		{"out.gguf/", QTK_OUT_HF, "hf"},
		{"m.bin", QTK_OUT_UNKNOWN, "unknown"},
		{"m.zst", QTK_OUT_UNKNOWN, "unknown"},
		{"m", QTK_OUT_UNKNOWN, "unknown"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		qtk_out_kind k = qtk_out_kind_for_path(cases[i].path);
		CHECK(k == cases[i].kind, "%s: kind %d, want %d", cases[i].path, (int)k, (int)cases[i].kind);
		CHECK(!strcmp(qtk_out_kind_name(k), cases[i].name), "%s: name %s", cases[i].path, qtk_out_kind_name(k));
	}
	/* an existing directory is an HF directory whatever its name */
	CHECK(mkdir(tp("x.gguf"), 0755) == 0, "mkdir");
	CHECK(qtk_out_kind_for_path(tp("x.gguf")) == QTK_OUT_HF, "existing directory");

	/* every writing row: its kind maps back to it, each suffix to its kind */
	size_t n, writers = 0;
	const qtk_format *const *f = qtk_formats(&n);
	CHECK(n >= 6, "table rows %zu", n);
	for (size_t i = 0; i < n; i++) {
		CHECK(f[i]->name && f[i]->open, "row %zu reads", i);
		if (!f[i]->writer) {
			CHECK(f[i]->out == QTK_OUT_UNKNOWN && !f[i]->out_ext && !f[i]->out_dir, "%s: read only", f[i]->name);
			continue;
		}
		writers++;
		CHECK(f[i]->out != QTK_OUT_UNKNOWN && qtk_format_for_out(f[i]->out) == f[i], "%s: kind", f[i]->name);
		CHECK(!strcmp(qtk_out_kind_name(f[i]->out), f[i]->name), "%s: name", f[i]->name);
		CHECK(f[i]->can_store, "%s: capability", f[i]->name);
		CHECK(f[i]->out_dir || (f[i]->out_ext && f[i]->out_ext[0]), "%s: path form", f[i]->name);
		for (const char *const *e = f[i]->out_ext; e && *e; e++) {
			char p[64];
			snprintf(p, sizeof p, "model%s", *e);
			CHECK(qtk_out_kind_for_path(p) == f[i]->out, "%s -> %s", p, f[i]->name);
		}
		if (f[i]->out_dir)
			CHECK(qtk_out_kind_for_path("some/dir/") == f[i]->out, "dir -> %s", f[i]->name);
	}
	CHECK(writers == 5, "writing containers %zu", writers);
	char forms[256];
	qtk_out_path_forms(forms, sizeof forms);
	CHECK(!strcmp(forms, ".gguf, .safetensors, .qpk, .awq, .gptq, .tar, .tar.zst, .zip or a directory/"), "forms: %s",
	      forms);
	CHECK(qtk_format_for_out(QTK_OUT_UNKNOWN) == NULL, "unknown has no container");
	CHECK(qtk_format_qpk.verify_tensor != NULL, "qpk verify hook");
}

/* A description with one tensor of the given layout. */
static qtk_model *one_tensor(const char *name, bool awq)
{
	qtk_model *d = qtk_model_new();
	qtk_tensor *t = qtk_model_add_tensor(d, name);
	t->ndim = 2;
	t->shape[0] = 64;
	t->shape[1] = 128;
	if (!awq) {
		t->layout.type = QTK_T_F32;
		t->nparts = 1;
		t->parts[0].type = QTK_T_F32;
		t->parts[0].ndim = 2;
		t->parts[0].shape[0] = 64;
		t->parts[0].shape[1] = 128;
		t->parts[0].nbytes = 64 * 128 * 4;
	} else {
		t->layout.kind = QTK_LAYOUT_AWQ;
		t->layout.type = QTK_T_I32;
		t->layout.bits = 4;
		t->layout.group_size = 128;
		t->nparts = 3;
		static const char *const roles[] = {"qweight", "qzeros", "scales"};
		uint64_t s[3][2] = {{128, 8}, {1, 8}, {1, 64}};
		for (int p = 0; p < 3; p++) {
			snprintf(t->parts[p].role, sizeof t->parts[p].role, "%s", roles[p]);
			t->parts[p].type = p == 2 ? QTK_T_F16 : QTK_T_I32;
			t->parts[p].ndim = 2;
			t->parts[p].shape[0] = s[p][0];
			t->parts[p].shape[1] = s[p][1];
			t->parts[p].nbytes = s[p][0] * s[p][1] * (p == 2 ? 2 : 4);
		}
	}
	qtk_tensor_finish(t);
	return d;
}

static void test_capability(void)
{
	qtk_err pe, we;
	/* AWQ into GGUF: the planner's question and the writer's refusal say the same */
	qtk_model *d = one_tensor("blk.0.attn_q.weight", true);
	qtk_err_clear(&pe);
	int rc = qtk_out_can_store(QTK_OUT_GGUF, &d->tensors[0], false, "in/", d->tensors[0].name, &pe);
	CHECK(rc == QTK_E_DATA && strstr(pe.msg, "cannot be stored in GGUF"), "planner: %s", pe.msg);
	CHECK(qtk_out_can_store(QTK_OUT_GGUF, &d->tensors[0], false, NULL, NULL, NULL) == QTK_E_DATA, "question only");
	qtk_writer *w = qtk_writer_open(tp("awq.gguf"), QTK_OUT_GGUF, d, NULL, &we);
	CHECK(!w && we.code == QTK_E_DATA, "writer refuses: %s", we.msg);
	qtk_writer_abort(w);
	CHECK(!strcmp(pe.msg, we.msg), "same message: '%s' vs '%s'", pe.msg, we.msg);
	CHECK(!strcmp(pe.subject, we.subject), "same subject: '%s' vs '%s'", pe.subject, we.subject);
	CHECK(access(tp("awq.gguf"), F_OK) != 0, "nothing written");
	/* ... and an archive or safetensors takes it */
	CHECK(qtk_out_can_store(QTK_OUT_SAFETENSORS, &d->tensors[0], true, NULL, NULL, NULL) == 0, "st holds awq");
	CHECK(qtk_out_can_store(QTK_OUT_ARCHIVE, &d->tensors[0], true, NULL, NULL, NULL) == 0, "bundle holds awq");
	CHECK(qtk_out_can_store(QTK_OUT_QPK, &d->tensors[0], true, NULL, NULL, NULL) == 0, "qpk holds awq");
	qtk_close(d);

	/* a ggml block type into safetensors: one message, from the table and the writer */
	d = one_tensor("k", false);
	qtk_tensor *t = &d->tensors[0];
	t->layout.type = t->parts[0].type = QTK_T_Q4_0;
	t->parts[0].nbytes = 64 * 128 / 32 * 18;
	qtk_err_clear(&pe);
	rc = qtk_out_can_store(QTK_OUT_SAFETENSORS, t, true, tp("q.safetensors"), NULL, &pe);
	CHECK(rc == QTK_E_DATA && strstr(pe.msg, "Q4_0"), "st refuses: %s", pe.msg);
	w = qtk_writer_open(tp("q.safetensors"), QTK_OUT_SAFETENSORS, d, NULL, &we);
	CHECK(!w && !strcmp(pe.msg, we.msg) && !strcmp(pe.subject, we.subject) && !strcmp(pe.file, we.file),
	      "writer says the same: %s", we.msg);
	qtk_writer_abort(w);
	CHECK(qtk_out_can_store(QTK_OUT_GGUF, t, true, NULL, NULL, NULL) == 0, "gguf holds q4_0");
	CHECK(qtk_out_can_store(QTK_OUT_ARCHIVE, t, true, NULL, NULL, NULL) == 0, "bundle holds q4_0");

	/* GGUF's naming rule only when names are asked about */
	char lng[80];
	memset(lng, 'a', 70);
	lng[70] = 0;
	free(t->name);
	t->name = strdup(lng);
	CHECK(qtk_out_can_store(QTK_OUT_GGUF, t, false, NULL, NULL, NULL) == 0, "layout only");
	qtk_err_clear(&pe);
	CHECK(qtk_out_can_store(QTK_OUT_GGUF, t, true, "o.gguf", NULL, &pe) == QTK_E_DATA &&
		      strstr(pe.msg, "longer than 63"),
	      "long name: %s", pe.msg);
	qtk_err_clear(&pe);
	CHECK(qtk_out_can_store(QTK_OUT_UNKNOWN, t, true, "o.bin", NULL, &pe) == QTK_E_USAGE, "unknown kind");
	qtk_close(d);
}

/* ---- directory listing ------------------------------------------------------- */

typedef struct seen {
	char names[16][64];
	bool dir[16];
	int n;
} seen;

static int collect(void *arg, const char *name, bool is_dir)
{
	seen *s = arg;
	if (s->n < 16) {
		snprintf(s->names[s->n], sizeof s->names[s->n], "%s", name);
		s->dir[s->n++] = is_dir;
	}
	return 0;
}

static int find(const seen *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->names[i], name))
			return i;
	return -1;
}

static int stop_at_b(void *arg, const char *name, bool is_dir)
{
	(void)arg;
	(void)is_dir;
	return !strcmp(name, "b") ? 7 : 0;
}

static void touch(const char *p, const char *text)
{
	FILE *f = fopen(p, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void test_list_fs(void)
{
	CHECK(mkdir(tp("d"), 0755) == 0 && mkdir(tp("d/sub"), 0755) == 0, "mkdir");
	touch(tp("d/a"), "x");
	touch(tp("d/b"), "y");
	seen s = {0};
	qtk_err e;
	qtk_err_clear(&e);
	CHECK(qtk_dir_list(tp("d"), collect, &s, &e) == 0, "list: %s", e.msg);
	CHECK(s.n == 3, "3 entries, got %d", s.n);
	int a = find(&s, "a"), sub = find(&s, "sub");
	CHECK(a >= 0 && !s.dir[a] && find(&s, "b") >= 0, "files");
	CHECK(sub >= 0 && s.dir[sub], "directory");
	CHECK(qtk_dir_list(tp("d"), stop_at_b, NULL, &e) == 7, "callback stops the listing");
	qtk_err_clear(&e);
	CHECK(qtk_dir_list(tp("nope"), collect, &s, &e) == QTK_E_IO && strstr(e.msg, "cannot read directory"),
	      "absent: %s", e.msg);
}

/* A mount of our own: the library routes paths below the root to it. */
static int my_lookup(void *ctx, const char *rel, int *fd, uint64_t *base, uint64_t *size)
{
	(void)ctx;
	(void)fd;
	(void)base;
	(void)size;
	return !strcmp(rel, "") || !strcmp(rel, "dir") ? 2 : !strcmp(rel, "dir/f") ? 1 : 0;
}

static int my_list(void *ctx, const char *rel, qtk_dir_fn fn, void *arg)
{
	*(int *)ctx += 1;
	return !strcmp(rel, "dir") ? fn(arg, "f", false) : 0;
}

static void test_list_mount(void)
{
	int calls = 0;
	qtk_vfs v = {"/virt!", my_lookup, &calls, my_list};
	const qtk_vfs *old = qtk_vfs_enter(&v);
	seen s = {0};
	qtk_err e;
	qtk_err_clear(&e);
	int rc = qtk_dir_list("/virt!/dir", collect, &s, &e);
	int rc2 = qtk_dir_list("/virt!/dir/f", collect, &s, &e);
	qtk_vfs_enter(old);
	CHECK(rc == 0 && calls == 1 && s.n == 1 && !strcmp(s.names[0], "f") && !s.dir[0], "mount listing");
	CHECK(rc2 == QTK_E_IO && strstr(e.msg, "not a directory"), "a file is not listed: %s", e.msg);
}

static int tar_add(struct archive *a, const char *name, const void *data, size_t n, bool dir)
{
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, dir ? AE_IFDIR : AE_IFREG);
	archive_entry_set_perm(e, dir ? 0755 : 0644);
	archive_entry_set_size(e, dir ? 0 : (la_int64_t)n);
	int rc = archive_write_header(a, e) == ARCHIVE_OK &&
			 (dir || archive_write_data(a, data, n) == (la_ssize_t)n)
		 ? 0
		 : -1;
	archive_entry_free(e);
	return rc;
}

/* A tar holding an HF directory "m/" with the given .safetensors names (and a "m/sub/"). */
static int make_tar(const char *path, const char *const *st, int nst)
{
	static const char cfg[] = "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\"}";
	static const char hdr[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
	uint8_t file[8 + sizeof hdr - 1 + 8];
	uint64_t hl = sizeof hdr - 1;
	for (int i = 0; i < 8; i++)
		file[i] = (uint8_t)(hl >> (8 * i));
	memcpy(file + 8, hdr, hl);
	memset(file + 8 + hl, 0, 8);
	struct archive *a = archive_write_new();
	int rc = archive_write_set_format_pax_restricted(a) == ARCHIVE_OK && archive_write_open_filename(a, path) == ARCHIVE_OK
			 ? 0
			 : -1;
	if (!rc)
		rc = tar_add(a, "m/config.json", cfg, sizeof cfg - 1, false);
	for (int i = 0; i < nst && !rc; i++) {
		char nm[128];
		snprintf(nm, sizeof nm, "m/%s", st[i]);
		rc = tar_add(a, nm, file, sizeof file, false);
	}
	if (!rc)
		rc = tar_add(a, "m/sub/notes.txt", "x", 1, false);
	archive_write_close(a);
	archive_write_free(a);
	return rc;
}

static void test_list_tar(void)
{
	/* the HF reader's chooser picks the one weight file, listed inside the tar */
	static const char *const one[] = {"weights-b.safetensors"};
	CHECK(make_tar(tp("one.tar"), one, 1) == 0, "tar written");
	qtk_err e;
	qtk_model *m = qtk_open(tp("one.tar"), &e);
	CHECK(m && m->ntensors == 1 && !strcmp(m->tensors[0].name, "w"), "hf dir in tar opens: %s", m ? "" : e.msg);
	if (m)
		CHECK(m->nfiles >= 1 && strstr(m->files[0], "one.tar!/m/weights-b.safetensors"), "file %s",
		      m->nfiles ? m->files[0] : "?");
	qtk_close(m);
	/* two weight files and no index: the HF reader's own refusal, naming the member directory */
	static const char *const two[] = {"a.safetensors", "b.safetensors"};
	CHECK(make_tar(tp("two.tar"), two, 2) == 0, "tar written");
	m = qtk_open(tp("two.tar"), &e);
	CHECK(!m && strstr(e.msg, "2 safetensors files but no model.safetensors.index.json") &&
		      strstr(e.file, "two.tar!/m"),
	      "two weight files: %s: %s", e.file, e.msg);
	qtk_close(m);
}

/* qtk_ofile_open refuses an output that resolves to a protected input (same file, a hard
 * link, a symlink), naming both paths, and leaves the input as it was. */
static void test_protect(void)
{
	FILE *f = fopen(tp("in.bin"), "wb");
	CHECK(f != NULL, "create");
	if (!f)
		return;
	fputs("input", f);
	fclose(f);
	CHECK(link(tp("in.bin"), tp("hard.bin")) == 0, "link");
	CHECK(symlink(tp("in.bin"), tp("sym.bin")) == 0, "symlink");
	CHECK(qtk_protect_input(tp("in.bin")) == 0, "protect");
	CHECK(qtk_protect_input(tp("absent.bin")) == 0, "an absent path is ignored");
	const char *outs[] = {"in.bin", "hard.bin", "sym.bin"};
	for (int i = 0; i < 3; i++) {
		qtk_err e;
		qtk_err_clear(&e);
		qtk_ofile of;
		int rc = qtk_ofile_open(&of, tp(outs[i]), &e);
		CHECK(rc == QTK_E_USAGE, "%s: rc %d", outs[i], rc);
		CHECK(strstr(e.msg, "in.bin") && strstr(e.file, outs[i]), "%s: %s: %s", outs[i], e.file, e.msg);
	}
	qtk_err e;
	qtk_err_clear(&e);
	qtk_ofile of;
	CHECK(qtk_ofile_open(&of, tp("other.bin"), &e) == 0, "another name: %s", e.msg);
	qtk_ofile_abort(&of);
	struct stat st;
	CHECK(stat(tp("in.bin"), &st) == 0 && st.st_size == 5, "the input is intact");
	qtk_protect_clear();
	qtk_err_clear(&e);
	CHECK(qtk_ofile_open(&of, tp("in.bin"), &e) == 0, "cleared: %s", e.msg);
	qtk_ofile_abort(&of);
}

static int patch_two(void *ctx, uint8_t *buf, size_t n)
{
	(void)ctx;
	memset(buf, 0xee, n);
	return 0;
}

/* qtk_ofile_copy_from appends a range of another file, in the kernel or (forced, or across file
 * systems) read and written, between ordinary writes: the file holds the same bytes and its
 * SHA-256 is theirs, while writing and after a patch (the hash taken at sync). */
static void sha_of(const uint8_t *p, size_t n, uint8_t out[32])
{
	qtk_sha256 *h = qtk_sha256_begin();
	if (h) {
		qtk_sha256_add(h, p, n);
		qtk_sha256_end(h, out);
	}
}

static void test_copy_from(void)
{
	enum { SRC = (5 << 20) + 333 };
	uint8_t *src = malloc(SRC), *want = malloc(2 * SRC), *got = malloc(2 * SRC);
	if (!src || !want || !got) {
		CHECK(0, "memory");
		free(src), free(want), free(got);
		return;
	}
	uint32_t x = 12345;
	for (size_t i = 0; i < SRC; i++)
		src[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 23);
	const char *dirs[] = {tmp, "/dev/shm"};
	for (int d = 0; d < 2; d++) {
		char sp[400];
		snprintf(sp, sizeof sp, "%s/qtk-copy-src-%d.bin", dirs[d], (int)getpid());
		FILE *f = fopen(sp, "wb");
		if (!f) {
			if (d)
				T_SKIP("/dev/shm not writable");
			else
				CHECK(0, "source file");
			continue;
		}
		fwrite(src, 1, SRC, f);
		fclose(f);
		int fd = open(sp, O_RDONLY);
		for (int mode = 0; mode < 8 && fd >= 0; mode++) {
			/* skip: nothing takes the hash (qconvert --quiet): the same bytes, nothing hashed */
			const bool kernel = mode & 1, patch = mode & 2, skip = mode & 4;
			qtk_test_copy_range(kernel);
			qtk_err e;
			qtk_err_clear(&e);
			qtk_ofile of;
			CHECK(qtk_ofile_open(&of, tp("copied.bin"), &e) == 0, "open: %s", e.msg);
			of.defer_hash = patch;
			if (skip)
				qtk_ofile_list(&of, NULL);
			size_t n = 0;
			static const uint8_t head[100] = {1, 2, 3};
			int rc = qtk_ofile_write(&of, head, sizeof head);
			memcpy(want + n, head, sizeof head), n += sizeof head;
			rc = rc ? rc : qtk_ofile_copy_from(&of, fd, sp, 12345, (3 << 20) + 7, got);
			CHECK(rc || !memcmp(got, src + 12345, (3 << 20) + 7), "mode %d: the bytes read back", mode);
			memcpy(want + n, src + 12345, (3 << 20) + 7), n += (3 << 20) + 7;
			rc = rc ? rc : qtk_ofile_write(&of, src, 50);
			memcpy(want + n, src, 50), n += 50;
			rc = rc ? rc : qtk_ofile_copy_from(&of, fd, sp, 0, 300, NULL);
			memcpy(want + n, src, 300), n += 300;
			/* a run of copies, more than the hash thread's queue holds: queued ranges that
			 * continue one another are joined while the thread is busy */
			for (int k = 0; k < 40 && !rc; k++) {
				const size_t len = 1 + (x = x * 1103515245u + 12345u) % 5000;
				const size_t at = (x = x * 1103515245u + 12345u) % (SRC - len);
				rc = qtk_ofile_copy_from(&of, fd, sp, at, len, NULL);
				memcpy(want + n, src + at, len), n += len;
			}
			rc = rc ? rc : qtk_ofile_copy_from(&of, fd, sp, SRC - (2 << 20), 2 << 20, NULL);
			memcpy(want + n, src + SRC - (2 << 20), 2 << 20), n += 2 << 20;
			if (patch && !rc) {
				rc = qtk_ofile_patch(&of, 1, 2, patch_two, NULL);
				want[1] = want[2] = 0xee;
			}
			rc = rc ? rc : qtk_ofile_commit(&of);
			CHECK(rc == 0, "%s, %s%s: %s", dirs[d], kernel ? "kernel" : "read/write", patch ? ", patched" : "",
			      e.msg);
			if (rc) {
				qtk_ofile_abort(&of);
				continue;
			}
			FILE *g = fopen(tp("copied.bin"), "rb");
			size_t gn = g ? fread(got, 1, 2 * SRC, g) : 0;
			if (g)
				fclose(g);
			uint8_t sha[32];
			sha_of(want, skip ? 0 : n, sha);
			CHECK(gn == n && !memcmp(got, want, n), "%s mode %d: the bytes (%zu of %zu)", dirs[d], mode, gn, n);
			CHECK(!memcmp(sha, of.sha256, 32), "%s mode %d: the SHA-256%s", dirs[d], mode,
			      skip ? " of nothing" : "");
			qtk_ofile_abort(&of);
		}
		qtk_test_copy_range(true);
		if (fd >= 0)
			close(fd);
		unlink(sp);
	}
	free(src), free(want), free(got);
}

int main(void)
{
	snprintf(tmp, sizeof tmp, "/tmp/qtk-containers-XXXXXX");
	if (!mkdtemp(tmp))
		return 1;
	test_path_forms();
	test_capability();
	test_list_fs();
	test_list_mount();
	test_list_tar();
	test_protect();
	test_copy_from();
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		printf("note: could not remove %s\n", tmp);
	return T_DONE();
}
