/* test_hfmap.c - HF <-> GGUF mapping (names, Q/K permutation, config.json,
 * SentencePiece tokenizer.model) against llama.cpp's own converter output. */
#include "t.h"
#include "family/hfmap.h"
#include "family/spm.h"
#include "dequant.h"
#include "json.h"
#include <inttypes.h>
#include <math.h>

/* Keys llama.cpp derives from the directory name and model card (gguf-py
 * Metadata heuristics), which we do not reproduce. */
static const char *const naming_keys[] = {
	"general.name", "general.basename", "general.finetune", "general.version",
	"general.organization", "general.author", "general.description", NULL,
};

static bool is_naming_key(const char *k)
{
	for (size_t i = 0; naming_keys[i]; i++)
		if (!strcmp(k, naming_keys[i]))
			return true;
	return false;
}

static bool t_val_eq(const qtk_value *a, const qtk_value *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case QTK_V_STR:
		return a->v.str.len == b->v.str.len && !memcmp(a->v.str.s, b->v.str.s, (size_t)a->v.str.len);
	case QTK_V_F32: case QTK_V_F64:
		return a->v.f == b->v.f;
	case QTK_V_I8: case QTK_V_I16: case QTK_V_I32: case QTK_V_I64:
		return a->v.i == b->v.i;
	case QTK_V_ARR:
		if (a->elem != b->elem || a->n != b->n)
			return false;
		if (a->elem == QTK_V_STR) {
			const qtk_str *x = a->arr, *y = b->arr;
			for (uint64_t i = 0; i < a->n; i++)
				if (x[i].len != y[i].len || memcmp(x[i].s, y[i].s, (size_t)x[i].len))
					return false;
			return true;
		}
		return !a->n || !memcmp(a->arr, b->arr, (size_t)a->n * qtk_value_size(a->elem));
	default:
		return a->v.u == b->v.u;
	}
}

/* Compare two kv lists in order, skipping the naming keys. Returns mismatches. */
static int compare_kv(const qtk_model *got, const qtk_model *want, const char *what)
{
	size_t i = 0, j = 0;
	int bad = 0;
	for (;;) {
		while (i < got->nkv && is_naming_key(got->kv[i].key))
			i++;
		while (j < want->nkv && is_naming_key(want->kv[j].key))
			j++;
		if (i >= got->nkv || j >= want->nkv)
			break;
		const qtk_kv *a = &got->kv[i], *b = &want->kv[j];
		CHECK(!strcmp(a->key, b->key), "%s: key %zu is %s, want %s", what, i, a->key, b->key);
		if (strcmp(a->key, b->key)) {
			bad++;
			break;
		}
		CHECK(t_val_eq(&a->val, &b->val), "%s: value of %s differs (types %s/%s)", what, a->key,
		      qtk_value_type_name(a->val.type), qtk_value_type_name(b->val.type));
		i++;
		j++;
	}
	CHECK(i == got->nkv && j == want->nkv, "%s: key count differs (%zu of %zu vs %zu of %zu; next %s / %s)",
	      what, i, got->nkv, j, want->nkv, i < got->nkv ? got->kv[i].key : "-",
	      j < want->nkv ? want->kv[j].key : "-");
	return bad;
}

static size_t elem_size(unsigned ty)
{
	return ty == QTK_T_F32 ? 4 : ty == QTK_T_F16 || ty == QTK_T_BF16 ? 2 : 0;
}

/* Convert a plain float buffer between F16 and F32. *exact false when F32 -> F16 rounds. */
static uint8_t *convert_float(const uint8_t *src, uint64_t n, unsigned from, unsigned to, bool *exact)
{
	uint8_t *d = malloc((size_t)n * elem_size(to) + 1);
	*exact = true;
	for (uint64_t i = 0; i < n; i++) {
		float f;
		if (from == QTK_T_F16)
			f = qtk_fp16_to_f32(qtk_rd16(src + 2 * i));
		else {
			uint32_t u = qtk_rd32(src + 4 * i);
			memcpy(&f, &u, 4);
		}
		if (to == QTK_T_F32) {
			uint32_t u;
			memcpy(&u, &f, 4);
			qtk_wr32(d + 4 * i, u);
		} else {
			uint16_t h = qtk_f32_to_fp16(f);
			if (qtk_fp16_to_f32(h) != f)
				*exact = false;
			qtk_wr16(d + 2 * i, h);
		}
	}
	return d;
}

/* The would-be output tensor bytes for source tensor t through map. */
static uint8_t *map_tensor(qtk_model *src, const qtk_tensor *t, const qtk_hfmap *m, unsigned *otype, uint64_t *nb,
			   bool *exact)
{
	uint8_t *raw = NULL;
	*exact = true;
	if (qtk_read_part_alloc(src, t, 0, &raw))
		return NULL;
	unsigned ity = t->layout.type;
	*otype = qtk_hfmap_out_type(m, t);
	uint8_t *cur = raw;
	if (*otype != ity) {
		cur = convert_float(raw, t->n_params, ity, *otype, exact);
		qtk_free(raw);
	}
	*nb = t->n_params * elem_size(*otype);
	int heads;
	bool inv;
	qtk_hfmap_name(m, t->name, &heads, &inv);
	if (heads > 0) {
		uint64_t rows = t->shape[0], rb = *nb / rows;
		uint8_t *p = malloc((size_t)*nb);
		qtk_family_permute_rows(cur, p, rows, rb, heads, inv);
		if (cur == raw)
			qtk_free(raw);
		else
			free(cur);
		return p;
	}
	if (cur == raw) {
		uint8_t *c = malloc((size_t)*nb + 1);
		memcpy(c, raw, (size_t)*nb);
		qtk_free(raw);
		return c;
	}
	return cur;
}

