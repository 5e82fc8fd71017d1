/* gen.c - the project's deterministic sample generator.
 *
 * Writes a tiny llama-shaped model (2 blocks, n_embd 256, n_ff 768, 4 heads,
 * 2 KV heads, a 512-token SentencePiece vocabulary) with the outlier structure
 * real LLM weights show (a few salient input channels, rare large spikes):
 *   OUT/tiny-llama-f32.gguf    GGUF v3, llama architecture, F32, vocabulary
 *   OUT/tiny-llama/            Hugging Face directory: config.json,
 *                              generation_config.json, model.safetensors (F16),
 *                              tokenizer.model and tokenizer_config.json (the
 *                              same vocabulary: a GGUF made from it has one)
 * With --bench MPARAMS FILE.gguf it writes a llama-shaped F16 GGUF of about
 * MPARAMS million parameters for `make bench` (n_embd 1024, n_ff 2816,
 * 16 heads, 8 KV heads, vocab 32000; as many blocks as fit), streaming;
 * --bench MPARAMS FILE.gguf EMBD FF gives other widths (e.g. 4096 14336, the
 * shape of an 8B model's blocks: memory figures for large matrices); a
 * vocabulary GGUF after them gives the model its tokenizer.ggml.* keys and its
 * vocabulary size, so that llama.cpp can run it (the output-divergence bench).
 * With --perturb SEED IN.gguf OUT.gguf it copies a GGUF and flips the lowest
 * mantissa bit of each F16/BF16 weight (of every matrix) with probability 1/2
 * (F32: the bit an F16 would keep last): a model equal to IN within rounding,
 * whose quantizations are different draws of equally good encodings (the
 * output-divergence bench averages over such copies to see past that spread).
 * Same bytes on every machine: integer PRNG, float arithmetic only in
 * +,-,* (no libm), built with -ffp-contract=off.
 */
#include "dequant.h"
#include "family/spm.h"
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { N_EMBD = 256, N_FF = 768, N_HEAD = 4, N_HEAD_KV = 2, N_LAYER = 2, N_VOCAB = 512 };
#define HEAD_DIM (N_EMBD / N_HEAD)

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull); /* splitmix64 */
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static float rng_uniform(void) { return (float)(rng_next() >> 40) * (1.0f / 16777216.0f); }

/* Approximately normal: the Irwin-Hall sum of 12 uniforms minus 6. */
static float rng_normal(void)
{
	float s = 0;
	for (int i = 0; i < 12; i++)
		s += rng_uniform();
	return s - 6.0f;
}

typedef struct wdesc {
	char gguf[64], hf[96];
	int rows, cols; /* logical [rows, cols]; rows 0 for 1-D */
	int kind;       /* 0 matrix, 1 norm */
	int permute;    /* Q/K rows: n_head for the GGUF permutation, 0 none */
} wdesc;

static int nw;
static wdesc ws[64];

static void add(const char *g, const char *h, int rows, int cols, int kind, int permute)
{
	wdesc *w = &ws[nw++];
	snprintf(w->gguf, sizeof w->gguf, "%s", g);
	snprintf(w->hf, sizeof w->hf, "%s", h);
	w->rows = rows;
	w->cols = cols;
	w->kind = kind;
	w->permute = permute;
}

