/* mkseed.c - tiny inputs for the fuzz seed corpora (run by tests/fuzz/mkcorpus.sh).
 *
 *   mkseed tiny OUT.gguf     a llama-shaped F32 GGUF: 1 block, n_embd 32, 2 heads, 1 KV head,
 *                            n_ff 32, a 32-token SentencePiece-style vocabulary
 *   mkseed kq OUT.gguf       one [4, 256] F32 matrix and a norm (for k-quant and iq4 seeds)
 *   mkseed imatrix OUT.dat   a legacy llama-imatrix file for the tiny model's matrices
 *   mkseed imatrix-gguf OUT  the same as a GGUF imatrix (in_sum2 and counts tensors)
 *   mkseed prov MODEL        print MODEL's provenance record (kv or side file) to stdout
 *
 * Deterministic: an integer PRNG, no clock. Uses the library's own writers.
 */
#include "internal.h"
#include "record/prov.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rng = 12345;
static float rnd(void)
{
	rng = rng * 1664525u + 1013904223u;
	return (float)(rng >> 8) * (1.0f / 16777216.0f) - 0.5f;
}

typedef struct tdef {
	const char *name;
	uint64_t rows, cols; /* rows 0: 1-D */
} tdef;

static void add_u32(qtk_model *m, const char *k, uint32_t v)
{
	qtk_kv *kv = qtk_model_add_kv(m, k);
	kv->val.type = QTK_V_U32;
	kv->val.v.u = v;
}

static void add_f32(qtk_model *m, const char *k, double v)
{
	qtk_kv *kv = qtk_model_add_kv(m, k);
	kv->val.type = QTK_V_F32;
	kv->val.v.f = v;
}

static void add_vocab(qtk_model *m, uint32_t n)
{
	qtk_kv *kv = qtk_model_add_kv(m, "tokenizer.ggml.tokens");
	kv->val.type = QTK_V_ARR;
	kv->val.elem = QTK_V_STR;
	kv->val.n = n;
	qtk_str *s = qtk_calloc(n, sizeof *s);
	for (uint32_t i = 0; i < n; i++) {
		char b[16];
		if (i == 0)
			snprintf(b, sizeof b, "<unk>");
		else if (i == 1)
			snprintf(b, sizeof b, "<s>");
		else if (i == 2)
			snprintf(b, sizeof b, "</s>");
		else if (i < 6)
			snprintf(b, sizeof b, "<0x%02X>", i - 3 + 0x20);
		else
			snprintf(b, sizeof b, "\xe2\x96\x81%c%c", 'a' + (char)(i % 26), 'a' + (char)(i / 26));
		s[i].s = qtk_strdup(b);
		s[i].len = strlen(b);
	}
	kv->val.arr = s;
	kv = qtk_model_add_kv(m, "tokenizer.ggml.scores");
	kv->val.type = QTK_V_ARR;
	kv->val.elem = QTK_V_F32;
	kv->val.n = n;
	float *f = qtk_calloc(n, sizeof *f);
	for (uint32_t i = 0; i < n; i++)
		f[i] = -(float)i;
	kv->val.arr = f;
	kv = qtk_model_add_kv(m, "tokenizer.ggml.token_type");
	kv->val.type = QTK_V_ARR;
	kv->val.elem = QTK_V_I32;
	kv->val.n = n;
	int32_t *t = qtk_calloc(n, sizeof *t);
	for (uint32_t i = 0; i < n; i++)
		t[i] = i == 0 ? 2 : i < 3 ? 3 : i < 6 ? 6 : 1;
	kv->val.arr = t;
	qtk_model_set_kv_str(m, "tokenizer.ggml.model", "llama");
	add_u32(m, "tokenizer.ggml.bos_token_id", 1);
	add_u32(m, "tokenizer.ggml.eos_token_id", 2);
	add_u32(m, "tokenizer.ggml.unknown_token_id", 0);
}