static const cJSON *jget(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static bool json_same(const cJSON *a, const cJSON *b)
{
	if (!a || !b)
		return a == b;
	if (cJSON_IsNumber(a) && cJSON_IsNumber(b))
		return a->valuedouble == b->valuedouble;
	return cJSON_Compare(a, b, true);
}

/* ---- the fixture: llama.cpp's convert_hf_to_gguf.py output --------------- */

static void test_fixture(const char *fx)
{
	char dir[1024], ref[1024], tokp[1100];
	snprintf(dir, sizeof dir, "%s/hf/tiny-llama/fp16", fx);
	snprintf(ref, sizeof ref, "%s/hf/tiny-llama/ref/llamacpp-from-hf-f16.gguf", fx);
	snprintf(tokp, sizeof tokp, "%s/tokenizer.model", dir);
	qtk_err err;
	qtk_err_clear(&err);
	qtk_model *hf = qtk_open(dir, &err);
	qtk_model *rg = qtk_open(ref, &err);
	CHECK(hf && rg, "open fixtures: %s", err.msg);
	if (!hf || !rg)
		return;

	/* HF -> GGUF */
	qtk_model *meta = qtk_model_new();
	qtk_hfmap *m = NULL;
	int rc = qtk_hfmap_hf_to_gguf(hf, meta, &m, &err);
	CHECK(rc == 0, "hf_to_gguf: %s (%s)", err.msg, err.subject);
	if (rc) {
		qtk_close(hf);
		qtk_close(rg);
		qtk_close(meta);
		return;
	}
	CHECK(qtk_hfmap_warning(m) == NULL, "warning: %s", qtk_hfmap_warning(m));
	size_t *order = malloc(hf->ntensors * sizeof *order);
	size_t n = qtk_hfmap_order(m, hf, order);
	CHECK(n == rg->ntensors, "tensor count %zu, want %zu", n, rg->ntensors);
	size_t nequal = 0;
	for (size_t k = 0; k < n && k < rg->ntensors; k++) {
		const qtk_tensor *t = &hf->tensors[order[k]], *r = &rg->tensors[k];
		int heads;
		bool inv;
		const char *on = qtk_hfmap_name(m, t->name, &heads, &inv);
		CHECK(on && !strcmp(on, r->name), "tensor %zu: %s -> %s, want %s", k, t->name, on ? on : "(null)", r->name);
		CHECK(!inv, "inverse set on the way to GGUF");
		CHECK(t->ndim == r->ndim && !memcmp(t->shape, r->shape, sizeof t->shape), "shape of %s", r->name);
		unsigned oty;
		uint64_t nb;
		bool exact;
		uint8_t *got = map_tensor(hf, t, m, &oty, &nb, &exact);
		uint8_t *want = NULL;
		qtk_read_part_alloc(rg, r, 0, &want);
		CHECK(oty == r->layout.type, "type of %s: %u, want %u", r->name, oty, r->layout.type);
		bool same = got && want && nb == r->parts[0].nbytes && !memcmp(got, want, (size_t)nb);
		CHECK(same, "bytes of %s differ", r->name);
		nequal += same;
		free(got);
		qtk_free(want);
	}
	CHECK(nequal == 21, "%zu of 21 tensors byte-equal", nequal);
	{
		size_t *so = malloc(hf->ntensors * sizeof *so);
		size_t ns = qtk_hfmap_order_sorted(m, hf, so);
		int hh;
		bool ii;
		CHECK(ns == 21 && !strcmp(hf->tensors[so[0]].name, "lm_head.weight") &&
			      !strcmp(hf->tensors[so[2]].name, "model.layers.0.input_layernorm.weight") &&
			      !strcmp(qtk_hfmap_name(m, hf->tensors[so[20]].name, &hh, &ii), "output_norm.weight"),
		      "name-sorted order (safe_open().keys())");
		free(so);
	}
	compare_kv(meta, rg, "hf->gguf metadata");
	const qtk_kv *sl = qtk_kv_find(meta, "general.size_label");
	CHECK(sl && !strcmp(sl->val.v.str.s, "1.8M"), "size label");

	/* GGUF -> HF */
	qtk_model *hmeta = qtk_model_new();
	qtk_hfmap *r = NULL;
	rc = qtk_hfmap_gguf_to_hf(rg, hmeta, &r, &err);
	CHECK(rc == 0, "gguf_to_hf: %s (%s)", err.msg, err.subject);
	if (!rc) {
		size_t *o2 = malloc(rg->ntensors * sizeof *o2);
		size_t n2 = qtk_hfmap_order(r, rg, o2);
		CHECK(n2 == hf->ntensors, "reverse count %zu", n2);
		size_t eq = 0;
		for (size_t k = 0; k < n2; k++) {
			const qtk_tensor *t = &rg->tensors[o2[k]];
			int heads;
			bool inv;
			const char *on = qtk_hfmap_name(r, t->name, &heads, &inv);
			const qtk_tensor *h = on ? qtk_tensor_find(hf, on) : NULL;
			CHECK(h != NULL, "reverse name of %s: %s", t->name, on ? on : "(null)");
			if (!h)
				continue;
			CHECK(inv, "inverse not set");
			unsigned oty;
			uint64_t nb;
			bool exact;
			uint8_t *got = map_tensor(rg, t, r, &oty, &nb, &exact);
			uint8_t *want = NULL;
			qtk_read_part_alloc(hf, h, 0, &want);
			CHECK(exact, "F32 -> F16 of %s not exact", t->name);
			CHECK(oty == h->layout.type, "type of %s back: %u", on, oty);
			bool same = got && want && nb == h->parts[0].nbytes && !memcmp(got, want, (size_t)nb);
			CHECK(same, "reverse bytes of %s differ", on);
			eq += same;
			free(got);
			qtk_free(want);
		}
		CHECK(eq == 21, "%zu of 21 tensors back byte-equal", eq);
		free(o2);
		/* config.json: the keys that matter */
		const qtk_blob *cb = qtk_blob_find(hmeta, "config.json"), *ob = qtk_blob_find(hf, "config.json");
		cJSON *cg = cb ? cJSON_ParseWithLength((const char *)cb->data, cb->len) : NULL;
		cJSON *co = ob ? cJSON_ParseWithLength((const char *)ob->data, ob->len) : NULL;
		CHECK(cg && co, "config.json parses");
		static const char *const keys[] = {
			"architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
			"num_attention_heads", "num_key_value_heads", "vocab_size", "rms_norm_eps", "rope_theta",
			"max_position_embeddings", "tie_word_embeddings", "bos_token_id", "eos_token_id", "torch_dtype",
			"hidden_act", NULL};
		for (size_t i = 0; cg && co && keys[i]; i++)
			CHECK(json_same(jget(cg, keys[i]), jget(co, keys[i])), "config.json %s differs", keys[i]);
		cJSON_Delete(cg);
		cJSON_Delete(co);
		CHECK(cb && strstr((const char *)cb->data, "\"rms_norm_eps\": 1e-05,"), "eps printed as 1e-05: %s",
		      cb ? (const char *)cb->data : "");
		CHECK(qtk_blob_find(hmeta, "generation_config.json") && qtk_blob_find(hmeta, "tokenizer_config.json") &&
			      qtk_blob_find(hmeta, "special_tokens_map.json"),
		      "side files");
		/* tokenizer.model: the fixture's pieces survive */
		const qtk_blob *tb = qtk_blob_find(hmeta, "tokenizer.model"), *ob2 = qtk_blob_find(hf, "tokenizer.model");
		qtk_spm_model a, b;
		qtk_err e2;
		qtk_err_clear(&e2);
		CHECK(tb && !qtk_spm_parse(tb->data, tb->len, "out", &a, &e2), "rebuilt tokenizer.model parses: %s", e2.msg);
		CHECK(ob2 && !qtk_spm_parse(ob2->data, ob2->len, "in", &b, &e2), "fixture tokenizer.model parses");
		bool pieces_eq = a.n == b.n;
		for (size_t i = 0; pieces_eq && i < a.n; i++)
			pieces_eq = a.pieces[i].len == b.pieces[i].len &&
				    !memcmp(a.pieces[i].piece, b.pieces[i].piece, a.pieces[i].len) &&
				    !memcmp(&a.pieces[i].score, &b.pieces[i].score, 4) && a.pieces[i].type == b.pieces[i].type;
		CHECK(pieces_eq, "pieces, scores and types survive GGUF -> HF");
		CHECK(a.model_type == 2 && a.byte_fallback, "BPE with byte fallback");
		qtk_spm_free(&a);
		qtk_spm_free(&b);

		/* ... and GGUF -> HF -> GGUF gives llama.cpp's metadata again */
		qtk_model *hf2 = qtk_model_new();
		for (size_t i = 0; i < hmeta->nblobs; i++)
			qtk_model_add_blob(hf2, hmeta->blobs[i].name, hmeta->blobs[i].data, hmeta->blobs[i].len);
		for (size_t i = 0; i < hf->ntensors; i++) {
			qtk_tensor *t = qtk_model_add_tensor(hf2, hf->tensors[i].name);
			char *nm = t->name;
			qtk_tensor_copy(t, &hf->tensors[i]);
			t->name = nm;
		}
		hf2->path = qtk_strdup("fp16");
		qtk_model *meta3 = qtk_model_new();
		qtk_hfmap *m3 = NULL;
		rc = qtk_hfmap_hf_to_gguf(hf2, meta3, &m3, &err);
		CHECK(rc == 0, "gguf->hf->gguf: %s", err.msg);
		if (!rc)
			compare_kv(meta3, rg, "gguf->hf->gguf metadata");
		qtk_hfmap_free(m3);
		qtk_close(meta3);
		qtk_close(hf2);
	}
	qtk_hfmap_free(r);
	qtk_close(hmeta);

	/* SentencePiece: the fixture round-trips byte for byte */
	const qtk_blob *tb = qtk_blob_find(hf, "tokenizer.model");
	qtk_spm_model sp, sp2;
	qtk_err e3;
	qtk_err_clear(&e3);
	CHECK(tb && !qtk_spm_parse(tb->data, tb->len, tokp, &sp, &e3), "parse fixture tokenizer.model: %s", e3.msg);
	if (tb && sp.n) {
		qtk_buf out = {0};
		CHECK(!qtk_spm_write(&sp, &out), "write");
		CHECK(out.len == tb->len && !memcmp(out.p, tb->data, out.len), "write(parse(x)) == x byte for byte");
		CHECK(!qtk_spm_parse(out.p, out.len, "w", &sp2, &e3) && qtk_spm_equal(&sp, &sp2), "parse(write(x)) == x");
		CHECK(sp.n == 512 && sp.model_type == 2 && sp.byte_fallback, "512 BPE pieces, byte fallback");
		qtk_spm_free(&sp2);
		qtk_buf_free(&out);
		qtk_spm_free(&sp);
	}
	free(order);
	qtk_hfmap_free(m);
	qtk_close(meta);
	qtk_close(hf);
	qtk_close(rg);
}

/* ---- hostile tokenizer.model ----------------------------------------------- */

/* A protobuf writer of the test's own (the hostile inputs are built field by field). */
static void put_varint(qtk_buf *b, uint64_t v)
{
	do {
		uint8_t c = (uint8_t)(v & 0x7f);
		v >>= 7;
		qtk_buf_putc(b, (char)(c | (v ? 0x80 : 0)));
	} while (v);
}

static void put_key(qtk_buf *b, uint32_t field, unsigned wire) { put_varint(b, (uint64_t)field << 3 | wire); }

static void put_bytes(qtk_buf *b, uint32_t field, const void *d, size_t n)
{
	put_key(b, field, 2);
	put_varint(b, n);
	qtk_buf_put(b, d, n);
}

static void put_vfield(qtk_buf *b, uint32_t field, uint64_t v)
{
	put_key(b, field, 0);
	put_varint(b, v);
}

static void put_piece(qtk_buf *b, const char *s, float score, int type)
{
	qtk_buf in = {0};
	put_bytes(&in, 1, s, strlen(s));
	uint8_t f[4];
	uint32_t u;
	memcpy(&u, &score, 4);
	qtk_wr32(f, u);
	put_key(&in, 2, 5);
	qtk_buf_put(&in, f, 4);
	if (type != SPM_NORMAL)
		put_vfield(&in, 3, (uint64_t)type);
	put_bytes(b, 1, in.p, in.len);
	qtk_buf_free(&in);
}

static int spm_try(const uint8_t *d, size_t n, qtk_err *e)
{
	qtk_spm_model s;
	qtk_err_clear(e);
	int rc = qtk_spm_parse(d, n, "t.model", &s, e);
	if (!rc)
		qtk_spm_free(&s);
	return rc;
}

static void test_spm_hostile(void)
{
	qtk_buf b = {0};
	put_piece(&b, "<unk>", 0, SPM_UNKNOWN);
	put_piece(&b, "<s>", 0, SPM_CONTROL);
	put_piece(&b, "\xE2\x96\x81hello", -1.5f, SPM_NORMAL);
	put_piece(&b, "<0x41>", 0, SPM_BYTE);
	qtk_buf ts = {0};
	put_vfield(&ts, 3, 2);
	put_vfield(&ts, 43, (uint64_t)-1);
	put_bytes(&b, 2, ts.p, ts.len);
	qtk_buf_free(&ts);
	qtk_err e;
	qtk_spm_model s, s2;
	qtk_err_clear(&e);
	CHECK(!qtk_spm_parse(b.p, b.len, "t", &s, &e), "valid model: %s", e.msg);
	CHECK(s.n == 4 && s.pieces[2].score == -1.5f && s.pieces[2].type == SPM_NORMAL && !s.pieces[2].has_type &&
		      s.pieces[3].type == SPM_BYTE && s.model_type == 2,
	      "decoded");
	qtk_buf w = {0};
	qtk_spm_write(&s, &w);
	CHECK(w.len == b.len && !memcmp(w.p, b.p, b.len), "byte round trip");
	CHECK(!qtk_spm_parse(w.p, w.len, "t", &s2, &e) && qtk_spm_equal(&s, &s2), "parse(write(x)) == x");
	qtk_spm_free(&s2);
	qtk_spm_free(&s);
	qtk_buf_free(&w);

	/* every truncation: parses only at field boundaries, else QTK_E_DATA with an offset */
	int bad = 0;
	for (size_t n = 0; n < b.len; n++) {
		int rc = spm_try(b.p, n, &e);
		if (rc != 0 && (rc != QTK_E_DATA || e.offset < 0 || (uint64_t)e.offset > n))
			bad++;
	}
	CHECK(bad == 0, "%d truncations misreported", bad);
	CHECK(spm_try(b.p, 0, &e) == QTK_E_DATA, "empty file");
	CHECK(spm_try(b.p, b.len - 1, &e) == QTK_E_DATA && strstr(e.msg, "past the end"), "cut trainer_spec: %s", e.msg);

	static const uint8_t varint_over[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
	CHECK(spm_try(varint_over, sizeof varint_over, &e) == QTK_E_DATA && e.offset == 1, "varint overflow: %s", e.msg);
	static const uint8_t varint_long[] = {0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
	CHECK(spm_try(varint_long, sizeof varint_long, &e) == QTK_E_DATA, "11-byte varint");
	static const uint8_t huge_len[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x0a, 0x01, 'a'};
	CHECK(spm_try(huge_len, sizeof huge_len, &e) == QTK_E_DATA && strstr(e.msg, "past the end"), "huge length");
	static const uint8_t group[] = {0x0b, 0x0c};
	CHECK(spm_try(group, sizeof group, &e) == QTK_E_DATA, "group wire type");
	static const uint8_t field0[] = {0x02, 0x00};
	CHECK(spm_try(field0, sizeof field0, &e) == QTK_E_DATA, "field 0");
	static const uint8_t badtype[] = {0x0a, 0x05, 0x0a, 0x01, 'a', 0x18, 0x07};
	CHECK(spm_try(badtype, sizeof badtype, &e) == QTK_E_DATA && e.offset == 5, "type 7: %s at %lld", e.msg,
	      (long long)e.offset);
	static const uint8_t badutf[] = {0x0a, 0x03, 0x0a, 0x01, 0xff};
	CHECK(spm_try(badutf, sizeof badutf, &e) == QTK_E_DATA && strstr(e.msg, "UTF-8"), "invalid UTF-8");
	static const uint8_t notext[] = {0x0a, 0x02, 0x18, 0x01};
	CHECK(spm_try(notext, sizeof notext, &e) == QTK_E_DATA, "piece without text");
	static const uint8_t piecewire[] = {0x08, 0x01};
	CHECK(spm_try(piecewire, sizeof piecewire, &e) == QTK_E_DATA, "pieces as varint");
	static const uint8_t dup[] = {0x0a, 0x06, 0x0a, 0x01, 'a', 0x0a, 0x01, 'b'};
	CHECK(spm_try(dup, sizeof dup, &e) == QTK_E_DATA, "repeated piece field");
	static const uint8_t specwire[] = {0x0a, 0x03, 0x0a, 0x01, 'a', 0x10, 0x01};
	CHECK(spm_try(specwire, sizeof specwire, &e) == QTK_E_DATA, "trainer_spec as varint");
	static const uint8_t badspec[] = {0x0a, 0x03, 0x0a, 0x01, 'a', 0x12, 0x02, 0x08, 0x80};
	CHECK(spm_try(badspec, sizeof badspec, &e) == QTK_E_DATA, "truncated varint inside trainer_spec");
	/* an oversized piece */
	size_t big = SPM_CAP_PIECE + 1;
	qtk_buf ob = {0}, oi = {0};
	char *bigp = malloc(big + 1);
	memset(bigp, 'x', big);
	bigp[big] = 0;
	put_bytes(&oi, 1, bigp, big);
	put_bytes(&ob, 1, oi.p, oi.len);
	CHECK(spm_try(ob.p, ob.len, &e) == QTK_E_DATA && strstr(e.msg, "longer"), "oversized piece: %s", e.msg);
	free(bigp);
	qtk_buf_free(&ob);
	qtk_buf_free(&oi);
	/* garbage: never crashes, errors are QTK_E_DATA */
	uint64_t st = 0x9E3779B97F4A7C15ull;
	int odd = 0;
	for (int it = 0; it < 3000; it++) {
		uint8_t g[64];
		size_t n = (size_t)(it % 64);
		for (size_t i = 0; i < n; i++) {
			st ^= st << 13;
			st ^= st >> 7;
			st ^= st << 17;
			g[i] = (uint8_t)st;
		}
		/* also mutate the valid model */
		uint8_t *mu = malloc(b.len);
		memcpy(mu, b.p, b.len);
		mu[st % b.len] ^= (uint8_t)(1u << (st >> 8 & 7));
		int r1 = spm_try(g, n, &e), r2 = spm_try(mu, b.len, &e);
		if ((r1 && r1 != QTK_E_DATA) || (r2 && r2 != QTK_E_DATA))
			odd++;
		free(mu);
	}
	CHECK(odd == 0, "%d garbage inputs gave a non-data error", odd);
	qtk_buf_free(&b);
}

/* ---- hostile config.json ----------------------------------------------------- */

static const char good_cfg[] =
	"{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 64,"
	" \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
	" \"num_key_value_heads\": 2, \"vocab_size\": 16, \"rms_norm_eps\": 1e-06, \"rope_theta\": 500000.0,"
	" \"max_position_embeddings\": 128, \"bos_token_id\": 1, \"eos_token_id\": 2}";

static int try_cfg(const char *text, qtk_err *e)
{
	qtk_model *hf = qtk_model_new();
	qtk_model_add_blob(hf, "config.json", text, strlen(text));
	qtk_model *meta = qtk_model_new();
	qtk_hfmap *m = NULL;
	qtk_err_clear(e);
	int rc = qtk_hfmap_hf_to_gguf(hf, meta, &m, e);
	qtk_hfmap_free(m);
	qtk_close(meta);
	qtk_close(hf);
	return rc;
}

/* good_cfg with `from` replaced by `to` */
static int try_edit(const char *from, const char *to, qtk_err *e)
{
	char buf[2048];
	const char *p = strstr(good_cfg, from);
	if (!p)
		return 99;
	snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - good_cfg), good_cfg, to, p + strlen(from));
	return try_cfg(buf, e);
}

static void test_config_hostile(void)
{
	qtk_err e;
	CHECK(try_cfg(good_cfg, &e) == 0, "good config: %s", e.msg);
	static const struct {
		const char *from, *to, *key;
	} cases[] = {
		{"\"num_attention_heads\": 4,", "", "num_attention_heads"},
		{"\"num_attention_heads\": 4", "\"num_attention_heads\": 0", "num_attention_heads"},
		{"\"num_attention_heads\": 4", "\"num_attention_heads\": \"4\"", "num_attention_heads"},
		{"\"num_attention_heads\": 4", "\"num_attention_heads\": 4.5", "num_attention_heads"},
		{"\"hidden_size\": 64", "\"hidden_size\": 66", "hidden_size"},
		{"\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", "num_key_value_heads"},
		{"\"num_key_value_heads\": 2", "\"num_key_value_heads\": 0", "num_key_value_heads"},
		{"\"hidden_size\": 64", "\"hidden_size\": -64", "hidden_size"},
		{"\"hidden_size\": 64,", "", "hidden_size"},
		{"\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1e300", "num_hidden_layers"},
		{"\"num_hidden_layers\": 2,", "", "num_hidden_layers"},
		{"\"vocab_size\": 16", "\"vocab_size\": true", "vocab_size"},
		{"\"vocab_size\": 16,", "", "vocab_size"},
		{"\"rms_norm_eps\": 1e-06", "\"rms_norm_eps\": \"tiny\"", "rms_norm_eps"},
		{"\"rms_norm_eps\": 1e-06", "\"rms_norm_eps\": -1", "rms_norm_eps"},
		{"\"rope_theta\": 500000.0", "\"rope_theta\": 0", "rope_theta"},
		{"[\"LlamaForCausalLM\"]", "[]", "architectures"},
		{"[\"LlamaForCausalLM\"]", "\"LlamaForCausalLM\"", "architectures"},
		{"\"architectures\": [\"LlamaForCausalLM\"], ", "", "architectures"},
		{"\"eos_token_id\": 2", "\"eos_token_id\": -2", "eos_token_id"},
		{"\"hidden_size\": 64", "\"hidden_size\": 64, \"head_dim\": 15", "head_dim"},
		{"\"hidden_size\": 64", "\"hidden_size\": 64, \"num_local_experts\": 8", "num_local_experts"},
		{"\"hidden_size\": 64", "\"hidden_size\": 64, \"tie_word_embeddings\": 1", "tie_word_embeddings"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		int rc = try_edit(cases[i].from, cases[i].to, &e);
		CHECK(rc == QTK_E_DATA && (strstr(e.msg, cases[i].key) || !strcmp(e.subject, cases[i].key)),
		      "case %zu (%s): rc %d, %s [%s]", i, cases[i].key, rc, e.msg, e.subject);
	}
	CHECK(try_edit("\"LlamaForCausalLM\"", "\"GPT2LMHeadModel\"", &e) == QTK_E_DATA &&
		      !strncmp(e.msg, "unsupported architecture GPT2LMHeadModel (supported: LlamaForCausalLM, ", 50) && strstr(e.msg, "Gemma2ForCausalLM"),
	      "unsupported: %s", e.msg);
	CHECK(try_edit("\"LlamaForCausalLM\"", "\"MistralForCausalLM\"", &e) == 0, "mistral accepted");
	CHECK(try_edit("\"vocab_size\": 16", "\"vocab_size\": 16, \"vocab_size\": 17", &e) == QTK_E_DATA,
	      "duplicate key rejected");
	CHECK(try_cfg("{\"architectures\": [\"LlamaForCausalLM\"], ", &e) == QTK_E_DATA, "truncated JSON");
	CHECK(try_cfg("[1, 2]", &e) == QTK_E_DATA, "not an object");
	qtk_model *hf = qtk_model_new(), *meta = qtk_model_new();
	qtk_hfmap *m = NULL;
	qtk_err_clear(&e);
	CHECK(qtk_hfmap_hf_to_gguf(hf, meta, &m, &e) == QTK_E_DATA && strstr(e.msg, "config.json"), "no config.json");
	qtk_close(hf);
	qtk_close(meta);

	/* Q rows that cannot be split into heads */
	hf = qtk_model_new();
	meta = qtk_model_new();
	qtk_model_add_blob(hf, "config.json", good_cfg, strlen(good_cfg));
	qtk_tensor *t = qtk_model_add_tensor(hf, "model.layers.0.self_attn.k_proj.weight");
	t->ndim = 2;
	t->shape[0] = 30;
	t->shape[1] = 64;
	t->layout.type = QTK_T_F16;
	qtk_err_clear(&e);
	CHECK(qtk_hfmap_hf_to_gguf(hf, meta, &m, &e) == QTK_E_DATA && strstr(e.msg, "num_key_value_heads"),
	      "k rows: %s", e.msg);
	qtk_close(hf);
	qtk_close(meta);
}

/* ---- the permutation ------------------------------------------------------- */

static void test_permute(void)
{
	/* llama.cpp: w.reshape(heads, 2, rows/heads/2, cols).swapaxes(1, 2).reshape(rows, cols) */
	enum { R = 24, C = 3, H = 3 };
	uint8_t src[R * C], dst[R * C], back[R * C];
	for (int i = 0; i < R * C; i++)
		src[i] = (uint8_t)i;
	qtk_family_permute_rows(src, dst, R, C, H, false);
	int bad = 0, half = R / H / 2;
	for (int h = 0; h < H; h++)
		for (int i = 0; i < half; i++)
			for (int j = 0; j < 2; j++) {
				int out_row = h * (R / H) + i * 2 + j, in_row = h * (R / H) + j * half + i;
				if (memcmp(dst + out_row * C, src + in_row * C, C))
					bad++;
			}
	CHECK(bad == 0, "forward permutation matches llama.cpp's reshape");
	qtk_family_permute_rows(dst, back, R, C, H, true);
	CHECK(!memcmp(back, src, sizeof src), "inverse undoes it");
	qtk_family_permute_rows(src, dst, R, C, 0, false);
	CHECK(!memcmp(dst, src, sizeof src), "heads 0: copy");
}

/* ---- fresh clone: a small GGUF built in memory, GGUF -> HF -> GGUF ---------- */

static void set_arr(qtk_model *m, const char *k, uint8_t elem, void *arr, uint64_t n)
{
	qtk_kv *kv = qtk_model_add_kv(m, k);
	kv->val.type = QTK_V_ARR;
	kv->val.elem = elem;
	kv->val.n = n;
	kv->val.arr = arr;
}

static void set_u(qtk_model *m, const char *k, uint32_t v)
{
	qtk_kv *kv = qtk_model_add_kv(m, k);
	kv->val.type = QTK_V_U32;
	kv->val.v.u = v;
}

static void set_f(qtk_model *m, const char *k, float v)
{
	qtk_kv *kv = qtk_model_add_kv(m, k);
	kv->val.type = QTK_V_F32;
	kv->val.v.f = v;
}

static void add_t(qtk_model *m, const char *name, uint64_t r, uint64_t c, unsigned ty)
{
	qtk_tensor *t = qtk_model_add_tensor(m, name);
	t->ndim = r ? 2 : 1;
	t->shape[0] = r ? r : c;
	t->shape[1] = r ? c : 0;
	t->layout.type = ty;
	t->nparts = 1;
	t->parts[0].type = ty;
	qtk_tensor_finish(t);
	t->n_params = r ? r * c : c;
}

static void test_roundtrip_memory(void)
{
	enum { NV = 300, E = 64, FF = 96, NH = 4, NKV = 2 };
	qtk_model *g = qtk_model_new();
	qtk_model_set_kv_str(g, "general.architecture", "llama");
	qtk_model_set_kv_str(g, "general.name", "mem");
	set_u(g, "llama.block_count", 2);
	set_u(g, "llama.context_length", 512);
	set_u(g, "llama.embedding_length", E);
	set_u(g, "llama.feed_forward_length", FF);
	set_u(g, "llama.attention.head_count", NH);
	set_u(g, "llama.attention.head_count_kv", NKV);
	set_f(g, "llama.rope.freq_base", 500000.0f);
	set_f(g, "llama.attention.layer_norm_rms_epsilon", 1e-6f);
	set_u(g, "general.file_type", 1);
	set_u(g, "llama.vocab_size", NV);
	set_u(g, "llama.rope.dimension_count", E / NH);
	qtk_model_set_kv_str(g, "tokenizer.ggml.model", "llama");
	qtk_model_set_kv_str(g, "tokenizer.ggml.pre", "default");
	qtk_str *tok = calloc(NV, sizeof *tok);
	uint8_t *sc = calloc(NV, 4), *ty = calloc(NV, 4);
	for (int i = 0; i < NV; i++) {
		char b[32];
		int type = SPM_NORMAL;
		float s = -(float)i * 0.25f;
		if (i == 0) { snprintf(b, sizeof b, "<unk>"); type = SPM_UNKNOWN; s = 0; }
		else if (i == 1) { snprintf(b, sizeof b, "<s>"); type = SPM_CONTROL; s = 0; }
		else if (i == 2) { snprintf(b, sizeof b, "</s>"); type = SPM_CONTROL; s = 0; }
		else if (i < 259) { snprintf(b, sizeof b, "<0x%02X>", i - 3); type = SPM_BYTE; s = 0; }
		else if (i == 299) { snprintf(b, sizeof b, "[PAD299]"); type = SPM_UNUSED; s = -10000.0f; }
		else snprintf(b, sizeof b, "\xE2\x96\x81t%d\"\\", i);
		tok[i].len = strlen(b);
		tok[i].s = qtk_strdup(b);
		uint32_t u;
		memcpy(&u, &s, 4);
		qtk_wr32(sc + 4 * i, u);
		qtk_wr32(ty + 4 * i, (uint32_t)type);
	}
	set_arr(g, "tokenizer.ggml.tokens", QTK_V_STR, tok, NV);
	set_arr(g, "tokenizer.ggml.scores", QTK_V_F32, sc, NV);
	set_arr(g, "tokenizer.ggml.token_type", QTK_V_I32, ty, NV);
	set_u(g, "tokenizer.ggml.bos_token_id", 1);
	set_u(g, "tokenizer.ggml.eos_token_id", 2);
	qtk_kv *ab = qtk_model_add_kv(g, "tokenizer.ggml.add_bos_token");
	ab->val.type = QTK_V_BOOL;
	ab->val.v.u = 1;
	qtk_model_set_kv_str(g, "tokenizer.chat_template", "{% for m in messages %}\"{{ m }}\"\n{% endfor %}");
	set_u(g, "general.quantization_version", 2);
	add_t(g, "token_embd.weight", NV, E, QTK_T_Q8_0);
	for (int l = 0; l < 2; l++) {
		char n[64];
		snprintf(n, sizeof n, "blk.%d.attn_norm.weight", l); add_t(g, n, 0, E, QTK_T_F32);
		snprintf(n, sizeof n, "blk.%d.ffn_norm.weight", l); add_t(g, n, 0, E, QTK_T_F32);
		snprintf(n, sizeof n, "blk.%d.attn_q.weight", l); add_t(g, n, E, E, QTK_T_Q4_K);
		snprintf(n, sizeof n, "blk.%d.attn_k.weight", l); add_t(g, n, E / NH * NKV, E, QTK_T_Q4_K);
		snprintf(n, sizeof n, "blk.%d.attn_v.weight", l); add_t(g, n, E / NH * NKV, E, QTK_T_Q6_K);
		snprintf(n, sizeof n, "blk.%d.attn_output.weight", l); add_t(g, n, E, E, QTK_T_Q4_K);
		snprintf(n, sizeof n, "blk.%d.ffn_gate.weight", l); add_t(g, n, FF, E, QTK_T_Q4_K);
		snprintf(n, sizeof n, "blk.%d.ffn_up.weight", l); add_t(g, n, FF, E, QTK_T_Q4_K);
		snprintf(n, sizeof n, "blk.%d.ffn_down.weight", l); add_t(g, n, E, FF, QTK_T_Q6_K);
	}
	add_t(g, "output_norm.weight", 0, E, QTK_T_F32);
	/* no output.weight: tied embeddings */

	qtk_err e;
	int rc, nf, badf = 0;
	for (nf = 1; nf < 2000; nf++) {
		qtk_model *hx = qtk_model_new();
		qtk_hfmap *rx = NULL;
		qtk_err_clear(&e);
		qtk_test_fail_alloc_at(nf);
		rc = qtk_hfmap_gguf_to_hf(g, hx, &rx, &e);
		qtk_test_fail_alloc_at(0);
		badf += rc && rc != QTK_E_IO;
		qtk_hfmap_free(rx);
		qtk_close(hx);
		if (!rc)
			break;
	}
	CHECK(badf == 0 && nf < 2000, "gguf_to_hf under allocation failures (%d, %d)", badf, nf);
	qtk_err_clear(&e);
	qtk_model *hm = qtk_model_new();
	qtk_hfmap *r = NULL;
	rc = qtk_hfmap_gguf_to_hf(g, hm, &r, &e);
	CHECK(rc == 0, "gguf_to_hf: %s", e.msg);
	if (rc) {
		qtk_close(hm);
		qtk_close(g);
		return;
	}
	const qtk_blob *cb = qtk_blob_find(hm, "config.json");
	cJSON *c = cb ? cJSON_ParseWithLength((const char *)cb->data, cb->len) : NULL;
	CHECK(c != NULL, "config.json is JSON");
	CHECK(c && cJSON_IsTrue(jget(c, "tie_word_embeddings")), "tied");
	CHECK(c && !strcmp(jget(c, "torch_dtype")->valuestring, "float16"), "quantized -> float16");
	CHECK(cb && strstr((const char *)cb->data, "\"rope_theta\": 500000.0,") &&
		      strstr((const char *)cb->data, "\"rms_norm_eps\": 1e-06,"),
	      "floats printed like Python: %s", cb ? (const char *)cb->data : "");
	cJSON_Delete(c);
	const qtk_blob *tc = qtk_blob_find(hm, "tokenizer_config.json");
	c = tc ? cJSON_ParseWithLength((const char *)tc->data, tc->len) : NULL;
	CHECK(c && !strcmp(jget(c, "chat_template")->valuestring, "{% for m in messages %}\"{{ m }}\"\n{% endfor %}"),
	      "chat template escaped and back");
	CHECK(c && cJSON_IsTrue(jget(c, "add_bos_token")) && !strcmp(jget(c, "bos_token")->valuestring, "<s>"),
	      "tokenizer_config");
	cJSON_Delete(c);
	/* names and permutation flags */
	int heads;
	bool inv;
	const char *nm = qtk_hfmap_name(r, "blk.1.attn_k.weight", &heads, &inv);
	CHECK(nm && !strcmp(nm, "model.layers.1.self_attn.k_proj.weight") && heads == NKV && inv, "k back");
	nm = qtk_hfmap_name(r, "blk.0.attn_q.weight", &heads, &inv);
	CHECK(nm && !strcmp(nm, "model.layers.0.self_attn.q_proj.weight") && heads == NH, "q back");
	nm = qtk_hfmap_name(r, "blk.0.attn_v.weight", &heads, &inv);
	CHECK(nm && heads == 0, "v not permuted");
	CHECK(qtk_hfmap_name(r, "blk.0.unknown.weight", &heads, &inv) == NULL, "unmapped -> NULL");
	CHECK(qtk_hfmap_out_type(r, qtk_tensor_find(g, "output_norm.weight")) == QTK_T_F32,
	      "norms stay F32 when the matrices are quantized");

	/* back to GGUF */
	qtk_model *h2 = qtk_model_new();
	for (size_t i = 0; i < hm->nblobs; i++)
		qtk_model_add_blob(h2, hm->blobs[i].name, hm->blobs[i].data, hm->blobs[i].len);
	size_t *ord = malloc(g->ntensors * sizeof *ord);
	size_t n = qtk_hfmap_order(r, g, ord);
	for (size_t k = 0; k < n; k++) {
		const qtk_tensor *t = &g->tensors[ord[k]];
		const char *on = qtk_hfmap_name(r, t->name, &heads, &inv);
		qtk_tensor *nt = qtk_model_add_tensor(h2, on ? on : t->name);
		char *keep = nt->name;
		qtk_tensor_copy(nt, t);
		nt->name = keep;
	}
	h2->path = qtk_strdup("/tmp/mem/");
	qtk_model *g2 = qtk_model_new();
	qtk_hfmap *f = NULL;
	qtk_err_clear(&e);
	rc = qtk_hfmap_hf_to_gguf(h2, g2, &f, &e);
	CHECK(rc == 0, "hf_to_gguf: %s (%s)", e.msg, e.subject);
	if (!rc) {
		/* every source key comes back with the same type and value, except file_type
		 * (a placeholder the caller sets) */
		for (size_t i = 0; i < g->nkv; i++) {
			const qtk_kv *a = &g->kv[i];
			if (is_naming_key(a->key) || !strcmp(a->key, "general.file_type"))
				continue;
			const qtk_kv *b = qtk_kv_find(g2, a->key);
			CHECK(b && t_val_eq(&a->val, &b->val), "key %s after GGUF -> HF -> GGUF", a->key);
		}
		const qtk_kv *nmk = qtk_kv_find(g2, "general.name");
		CHECK(nmk && !strcmp(nmk->val.v.str.s, "mem"), "general.name from the directory");
		CHECK(qtk_hfmap_count(f) == g->ntensors, "tensor count");
		size_t *o2 = malloc(h2->ntensors * sizeof *o2);
		size_t n2 = qtk_hfmap_order(f, h2, o2);
		bool names = n2 == g->ntensors;
		for (size_t k = 0; names && k < n2; k++) {
			const char *back = qtk_hfmap_name(f, h2->tensors[o2[k]].name, &heads, &inv);
			names = back && !strcmp(back, g->tensors[k].name);
		}
		CHECK(names, "names and order survive");
		free(o2);
		CHECK(qtk_hfmap_set_file_type(g2, 15) == 0 && qtk_kv_find(g2, "general.file_type")->val.v.u == 15,
		      "set file type in place");
	}
	qtk_hfmap_free(f);
	qtk_close(g2);
	qtk_close(h2);
	free(ord);
	qtk_hfmap_free(r);
	qtk_close(hm);
	qtk_close(g);
}


/* ---- qwen2: BPE tokenizer.json, q/k/v biases, no permutation --------------- */

static const char qwen_cfg[] =
	"{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_size\": 64,"
	" \"intermediate_size\": 128, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
	" \"num_key_value_heads\": 2, \"vocab_size\": 12, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0,"
	" \"max_position_embeddings\": 4096, \"tie_word_embeddings\": true, \"bos_token_id\": 9,"
	" \"eos_token_id\": 9}";
static const char qwen_tok[] =
	"{\"version\": \"1.0\", \"normalizer\": {\"type\": \"NFC\"}, \"pre_tokenizer\": {\"type\": \"Sequence\","
	" \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
	" \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false,"
	" \"trim_offsets\": false, \"use_regex\": false}]},"
	" \"added_tokens\": ["
	"{\"id\": 9, \"content\": \"<|endoftext|>\", \"special\": true, \"normalized\": false},"
	"{\"id\": 10, \"content\": \"<|im_start|>\", \"special\": true, \"normalized\": false},"
	"{\"id\": 11, \"content\": \"my\\u2581word\", \"special\": false, \"normalized\": true}],"
	" \"model\": {\"type\": \"BPE\", \"byte_fallback\": false, \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2,"
	" \"\\u0120\": 3, \"\\u0120a\": 4, \"c\": 5, \"\\\"q\": 6, \"\\u0120\\u0120\": 7},"
	" \"merges\": [\"a b\", [\" \", \"a\"], [\" \", \" \"]]}}";
static const char qwen_tc[] =
	"{\"eos_token\": \"<|endoftext|>\", \"pad_token\": \"<|endoftext|>\", \"bos_token\": null,"
	" \"chat_template\": \"{{ messages }}\", \"add_bos_token\": false}";

static void test_qwen2(void)
{
	qtk_model *hf = qtk_model_new();
	qtk_model_add_blob(hf, "config.json", qwen_cfg, strlen(qwen_cfg));
	qtk_model_add_blob(hf, "tokenizer.json", qwen_tok, strlen(qwen_tok));
	qtk_model_add_blob(hf, "tokenizer_config.json", qwen_tc, strlen(qwen_tc));
	add_t(hf, "model.embed_tokens.weight", 12, 64, QTK_T_BF16);
	add_t(hf, "model.layers.0.input_layernorm.weight", 0, 64, QTK_T_BF16);
	add_t(hf, "model.layers.0.self_attn.q_proj.weight", 64, 64, QTK_T_BF16);
	add_t(hf, "model.layers.0.self_attn.q_proj.bias", 0, 64, QTK_T_BF16);
	add_t(hf, "model.layers.0.self_attn.k_proj.weight", 32, 64, QTK_T_BF16);
	add_t(hf, "model.layers.0.self_attn.k_proj.bias", 0, 32, QTK_T_BF16);
	add_t(hf, "model.layers.0.self_attn.v_proj.bias", 0, 32, QTK_T_BF16);
	add_t(hf, "model.layers.0.self_attn.rotary_emb.inv_freq", 0, 8, QTK_T_F32);
	add_t(hf, "model.norm.weight", 0, 64, QTK_T_BF16);
	qtk_model *meta = qtk_model_new();
	qtk_hfmap *m = NULL;
	qtk_err e;
	qtk_err_clear(&e);
	int rc = qtk_hfmap_hf_to_gguf(hf, meta, &m, &e);
	CHECK(rc == 0, "qwen2 hf_to_gguf: %s", e.msg);
	if (rc) {
		qtk_close(meta);
		qtk_close(hf);
		return;
	}
	static const char *const want_keys[] = {
		"general.architecture", "general.type", "general.name", "general.size_label", "qwen2.block_count",
		"qwen2.context_length", "qwen2.embedding_length", "qwen2.feed_forward_length",
		"qwen2.attention.head_count", "qwen2.attention.head_count_kv", "qwen2.rope.freq_base",
		"qwen2.attention.layer_norm_rms_epsilon", "general.file_type", "tokenizer.ggml.model",
		"tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
		"tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.bos_token_id",
		"tokenizer.ggml.add_bos_token", "tokenizer.chat_template", "general.quantization_version", NULL};
	size_t i = 0;
	for (; want_keys[i] && i < meta->nkv; i++)
		CHECK(!strcmp(meta->kv[i].key, want_keys[i]), "qwen2 key %zu: %s, want %s", i, meta->kv[i].key, want_keys[i]);
	CHECK(!want_keys[i] && i == meta->nkv, "qwen2 key count %zu", meta->nkv);
	const qtk_kv *ft = qtk_kv_find(meta, "general.file_type");
	CHECK(ft && ft->val.v.u == 32, "bf16 file type placeholder");
	const qtk_kv *tk = qtk_kv_find(meta, "tokenizer.ggml.tokens"), *ty = qtk_kv_find(meta, "tokenizer.ggml.token_type");
	const qtk_kv *mg = qtk_kv_find(meta, "tokenizer.ggml.merges");
	CHECK(tk && tk->val.n == 12 && ty && ty->val.n == 12, "12 tokens");
	if (tk && ty && tk->val.n == 12) {
		const qtk_str *t = tk->val.arr;
		const uint8_t *tt = ty->val.arr;
		CHECK(!strcmp(t[8].s, "[PAD8]") && qtk_rd32(tt + 32) == 5, "missing id -> [PAD8] UNUSED");
		CHECK(!strcmp(t[9].s, "<|endoftext|>") && qtk_rd32(tt + 36) == 3, "special -> CONTROL");
		CHECK(!strcmp(t[11].s, "my word") && qtk_rd32(tt + 44) == 4, "user-defined, spaces pre-normalized");
		CHECK(!strcmp(t[3].s, "\xC4\xA0") && qtk_rd32(tt + 12) == 1, "normal");
	}
	CHECK(mg && mg->val.n == 3 && !strcmp(((qtk_str *)mg->val.arr)[1].s, "\xC4\xA0 a") &&
		      !strcmp(((qtk_str *)mg->val.arr)[0].s, "a b"),
	      "merges (pair form, spaces as U+0120)");
	const qtk_kv *eos = qtk_kv_find(meta, "tokenizer.ggml.eos_token_id");
	CHECK(eos && eos->val.v.u == 9, "eos from tokenizer.json added tokens");
	int heads;
	bool inv;
	const char *n = qtk_hfmap_name(m, "model.layers.0.self_attn.q_proj.bias", &heads, &inv);
	CHECK(n && !strcmp(n, "blk.0.attn_q.bias") && heads == 0, "qwen2: q bias, no permutation");
	CHECK(qtk_hfmap_out_type(m, qtk_tensor_find(hf, "model.layers.0.self_attn.q_proj.bias")) == QTK_T_F32, "bias F32");
	CHECK(qtk_hfmap_out_type(m, qtk_tensor_find(hf, "model.layers.0.self_attn.q_proj.weight")) == QTK_T_BF16,
	      "matrix keeps bf16");
	CHECK(qtk_hfmap_count(m) == 8, "inv_freq dropped");
	const qtk_kv *pk = qtk_kv_find(meta, "tokenizer.ggml.pre");
	CHECK(pk && pk->val.type == QTK_V_STR && !strcmp(pk->val.v.str.s, "qwen2"), "pre named from the pre_tokenizer");
	CHECK(qtk_hfmap_warning(m) == NULL, "pre identified: no warning");

	/* GGUF -> HF -> GGUF: the vocabulary survives */
	qtk_model *g = qtk_model_new();
	for (size_t k = 0; k < meta->nkv; k++) {
		qtk_kv *kv = qtk_model_add_kv(g, meta->kv[k].key);
		qtk_value_copy(&kv->val, &meta->kv[k].val);
	}
	size_t *ord = malloc(hf->ntensors * sizeof *ord);
	size_t no = qtk_hfmap_order(m, hf, ord);
	for (size_t k = 0; k < no; k++) {
		const qtk_tensor *t = &hf->tensors[ord[k]];
		const char *on = qtk_hfmap_name(m, t->name, &heads, &inv);
		add_t(g, on, t->ndim == 2 ? t->shape[0] : 0, t->ndim == 2 ? t->shape[1] : t->shape[0],
		      qtk_hfmap_out_type(m, t));
	}
	free(ord);
	qtk_model *hm = qtk_model_new();
	qtk_hfmap *r = NULL;
	qtk_err_clear(&e);
	rc = qtk_hfmap_gguf_to_hf(g, hm, &r, &e);
	CHECK(rc == 0, "qwen2 gguf_to_hf: %s", e.msg);
	const qtk_blob *cb = qtk_blob_find(hm, "config.json");
	CHECK(cb && strstr((const char *)cb->data, "Qwen2ForCausalLM") && strstr((const char *)cb->data, "\"bfloat16\"") &&
		      strstr((const char *)cb->data, "\"rope_theta\": 1000000.0,"),
	      "qwen2 config.json: %s", cb ? (const char *)cb->data : "");
	CHECK(qtk_hfmap_out_type(r, qtk_tensor_find(g, "blk.0.attn_q.bias")) == QTK_T_BF16, "bias back to bf16");
	qtk_model *h2 = qtk_model_new();
	for (size_t k = 0; k < hm->nblobs; k++)
		qtk_model_add_blob(h2, hm->blobs[k].name, hm->blobs[k].data, hm->blobs[k].len);
	for (size_t k = 0; k < g->ntensors; k++) {
		const char *on = qtk_hfmap_name(r, g->tensors[k].name, &heads, &inv);
		add_t(h2, on, g->tensors[k].ndim == 2 ? g->tensors[k].shape[0] : 0,
		      g->tensors[k].ndim == 2 ? g->tensors[k].shape[1] : g->tensors[k].shape[0], QTK_T_BF16);
	}
	qtk_model *g2 = qtk_model_new();
	qtk_hfmap *f = NULL;
	qtk_err_clear(&e);
	rc = qtk_hfmap_hf_to_gguf(h2, g2, &f, &e);
	CHECK(rc == 0, "qwen2 back: %s", e.msg);
	static const char *const same[] = {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
					   "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id",
					   "tokenizer.chat_template", "qwen2.rope.freq_base", "qwen2.attention.head_count_kv",
					   NULL};
	for (size_t k = 0; !rc && same[k]; k++) {
		const qtk_kv *a = qtk_kv_find(meta, same[k]), *b = qtk_kv_find(g2, same[k]);
		CHECK(a && b && t_val_eq(&a->val, &b->val), "qwen2 %s survives GGUF -> HF -> GGUF", same[k]);
	}
	qtk_hfmap_free(f);
	qtk_close(g2);
	qtk_close(h2);
	qtk_hfmap_free(r);
	qtk_close(hm);
	qtk_close(g);
	qtk_hfmap_free(m);
	qtk_close(meta);
	qtk_close(hf);

	/* hostile tokenizer.json */
	static const char *const bad_tok[] = {
		"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}",
		"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}}}",
		"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}}}",
		"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 99}}}",
		"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [7]}}",
		"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"added_tokens\": [{\"id\": 0, \"content\": \"x\"}]}",
		"{\"model\": {\"type\": \"BPE\", \"vocab\": [1]}}",
		"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}",
	};
	for (size_t k = 0; k < sizeof bad_tok / sizeof *bad_tok; k++) {
		hf = qtk_model_new();
		meta = qtk_model_new();
		qtk_model_add_blob(hf, "config.json", qwen_cfg, strlen(qwen_cfg));
		qtk_model_add_blob(hf, "tokenizer.json", bad_tok[k], strlen(bad_tok[k]));
		qtk_err_clear(&e);
		m = NULL;
		rc = qtk_hfmap_hf_to_gguf(hf, meta, &m, &e);
		CHECK(rc == QTK_E_DATA && m == NULL, "bad tokenizer.json %zu: rc %d", k, rc);
		/* the vocabulary is checked before the pre-tokenizer is named */
		CHECK(!strstr(e.msg, "pre_tokenizer"), "bad tokenizer.json %zu: vocabulary error first: %s", k, e.msg);
		qtk_hfmap_free(m);
		qtk_close(meta);
		qtk_close(hf);
	}
}

/* ---- hostile GGUF metadata on the way to HF --------------------------------- */

static void test_gguf_hostile(void)
{
	static const struct { const char *key; int kind; uint64_t v; const char *want; } cases[] = {
		{"general.architecture", 0, 0, "general.architecture"},   /* removed */
		{"llama.block_count", 0, 0, "llama.block_count"},
		{"llama.attention.head_count", 1, 0, "llama.attention.head_count"},
		{"llama.attention.head_count_kv", 1, 3, "llama.attention.head_count_kv"},
		{"llama.embedding_length", 1, 66, "llama.embedding_length"},
		{"llama.embedding_length", 2, 0, "llama.embedding_length"},   /* a string */
		{"llama.rope.freq_base", 2, 0, "llama.rope.freq_base"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		qtk_model *g = qtk_model_new();
		qtk_model_set_kv_str(g, "general.architecture", "llama");
		set_u(g, "llama.block_count", 1);
		set_u(g, "llama.embedding_length", 64);
		set_u(g, "llama.feed_forward_length", 128);
		set_u(g, "llama.attention.head_count", 4);
		set_u(g, "llama.attention.head_count_kv", 2);
		set_f(g, "llama.rope.freq_base", 10000.0f);
		if (cases[i].kind == 0)
			qtk_kv_remove(g, cases[i].key);
		else if (cases[i].kind == 1)
			for (size_t k = 0; k < g->nkv; k++) {
				if (!strcmp(g->kv[k].key, cases[i].key))
					g->kv[k].val.v.u = cases[i].v;
			}
		else {
			qtk_kv_remove(g, cases[i].key);
			qtk_model_set_kv_str(g, cases[i].key, "64");
		}
		qtk_model *hm = qtk_model_new();
		qtk_hfmap *r = NULL;
		qtk_err e;
		qtk_err_clear(&e);
		int rc = qtk_hfmap_gguf_to_hf(g, hm, &r, &e);
		CHECK(rc == QTK_E_DATA && !strcmp(e.subject, cases[i].want) && strstr(e.msg, cases[i].want),
		      "gguf case %zu: rc %d %s [%s]", i, rc, e.msg, e.subject);
		qtk_hfmap_free(r);
		qtk_close(hm);
		qtk_close(g);
	}
	qtk_model *g = qtk_model_new();
	qtk_model_set_kv_str(g, "general.architecture", "gpt2");
	qtk_model *hm = qtk_model_new();
	qtk_hfmap *r = NULL;
	qtk_err e;
	qtk_err_clear(&e);
	CHECK(qtk_hfmap_gguf_to_hf(g, hm, &r, &e) == QTK_E_DATA && !strncmp(e.msg, "unsupported architecture gpt2 (supported: llama, qwen2, ", 40) && strstr(e.msg, "phi3"),
	      "gguf arch: %s", e.msg);
	qtk_close(hm);
	qtk_close(g);
}

/* Every allocation failing in turn: an I/O error, never a crash or a leak (ASan). */
static void test_alloc_failures(void)
{
	int bad = 0, n;
	for (n = 1; n < 400; n++) {
		qtk_model *hf = qtk_model_new();
		qtk_model_add_blob(hf, "config.json", qwen_cfg, strlen(qwen_cfg));
		qtk_model_add_blob(hf, "tokenizer.json", qwen_tok, strlen(qwen_tok));
		qtk_model_add_blob(hf, "tokenizer_config.json", qwen_tc, strlen(qwen_tc));
		add_t(hf, "model.layers.0.self_attn.q_proj.weight", 64, 64, QTK_T_F16);
		qtk_model *meta = qtk_model_new();
		qtk_hfmap *m = NULL;
		qtk_err e;
		qtk_err_clear(&e);
		qtk_test_fail_alloc_at(n);
		int rc = qtk_hfmap_hf_to_gguf(hf, meta, &m, &e);
		qtk_test_fail_alloc_at(0);
		if (rc && rc != QTK_E_IO)
			bad++;
		qtk_hfmap_free(m);
		qtk_close(meta);
		qtk_close(hf);
		if (!rc)
			break;
	}
	CHECK(bad == 0, "%d allocation failures gave a non-I/O error", bad);
	CHECK(n < 400, "completes once allocations succeed");
}

/* The project's own sample generator output, when built (make samples). */
static void test_samples(void)
{
	char p[512];
	const char *bdir = getenv("QTK_BUILD");
	snprintf(p, sizeof p, "%s/samples/tiny-llama-f32.gguf", bdir && *bdir ? bdir : "build");
	if (!qtk_path_exists(p)) {
		T_SKIP("build/samples not generated");
		return;
	}
	qtk_err e;
	qtk_err_clear(&e);
	qtk_model *g = qtk_open(p, &e);
	CHECK(g != NULL, "open sample: %s", e.msg);
	if (!g)
		return;
	qtk_model *hm = qtk_model_new();
	qtk_hfmap *r = NULL;
	CHECK(qtk_hfmap_gguf_to_hf(g, hm, &r, &e) == 0, "sample gguf_to_hf: %s", e.msg);
	const qtk_blob *tb = qtk_blob_find(hm, "tokenizer.model");
	qtk_spm_model sp;
	CHECK(tb && !qtk_spm_parse(tb->data, tb->len, "s", &sp, &e), "sample tokenizer.model");
	if (tb && !e.code)
		qtk_spm_free(&sp);
	/* data round trip through the permutation for every Q/K tensor */
	int bad = 0;
	for (size_t i = 0; i < g->ntensors; i++) {
		const qtk_tensor *t = &g->tensors[i];
		int heads;
		bool inv;
		qtk_hfmap_name(r, t->name, &heads, &inv);
		if (!heads)
			continue;
		uint8_t *raw = NULL;
		if (qtk_read_part_alloc(g, t, 0, &raw)) {
			bad++;
			continue;
		}
		uint64_t rb = t->parts[0].nbytes / t->shape[0];
		uint8_t *a = malloc((size_t)t->parts[0].nbytes), *b = malloc((size_t)t->parts[0].nbytes);
		qtk_family_permute_rows(raw, a, t->shape[0], rb, heads, true);
		qtk_family_permute_rows(a, b, t->shape[0], rb, heads, false);
		bad += memcmp(b, raw, (size_t)t->parts[0].nbytes) != 0;
		free(a);
		free(b);
		qtk_free(raw);
	}
	CHECK(bad == 0, "sample Q/K permutation round trip");
	/* the view's tensors are renamed stored tensors (Q/K rows are permuted by the conversion, not
	 * by the view): each one's bytes are its stored tensor's, in the file (qtk_part_in_file, so
	 * a copy goes file to file) */
	qtk_model *v = NULL;
	CHECK(qtk_hfmap_view(r, g, g, &v, &e) == 0, "sample view: %s", e.msg);
	int in_file = 0, wrong = 0;
	for (size_t i = 0; v && i < v->ntensors; i++) {
		const qtk_tensor *t = &v->tensors[i];
		int fd;
		const char *path;
		uint64_t off;
		const bool got = qtk_part_in_file(v, t, 0, &fd, &path, &off);
		in_file += got;
		uint8_t *a = NULL, *b = got ? malloc((size_t)t->parts[0].nbytes + 1) : NULL;
		if (!got || !t->view || qtk_read_part_alloc(v, t, 0, &a) ||
		    qtk_pread_full(fd, path, b, (size_t)t->parts[0].nbytes, off, &e) ||
		    memcmp(a, b, (size_t)t->parts[0].nbytes))
			wrong++;
		qtk_free(a);
		free(b);
	}
	CHECK(v && !wrong && in_file == (int)v->ntensors, "view tensors in the file: %d of %zu, %d wrong", in_file,
	      v ? v->ntensors : 0, wrong);
	/* a part out of range, or a view of several tensors, is not in a file */
	int fd0;
	const char *p0;
	uint64_t o0;
	CHECK(v && !qtk_part_in_file(v, &v->tensors[0], 1, &fd0, &p0, &o0), "part out of range");
	qtk_close(v);
	qtk_hfmap_free(r);
	qtk_close(hm);
	qtk_close(g);
}

int main(void)
{
	qtk_json_init();
	test_permute();
	test_spm_hostile();
	test_config_hostile();
	test_roundtrip_memory();
	test_qwen2();
	test_gguf_hostile();
	test_alloc_failures();
	test_samples();
	const char *fx = t_fixtures();
	if (fx)
		test_fixture(fx);
	else
		T_SKIP("no fixtures (../shared/fixtures)");
	return T_DONE();
}