static void layout_model(void)
{
	add("token_embd.weight", "model.embed_tokens.weight", N_VOCAB, N_EMBD, 0, 0);
	for (int l = 0; l < N_LAYER; l++) {
		char g[64], h[96];
#define ADD(gn, hn, r, c, k, p)                                                   \
	snprintf(g, sizeof g, "blk.%d." gn, l);                                   \
	snprintf(h, sizeof h, "model.layers.%d." hn, l);                          \
	add(g, h, r, c, k, p)
		ADD("attn_norm.weight", "input_layernorm.weight", 0, N_EMBD, 1, 0);
		ADD("attn_q.weight", "self_attn.q_proj.weight", N_EMBD, N_EMBD, 0, N_HEAD);
		ADD("attn_k.weight", "self_attn.k_proj.weight", N_HEAD_KV * HEAD_DIM, N_EMBD, 0, N_HEAD_KV);
		ADD("attn_v.weight", "self_attn.v_proj.weight", N_HEAD_KV * HEAD_DIM, N_EMBD, 0, 0);
		ADD("attn_output.weight", "self_attn.o_proj.weight", N_EMBD, N_EMBD, 0, 0);
		ADD("ffn_norm.weight", "post_attention_layernorm.weight", 0, N_EMBD, 1, 0);
		ADD("ffn_gate.weight", "mlp.gate_proj.weight", N_FF, N_EMBD, 0, 0);
		ADD("ffn_up.weight", "mlp.up_proj.weight", N_FF, N_EMBD, 0, 0);
		ADD("ffn_down.weight", "mlp.down_proj.weight", N_EMBD, N_FF, 0, 0);
#undef ADD
	}
	add("output_norm.weight", "model.norm.weight", 0, N_EMBD, 1, 0);
	add("output.weight", "lm_head.weight", N_VOCAB, N_EMBD, 0, 0);
}

/* Values in HF orientation [rows, cols]. */
static float *make_values(const wdesc *w)
{
	int rows = w->rows ? w->rows : 1;
	size_t n = (size_t)rows * (size_t)w->cols;
	float *v = malloc(n * sizeof *v);
	if (!v)
		return NULL;
	if (w->kind == 1) {
		for (size_t i = 0; i < n; i++)
			v[i] = 1.0f + 0.05f * rng_normal();
		return v;
	}
	/* std ~ 1/sqrt(cols) via a table-free constant per width */
	float sd = w->cols == 256 ? 0.0625f : 0.036f;
	float salient[16];
	int sal_idx[16], nsal = 1 + (int)(rng_next() % 4);
	for (int k = 0; k < nsal; k++) {
		sal_idx[k] = (int)(rng_next() % (uint64_t)w->cols);
		salient[k] = 4.0f + 8.0f * rng_uniform();
	}
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < w->cols; c++) {
			float x = sd * rng_normal();
			for (int k = 0; k < nsal; k++)
				if (c == sal_idx[k])
					x *= salient[k];
			if (rng_next() % 20000 == 0)
				x = (rng_next() & 1 ? 30.0f : -30.0f) * sd;
			v[(size_t)r * (size_t)w->cols + (size_t)c] = x;
		}
	return v;
}

/* llama.cpp's Q/K permutation: rows viewed as (n_head, 2, head_dim/2) with the inner axes swapped. */
static void permute_rows(const float *src, float *dst, int rows, int cols, int n_head)
{
	int hd = rows / n_head, half = hd / 2;
	for (int h = 0; h < n_head; h++)
		for (int i = 0; i < 2; i++)
			for (int j = 0; j < half; j++) {
				int from = h * hd + i * half + j, to = h * hd + j * 2 + i;
				memcpy(dst + (size_t)to * (size_t)cols, src + (size_t)from * (size_t)cols,
				       (size_t)cols * sizeof *dst);
			}
}

static void set_u32(qtk_model *m, const char *k, uint32_t v)
{
	qtk_kv *kv = qtk_model_add_kv(m, k);
	kv->val.type = QTK_V_U32;
	kv->val.v.u = v;
}

static void set_f32(qtk_model *m, const char *k, float v)
{
	qtk_kv *kv = qtk_model_add_kv(m, k);
	kv->val.type = QTK_V_F32;
	kv->val.v.f = v;
}

/* The sample's SentencePiece vocabulary (llama.cpp's "llama" kind): <unk>, <s>, </s>, the 256
 * byte pieces <0x00>..<0xFF>, then words of two or three syllables with descending scores. */
static qtk_str vocab_tok[N_VOCAB];
static float vocab_score[N_VOCAB];
static int32_t vocab_type[N_VOCAB];