/* kind 0: llama-shaped with a vocabulary; 1: bare; 2: a GGUF imatrix (non-negative values). */
static int write_model(const char *path, const tdef *ts, size_t nt, int kind)
{
	bool llama = kind == 0;
	qtk_model *d = qtk_model_new();
	if (kind == 2) {
		qtk_model_set_kv_str(d, "general.type", "imatrix");
		add_u32(d, "imatrix.chunk_count", 8);
		qtk_kv *kv = qtk_model_add_kv(d, "imatrix.datasets");
		kv->val.type = QTK_V_ARR;
		kv->val.elem = QTK_V_STR;
		kv->val.n = 1;
		qtk_str *s = qtk_calloc(1, sizeof *s);
		s->s = qtk_strdup("wiki.test");
		s->len = 9;
		kv->val.arr = s;
	} else {
		qtk_model_set_kv_str(d, "general.architecture", "llama");
		qtk_model_set_kv_str(d, "general.name", "qtk fuzz seed");
	}
	if (llama) {
		add_u32(d, "llama.block_count", 1);
		add_u32(d, "llama.context_length", 64);
		add_u32(d, "llama.embedding_length", 32);
		add_u32(d, "llama.feed_forward_length", 32);
		add_u32(d, "llama.attention.head_count", 2);
		add_u32(d, "llama.attention.head_count_kv", 1);
		add_f32(d, "llama.attention.layer_norm_rms_epsilon", 1e-5);
		add_u32(d, "general.file_type", 0);
		add_vocab(d, 32);
	}
	for (size_t i = 0; i < nt; i++) {
		qtk_tensor *t = qtk_model_add_tensor(d, ts[i].name);
		t->ndim = ts[i].rows ? 2 : 1;
		t->shape[0] = ts[i].rows ? ts[i].rows : ts[i].cols;
		t->shape[1] = ts[i].rows ? ts[i].cols : 0;
		t->layout.kind = QTK_LAYOUT_PLAIN;
		t->layout.type = QTK_T_F32;
		t->layout.bits = 32;
		t->nparts = 1;
		t->parts[0].type = QTK_T_F32;
		t->parts[0].ndim = t->ndim;
		memcpy(t->parts[0].shape, t->shape, sizeof t->shape);
		t->parts[0].nbytes = 4 * (ts[i].rows ? ts[i].rows : 1) * ts[i].cols;
		qtk_tensor_finish(t);
	}
	qtk_err e;
	qtk_writer *w = qtk_writer_open(path, QTK_OUT_GGUF, d, NULL, &e);
	int rc = w ? 0 : e.code;
	for (size_t i = 0; i < nt && !rc; i++) {
		size_t n = (size_t)d->tensors[i].parts[0].nbytes / 4;
		float *v = malloc(n * sizeof *v);
		for (size_t k = 0; k < n; k++)
			v[k] = kind == 2 ? 8.0f + rnd() : ts[i].rows ? rnd() * (k % 13 == 0 ? 4.0f : 1.0f)
								: 1.0f + 0.01f * (float)k;
		rc = qtk_writer_put(w, v, n * sizeof *v);
		free(v);
	}
	if (w)
		rc = rc ? (qtk_writer_abort(w), rc) : qtk_writer_finish(w);
	if (rc)
		fprintf(stderr, "mkseed: %s: %s\n", path, e.msg);
	qtk_close(d);
	return rc ? 1 : 0;
}

static const tdef tiny[] = {
	{"token_embd.weight", 32, 32},     {"blk.0.attn_norm.weight", 0, 32},
	{"blk.0.attn_q.weight", 32, 32},   {"blk.0.attn_k.weight", 16, 32},
	{"blk.0.attn_v.weight", 16, 32},   {"blk.0.attn_output.weight", 32, 32},
	{"blk.0.ffn_norm.weight", 0, 32},  {"blk.0.ffn_gate.weight", 32, 32},
	{"blk.0.ffn_up.weight", 32, 32},   {"blk.0.ffn_down.weight", 32, 32},
	{"output_norm.weight", 0, 32},     {"output.weight", 32, 32},
};
static const tdef kq[] = {{"blk.0.ffn_up.weight", 4, 256}, {"blk.0.ffn_norm.weight", 0, 256}};
static const tdef im[] = {{"blk.0.attn_q.weight.in_sum2", 1, 32}, {"blk.0.attn_q.weight.counts", 0, 1},
			  {"blk.0.ffn_down.weight.in_sum2", 1, 32}, {"blk.0.ffn_down.weight.counts", 0, 1}};

static void put32(FILE *f, int32_t v)
{
	uint8_t b[4];
	qtk_wr32(b, (uint32_t)v);
	fwrite(b, 1, 4, f);
}

/* Legacy llama-imatrix: n; per entry name_len, name, ncall, nval, values; chunks, dataset. */
static int write_imatrix(const char *path)
{
	static const char *const names[] = {"blk.0.attn_q.weight", "blk.0.ffn_down.weight", "output.weight"};
	FILE *f = fopen(path, "wb");
	if (!f)
		return 1;
	put32(f, 3);
	for (int i = 0; i < 3; i++) {
		put32(f, (int32_t)strlen(names[i]));
		fwrite(names[i], 1, strlen(names[i]), f);
		put32(f, 4);
		put32(f, 32);
		for (int k = 0; k < 32; k++) {
			float v = 1.0f + (float)(k * (i + 1));
			fwrite(&v, 4, 1, f);
		}
	}
	put32(f, 8);
	put32(f, 9);
	fwrite("wiki.test", 1, 9, f);
	return fclose(f) ? 1 : 0;
}

static int print_prov(const char *path)
{
	qtk_err e;
	qtk_model *m = qtk_open(path, &e);
	if (!m) {
		fprintf(stderr, "mkseed: %s: %s\n", path, e.msg);
		return 1;
	}
	size_t len = 0;
	const char *rec = qtk_prov_find(m, &len, NULL);
	if (rec)
		fwrite(rec, 1, len, stdout);
	qtk_close(m);
	return rec ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: mkseed tiny|kq|imatrix|imatrix-gguf|prov PATH\n");
		return 2;
	}
	if (!strcmp(argv[1], "tiny"))
		return write_model(argv[2], tiny, sizeof tiny / sizeof *tiny, 0);
	if (!strcmp(argv[1], "kq"))
		return write_model(argv[2], kq, sizeof kq / sizeof *kq, 1);
	if (!strcmp(argv[1], "imatrix-gguf"))
		return write_model(argv[2], im, sizeof im / sizeof *im, 2);
	if (!strcmp(argv[1], "imatrix"))
		return write_imatrix(argv[2]);
	if (!strcmp(argv[1], "prov"))
		return print_prov(argv[2]);
	fprintf(stderr, "mkseed: unknown mode %s\n", argv[1]);
	return 2;
}
