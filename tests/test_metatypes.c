/* test_metatypes.c - safetensors' string-typing convention (qtk.metadata_types) applies to
 * the string-only containers only: a GGUF that carries the key keeps its strings and the
 * key itself. */
#include "internal.h"
#include "t.h"
#include <unistd.h>

static char tmpdir[] = "/tmp/qtk-metatypes-XXXXXX";

/* A one-tensor model with general.name = "7" (a string), llama.block_count = 1 (u32) and,
 * when with_types, qtk.metadata_types naming general.name a u32; written by the library. */
static int write_model(const char *path, qtk_out_kind kind, bool with_types)
{
	qtk_model *d = qtk_model_new();
	qtk_tensor *t = qtk_model_add_tensor(d, "token_embd.weight");
	t->ndim = 2;
	t->shape[0] = 8;
	t->shape[1] = 4;
	t->layout.kind = QTK_LAYOUT_PLAIN;
	t->layout.type = QTK_T_F32;
	t->nparts = 1;
	t->parts[0].type = QTK_T_F32;
	t->parts[0].ndim = 2;
	memcpy(t->parts[0].shape, t->shape, sizeof t->shape);
	t->parts[0].nbytes = 8 * 4 * 4;
	qtk_tensor_finish(t);
	qtk_model_set_kv_str(d, "general.architecture", "llama");
	qtk_model_set_kv_str(d, "general.name", "7");
	qtk_kv *kv = qtk_model_add_kv(d, "llama.block_count");
	kv->val.type = QTK_V_U32;
	kv->val.v.u = 1;
	if (with_types)
		qtk_model_set_kv_str(d, QTK_META_TYPES_KEY, "{\"general.name\":\"u32\"}");
	float data[32] = {0};
	qtk_err e;
	qtk_err_clear(&e);
	qtk_writer *w = qtk_writer_open(path, kind, d, NULL, &e);
	int rc = w ? qtk_writer_put(w, data, sizeof data) : e.code;
	if (w)
		rc = rc ? (qtk_writer_abort(w), rc) : qtk_writer_finish(w);
	if (rc)
		printf("  write %s: %s\n", path, e.msg);
	qtk_close(d);
	return rc;
}

static void test_gguf_keeps_strings(void)
{
	char *p = qtk_path_join(tmpdir, "typed.gguf");
	CHECK(write_model(p, QTK_OUT_GGUF, true) == 0, "write");
	qtk_err e;
	qtk_model *m = qtk_open(p, &e);
	CHECK(m != NULL, "open: %s", e.msg);
	if (m) {
		const qtk_kv *n = qtk_kv_find(m, "general.name");
		CHECK(n && n->val.type == QTK_V_STR && !strcmp(n->val.v.str.s, "7"), "general.name stays the string \"7\" (type %d)",
		      n ? n->val.type : -1);
		const qtk_kv *k = qtk_kv_find(m, QTK_META_TYPES_KEY);
		CHECK(k && k->val.type == QTK_V_STR && !strcmp(k->val.v.str.s, "{\"general.name\":\"u32\"}"),
		      "the key %s stays", QTK_META_TYPES_KEY);
		qtk_close(m);
	}
	qtk_free(p);
}

/* The convention itself still works where it belongs: typed GGUF metadata written to
 * safetensors (strings plus qtk.metadata_types) reads back typed, the key consumed. */
static void test_safetensors_restores(void)
{
	char *p = qtk_path_join(tmpdir, "typed.safetensors");
	CHECK(write_model(p, QTK_OUT_SAFETENSORS, false) == 0, "write");
	qtk_err e;
	qtk_model *m = qtk_open(p, &e);
	CHECK(m != NULL, "open: %s", e.msg);
	if (m) {
		const qtk_kv *b = qtk_kv_find(m, "llama.block_count");
		CHECK(b && b->val.type == QTK_V_U32 && b->val.v.u == 1, "llama.block_count restored as u32");
		const qtk_kv *n = qtk_kv_find(m, "general.name");
		CHECK(n && n->val.type == QTK_V_STR && !strcmp(n->val.v.str.s, "7"), "general.name stays a string");
		CHECK(!qtk_kv_find(m, QTK_META_TYPES_KEY), "the key is consumed");
		qtk_close(m);
	}
	qtk_free(p);
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		return 1;
	test_gguf_keeps_strings();
	test_safetensors_restores();
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		printf("warning: could not remove %s\n", tmpdir);
	return T_DONE();
}