static void make_vocab(void)
{
	static const char *const syll[] = {"ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi"};
	for (int i = 0; i < N_VOCAB; i++) {
		char b[32];
		int type = 1;
		float score = -(float)i;
		if (i == 0) { snprintf(b, sizeof b, "<unk>"); type = 2; }
		else if (i == 1) { snprintf(b, sizeof b, "<s>"); type = 3; }
		else if (i == 2) { snprintf(b, sizeof b, "</s>"); type = 3; }
		else if (i < 3 + 256) { snprintf(b, sizeof b, "<0x%02X>", i - 3); type = 6; score = 0; }
		else {
			int k = i - 259;
			snprintf(b, sizeof b, "\xE2\x96\x81%s%s", syll[k % 8], syll[(k / 8) % 8]);
			if (k >= 64)
				snprintf(b + strlen(b), sizeof b - strlen(b), "%s", syll[(k / 64) % 8]);
		}
		vocab_tok[i].len = strlen(b);
		vocab_tok[i].s = qtk_strdup(b);
		vocab_score[i] = score;
		vocab_type[i] = type;
	}
}

static void add_vocab(qtk_model *m)
{
	qtk_model_set_kv_str(m, "tokenizer.ggml.model", "llama");
	qtk_kv *tok = qtk_model_add_kv(m, "tokenizer.ggml.tokens");
	qtk_kv *sc = qtk_model_add_kv(m, "tokenizer.ggml.scores");
	qtk_kv *ty = qtk_model_add_kv(m, "tokenizer.ggml.token_type");
	qtk_str *s = calloc(N_VOCAB, sizeof *s);
	uint8_t *scores = calloc(N_VOCAB, 4), *types = calloc(N_VOCAB, 4);
	for (int i = 0; i < N_VOCAB; i++) {
		s[i].len = vocab_tok[i].len;
		s[i].s = qtk_strdup(vocab_tok[i].s);
		uint32_t u;
		memcpy(&u, &vocab_score[i], 4);
		qtk_wr32(scores + 4 * i, u);
		qtk_wr32(types + 4 * i, (uint32_t)vocab_type[i]);
	}
	tok->val.type = QTK_V_ARR; tok->val.elem = QTK_V_STR; tok->val.n = N_VOCAB; tok->val.arr = s;
	sc->val.type = QTK_V_ARR; sc->val.elem = QTK_V_F32; sc->val.n = N_VOCAB; sc->val.arr = scores;
	ty->val.type = QTK_V_ARR; ty->val.elem = QTK_V_I32; ty->val.n = N_VOCAB; ty->val.arr = types;
	set_u32(m, "tokenizer.ggml.bos_token_id", 1);
	set_u32(m, "tokenizer.ggml.eos_token_id", 2);
	set_u32(m, "tokenizer.ggml.unknown_token_id", 0);
}

/* The same vocabulary as the HF directory's tokenizer.model (a SentencePiece ModelProto, BPE
 * with byte fallback, as Llama 2's), and its tokenizer_config.json: converted to GGUF it gives
 * the GGUF sample's tokenizer.ggml.* keys back. */
static int add_hf_tokenizer(qtk_model *h, qtk_err *err)
{
	static const char tokconf[] =
		"{\n  \"add_bos_token\": true,\n  \"add_eos_token\": false,\n  \"bos_token\": \"<s>\",\n"
		"  \"eos_token\": \"</s>\",\n  \"unk_token\": \"<unk>\",\n  \"model_max_length\": 256,\n"
		"  \"tokenizer_class\": \"LlamaTokenizer\"\n}\n";
	qtk_spm_build_opts o = {.model_type = 2, .unk_id = 0, .bos_id = 1, .eos_id = 2, .pad_id = -1,
				.add_dummy_prefix = true, .remove_extra_whitespaces = false};
	qtk_spm_model sp;
	int rc = qtk_spm_build(&sp, N_VOCAB, vocab_tok, vocab_score, vocab_type, &o, err);
	if (rc)
		return rc;
	qtk_buf b = {0};
	rc = qtk_spm_write(&sp, &b);
	if (!rc && !b.failed)
		rc = qtk_model_add_blob(h, "tokenizer.model", b.p, b.len);
	if (!rc)
		rc = qtk_model_add_blob(h, "tokenizer_config.json", tokconf, sizeof tokconf - 1);
	qtk_buf_free(&b);
	qtk_spm_free(&sp);
	return rc ? qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "cannot build tokenizer.model") : 0;
}

static void describe(qtk_tensor *t, int rows, int cols, unsigned type)
{
	t->ndim = rows ? 2 : 1;
	if (rows) {
		t->shape[0] = (uint64_t)rows;
		t->shape[1] = (uint64_t)cols;
	} else {
		t->shape[0] = (uint64_t)cols;
	}
	t->layout.type = type;
	t->layout.bits = qtk_type(type)->code_bits;
	t->nparts = 1;
	t->parts[0].type = type;
	t->parts[0].ndim = t->ndim;
	memcpy(t->parts[0].shape, t->shape, sizeof t->shape);
	qtk_type_nbytes(type, (uint64_t)(rows ? rows : 1) * (uint64_t)cols, &t->parts[0].nbytes);
	qtk_tensor_finish(t);
}

static int fail(const qtk_err *e)
{
	char b[1024];
	qtk_err_format(e, "gen", b, sizeof b);
	fprintf(stderr, "%s\n", b);
	return 1;
}

/* Fast approximate normal for large bench models: four 16-bit uniforms. */
static float fast_normal(void)
{
	uint64_t r = rng_next();
	float s = (float)(r & 0xFFFF) + (float)((r >> 16) & 0xFFFF) + (float)((r >> 32) & 0xFFFF) + (float)(r >> 48);
	return (s - 131070.0f) * (1.0f / 37837.0f); /* mean 0, std ~1 */
}

/* The tokenizer.ggml.* keys of a vocabulary GGUF (hostile input: qtk_open bounds it), and its
 * token count; NULL with a message when it has no usable vocabulary. */
static qtk_model *open_vocab(const char *path, uint64_t *nvocab)
{
	qtk_err err;
	qtk_err_clear(&err);
	qtk_model *v = qtk_open(path, &err);
	if (!v) {
		fail(&err);
		return NULL;
	}
	const qtk_kv *t = qtk_kv_find(v, "tokenizer.ggml.tokens");
	if (!t || t->val.type != QTK_V_ARR || t->val.elem != QTK_V_STR || t->val.n < 4 || t->val.n > 1000000) {
		fprintf(stderr, "gen: %s: no tokenizer.ggml.tokens array of 4 to 1000000 strings\n", path);
		qtk_close(v);
		return NULL;
	}
	*nvocab = t->val.n;
	return v;
}

static int gen_bench(uint64_t mparams, const char *path, uint64_t E, uint64_t FF, const char *vocab)
{
	enum { H = 16, HKV = 8 };
	uint64_t V = 32000;
	qtk_model *vm = NULL;
	if (vocab && !(vm = open_vocab(vocab, &V)))
		return 1;
	uint64_t per_layer = (uint64_t)E * E * 2 + (uint64_t)E * (E / H * HKV) * 2 + 3ull * E * FF + 2 * E;
	uint64_t fixed = 2ull * V * E + E;
	uint64_t want = mparams * 1000000ull;
	uint64_t nl = want > fixed ? (want - fixed + per_layer / 2) / per_layer : 1;
	if (nl < 1)
		nl = 1;
	if (nl > 256)
		nl = 256;
	qtk_model *g = qtk_model_new();
	qtk_model_set_kv_str(g, "general.architecture", "llama");
	qtk_model_set_kv_str(g, "general.name", "qtk bench llama");
	set_u32(g, "llama.block_count", (uint32_t)nl);
	set_u32(g, "llama.context_length", 4096);
	set_u32(g, "llama.embedding_length", (uint32_t)E);
	set_u32(g, "llama.feed_forward_length", (uint32_t)FF);
	set_u32(g, "llama.attention.head_count", H);
	set_u32(g, "llama.attention.head_count_kv", HKV);
	set_u32(g, "llama.rope.dimension_count", (uint32_t)(E / H));
	set_f32(g, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
	set_u32(g, "general.file_type", 1);
	for (size_t i = 0; vm && i < vm->nkv; i++) {
		if (strncmp(vm->kv[i].key, "tokenizer.", 10))
			continue;
		qtk_kv *n = qtk_model_add_kv(g, vm->kv[i].key);
		if (!n || qtk_value_copy(&n->val, &vm->kv[i].val)) {
			fprintf(stderr, "gen: out of memory\n");
			return 1;
		}
	}
	qtk_close(vm);
	typedef struct { char name[64]; uint64_t rows, cols; } bt;
	bt *ts = calloc(16 * nl + 8, sizeof *ts);
	size_t n = 0;
#define BT(r, c, ...) (snprintf(ts[n].name, sizeof ts[n].name, __VA_ARGS__), ts[n].rows = (r), ts[n].cols = (c), n++)
	BT(V, E, "token_embd.weight");
	for (uint64_t l = 0; l < nl; l++) {
		BT(0, E, "blk.%llu.attn_norm.weight", (unsigned long long)l);
		BT(E, E, "blk.%llu.attn_q.weight", (unsigned long long)l);
		BT(E / H * HKV, E, "blk.%llu.attn_k.weight", (unsigned long long)l);
		BT(E / H * HKV, E, "blk.%llu.attn_v.weight", (unsigned long long)l);
		BT(E, E, "blk.%llu.attn_output.weight", (unsigned long long)l);
		BT(0, E, "blk.%llu.ffn_norm.weight", (unsigned long long)l);
		BT(FF, E, "blk.%llu.ffn_gate.weight", (unsigned long long)l);
		BT(FF, E, "blk.%llu.ffn_up.weight", (unsigned long long)l);
		BT(E, FF, "blk.%llu.ffn_down.weight", (unsigned long long)l);
	}
	BT(0, E, "output_norm.weight");
	BT(V, E, "output.weight");
#undef BT
	for (size_t i = 0; i < n; i++)
		describe(qtk_model_add_tensor(g, ts[i].name), (int)ts[i].rows, (int)ts[i].cols, ts[i].rows ? QTK_T_F16 : QTK_T_F32);
	qtk_err err;
	qtk_err_clear(&err);
	qtk_writer *w = qtk_writer_open(path, QTK_OUT_GGUF, g, NULL, &err);
	if (!w)
		return fail(&err);
	rng_state = 0x62656e63686d6b21ull;
	for (size_t i = 0; i < n; i++) {
		size_t cnt = (size_t)((ts[i].rows ? ts[i].rows : 1) * ts[i].cols);
		size_t esz = ts[i].rows ? 2 : 4;
		uint8_t *b = malloc(cnt * esz);
		float sd = ts[i].cols == E ? 0.03125f : 0.0188f;
		uint64_t sal = rng_next() % ts[i].cols;
		for (size_t k = 0; k < cnt; k++) {
			float x = ts[i].rows ? sd * fast_normal() : 1.0f + 0.05f * fast_normal();
			if (ts[i].rows && k % ts[i].cols == sal)
				x *= 8.0f;
			if (esz == 2)
				qtk_wr16(b + 2 * k, qtk_f32_to_fp16(x));
			else {
				uint32_t u;
				memcpy(&u, &x, 4);
				qtk_wr32(b + 4 * k, u);
			}
		}
		if (qtk_writer_put(w, b, cnt * esz))
			return fail(&err);
		free(b);
	}
	if (qtk_writer_finish(w))
		return fail(&err);
	printf("%s: %zu tensors, %llu blocks\n", path, n, (unsigned long long)nl);
	free(ts);
	qtk_close(g);
	return 0;
}

/* --perturb: copy in to out, then flip bits of out's matrices in place. */
static int gen_perturb(uint64_t seed, const char *in, const char *out)
{
	qtk_err err;
	qtk_err_clear(&err);
	qtk_model *m = qtk_open(in, &err);
	if (!m)
		return fail(&err);
	if (m->nfiles != 1) {
		fprintf(stderr, "gen: --perturb takes a single-file GGUF\n");
		qtk_close(m);
		return 1;
	}
	int rc = 1, fo = -1;
	const int fi = open(in, O_RDONLY);
	if (fi < 0 || (fo = open(out, O_RDWR | O_CREAT | O_TRUNC, 0644)) < 0) {
		perror(fi < 0 ? in : out);
		goto done;
	}
	static uint8_t buf[1 << 20];
	ssize_t r;
	while ((r = read(fi, buf, sizeof buf)) > 0)
		if (write(fo, buf, (size_t)r) != r) {
			perror(out);
			goto done;
		}
	if (r < 0) {
		perror(in);
		goto done;
	}
	rng_state = seed * 0x9E3779B97F4A7C15ull + 0x70657274ull;
	size_t nt = 0;
	for (size_t i = 0; i < m->ntensors; i++) {
		const qtk_tensor *t = &m->tensors[i];
		if (t->view || t->nparts != 1 || t->ndim < 2)
			continue;
		const qtk_part *p = &t->parts[0];
		const unsigned ty = p->type;
		const size_t esz = ty == QTK_T_F32 ? 4 : 2;
		const uint32_t bit = ty == QTK_T_F32 ? 1u << 13 : 1u;
		if (ty != QTK_T_F16 && ty != QTK_T_BF16 && ty != QTK_T_F32)
			continue;
		for (uint64_t off = 0; off < p->nbytes; off += sizeof buf) {
			const size_t n = (size_t)(p->nbytes - off < sizeof buf ? p->nbytes - off : sizeof buf);
			if (pread(fo, buf, n, (off_t)(p->offset + off)) != (ssize_t)n) {
				perror(out);
				goto done;
			}
			for (size_t k = 0; k + esz <= n; k += 64 * esz) {
				uint64_t bits = rng_next();
				for (size_t j = 0; j < 64 && k + j * esz + esz <= n; j++, bits >>= 1) {
					uint8_t *e = buf + k + j * esz;
					if (bits & 1) {
						e[0] = (uint8_t)(e[0] ^ (bit & 0xFF));
						e[1] = (uint8_t)(e[1] ^ (bit >> 8));
					}
				}
			}
			if (pwrite(fo, buf, n, (off_t)(p->offset + off)) != (ssize_t)n) {
				perror(out);
				goto done;
			}
		}
		nt++;
	}
	const int c = close(fo);
	fo = -1;
	if (c != 0) {
		perror(out);
		goto done;
	}
	printf("%s: %zu matrices perturbed (seed %llu)\n", out, nt, (unsigned long long)seed);
	rc = 0;
done:
	if (fi >= 0)
		close(fi);
	if (fo >= 0)
		close(fo);
	qtk_close(m);
	return rc;
}

static const char usage[] =
	"usage: gen [OUT]\n"
	"       gen --bench MPARAMS FILE.gguf [EMBD FF [VOCAB.gguf]]\n"
	"       gen --perturb SEED IN.gguf OUT.gguf\n"
	"\n"
	"The project's deterministic sample generator (same bytes on every machine).\n"
	"  OUT                    directory to write into (default build/samples), created when missing:\n"
	"                         OUT/tiny-llama-f32.gguf  GGUF v3, llama, F32, with a SentencePiece vocabulary\n"
	"                         OUT/tiny-llama/          Hugging Face directory: config.json,\n"
	"                                                  generation_config.json, model.safetensors (F16),\n"
	"                                                  tokenizer.model, tokenizer_config.json\n"
	"                         (2 blocks, hidden size 256, feed-forward 768, 4 heads, 2 KV heads,\n"
	"                         a 512-token vocabulary; OUT/tiny-llama/ is replaced as a whole)\n"
	"  --bench MPARAMS FILE   a llama-shaped F16 GGUF of about MPARAMS million parameters for\n"
	"                         `make bench` (hidden 1024, feed-forward 2816; EMBD FF give others;\n"
	"                         VOCAB.gguf lends its tokenizer.ggml.* keys and vocabulary size)\n"
	"  --perturb SEED IN OUT  copy the GGUF IN to OUT with the lowest mantissa bit of each\n"
	"                         matrix weight (F16/BF16; F32: the last bit F16 keeps) flipped with\n"
	"                         probability 1/2, from SEED: a copy equal within rounding whose\n"
	"                         quantizations are other draws of equally good encodings\n"
	"  -h, --help             this help\n";

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(usage, stdout);
			return 0;
		}
		if (i == 1 && (!strcmp(argv[i], "--bench") || !strcmp(argv[i], "--perturb")))
			continue;
		if (argv[i][0] == '-' && !(i > 1 && !strcmp(argv[1], "--bench"))) {
			fprintf(stderr, "gen: unknown option '%s'\nTry 'gen --help' for more information.\n", argv[i]);
			return 2;
		}
	}
	if (argc > 1 && !strcmp(argv[1], "--perturb")) {
		uint64_t seed;
		if (argc != 5 || !qtk_parse_u64(argv[2], &seed)) {
			fprintf(stderr, "gen: --perturb takes SEED IN.gguf OUT.gguf\nTry 'gen --help' for more information.\n");
			return 2;
		}
		return gen_perturb(seed, argv[3], argv[4]);
	}
	if (argc > 1 && !strcmp(argv[1], "--bench") && argc != 4 && argc != 6 && argc != 7) {
		fprintf(stderr, "gen: --bench takes MPARAMS FILE.gguf [EMBD FF [VOCAB.gguf]]\nTry 'gen --help' for more information.\n");
		return 2;
	}
	if (argc > 2 && strcmp(argv[1], "--bench")) {
		fprintf(stderr, "gen: unexpected argument '%s'\nTry 'gen --help' for more information.\n", argv[2]);
		return 2;
	}
	if ((argc == 4 || argc == 6 || argc == 7) && !strcmp(argv[1], "--bench")) {
		uint64_t mp, e = 1024, ff = 2816;
		if (!qtk_parse_u64(argv[2], &mp) || mp < 1 || mp > 100000) {
			fprintf(stderr, "gen: --bench takes a size in millions of parameters\n");
			return 2;
		}
		if (argc >= 6 && (!qtk_parse_u64(argv[4], &e) || !qtk_parse_u64(argv[5], &ff) || e < 64 || e > 65536 ||
				  e % 64 || ff < 64 || ff > 262144 || ff % 256)) {
			fprintf(stderr, "gen: --bench EMBD FF: EMBD a multiple of 64 up to 65536, FF a multiple of 256\n");
			return 2;
		}
		return gen_bench(mp, argv[3], e, ff, argc == 7 ? argv[6] : NULL);
	}
	const char *out = argc > 1 ? argv[1] : "build/samples";
	if (mkdir(out, 0755) != 0 && errno != EEXIST) {
		perror(out);
		return 1;
	}
	layout_model();
	make_vocab();
	float *vals[64];
	rng_state = 0x71746B2D73616D70ull; /* "qtk-samp" */
	for (int i = 0; i < nw; i++)
		if (!(vals[i] = make_values(&ws[i])))
			return 1;

	/* GGUF, F32, GGUF names, Q/K rows permuted as llama.cpp's converter does */
	qtk_model *g = qtk_model_new();
	qtk_model_set_kv_str(g, "general.architecture", "llama");
	qtk_model_set_kv_str(g, "general.name", "qtk sample tiny-llama");
	set_u32(g, "llama.block_count", N_LAYER);
	set_u32(g, "llama.context_length", 256);
	set_u32(g, "llama.embedding_length", N_EMBD);
	set_u32(g, "llama.feed_forward_length", N_FF);
	set_u32(g, "llama.attention.head_count", N_HEAD);
	set_u32(g, "llama.attention.head_count_kv", N_HEAD_KV);
	set_u32(g, "llama.rope.dimension_count", HEAD_DIM);
	set_f32(g, "llama.rope.freq_base", 10000.0f);
	set_f32(g, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
	set_u32(g, "general.file_type", 0);
	add_vocab(g);
	for (int i = 0; i < nw; i++)
		describe(qtk_model_add_tensor(g, ws[i].gguf), ws[i].rows, ws[i].cols, QTK_T_F32);
	char *path = qtk_path_join(out, "tiny-llama-f32.gguf");
	qtk_err err;
	qtk_err_clear(&err);
	qtk_writer *w = qtk_writer_open(path, QTK_OUT_GGUF, g, NULL, &err);
	if (!w)
		return fail(&err);
	for (int i = 0; i < nw; i++) {
		size_t n = (size_t)(ws[i].rows ? ws[i].rows : 1) * (size_t)ws[i].cols;
		float *v = vals[i], *tmp = NULL;
		if (ws[i].permute) {
			tmp = malloc(n * sizeof *tmp);
			permute_rows(v, tmp, ws[i].rows, ws[i].cols, ws[i].permute);
			v = tmp;
		}
		uint8_t *b = malloc(n * 4);
		for (size_t k = 0; k < n; k++) {
			uint32_t u;
			memcpy(&u, &v[k], 4);
			qtk_wr32(b + 4 * k, u);
		}
		if (qtk_writer_put(w, b, n * 4))
			return fail(&err);
		free(b);
		free(tmp);
	}
	if (qtk_writer_finish(w))
		return fail(&err);
	printf("%s\n", path);
	free(path);

	/* Hugging Face directory, F16, HF names and row order */
	qtk_model *h = qtk_model_new();
	static const char config[] =
		"{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
		"  \"hidden_size\": 256,\n  \"intermediate_size\": 768,\n  \"num_hidden_layers\": 2,\n"
		"  \"num_attention_heads\": 4,\n  \"num_key_value_heads\": 2,\n  \"vocab_size\": 512,\n"
		"  \"rms_norm_eps\": 1e-05,\n  \"rope_theta\": 10000.0,\n  \"max_position_embeddings\": 256,\n"
		"  \"tie_word_embeddings\": false,\n  \"hidden_act\": \"silu\",\n  \"bos_token_id\": 1,\n"
		"  \"eos_token_id\": 2,\n  \"torch_dtype\": \"float16\"\n}\n";
	static const char genconf[] = "{\n  \"bos_token_id\": 1,\n  \"eos_token_id\": 2\n}\n";
	qtk_model_add_blob(h, "config.json", config, sizeof config - 1);
	qtk_model_add_blob(h, "generation_config.json", genconf, sizeof genconf - 1);
	qtk_model_set_kv_str(h, "format", "pt");
	if (add_hf_tokenizer(h, &err))
		return fail(&err);
	for (int i = 0; i < nw; i++)
		describe(qtk_model_add_tensor(h, ws[i].hf), ws[i].rows, ws[i].cols, QTK_T_F16);
	char *dir = qtk_path_join(out, "tiny-llama/");
	qtk_write_opts wo = {.force = true}; /* the generator's own directory, whatever an older one held */
	w = qtk_writer_open(dir, QTK_OUT_HF, h, &wo, &err);
	if (!w)
		return fail(&err);
	for (int i = 0; i < nw; i++) {
		size_t n = (size_t)(ws[i].rows ? ws[i].rows : 1) * (size_t)ws[i].cols;
		uint8_t *b = malloc(n * 2);
		for (size_t k = 0; k < n; k++)
			qtk_wr16(b + 2 * k, qtk_f32_to_fp16(vals[i][k]));
		if (qtk_writer_put(w, b, n * 2))
			return fail(&err);
		free(b);
	}
	if (qtk_writer_finish(w))
		return fail(&err);
	printf("%s\n", dir);
	free(dir);
	for (int i = 0; i < nw; i++)
		free(vals[i]);
	qtk_close(g);
	qtk_close(h);
	return 0;
}
