/* fuzz_hfmap.c - the family layer's HF <-> GGUF mapping (src/family/hfmap.c): config.json,
 * tensor names and shapes, expert sets, rope scaling, and the views it builds.
 *
 * Input: config.json's text, then optionally a "#QF#tensors" section of lines
 * "NAME DIM [DIM [DIM]]" (F16 tensors with no data; at most 512 lines). The property: HF -> GGUF
 * either refuses with an error or gives a map whose view can be built (or refused) without a
 * crash; the GGUF made of that metadata and the view's names and shapes maps back to HF the
 * same way. */
#include "fuzz.h"
#include "family/hfmap.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TENSORS 512
#define MAX_ELEMS (1u << 19)  /* per source tensor: 1 MiB of F16 */
#define ZERO_BYTES (4u << 20) /* backing for every tensor that small enough (F32 copies too) */

/* Every tensor reads as zeros: a memory view of one shared buffer. */
static uint8_t zeros[ZERO_BYTES];
static qtk_view zero_view = {.kind = QTK_VIEW_MEM, .mem = zeros};

static void back_with_zeros(qtk_tensor *t)
{
	bool fits = true;
	for (int p = 0; p < t->nparts; p++)
		fits = fits && t->parts[p].nbytes <= ZERO_BYTES && t->parts[p].offset == 0;
	t->view = fits ? &zero_view : NULL;
}

static void add_tensors(qtk_model *m, const uint8_t *d, size_t n)
{
	size_t at = 0, count = 0;
	while (at < n && count < MAX_TENSORS) {
		size_t e = at;
		while (e < n && d[e] != '\n')
			e++;
		char line[512];
		size_t l = e - at < sizeof line - 1 ? e - at : sizeof line - 1;
		memcpy(line, d + at, l);
		line[l] = 0;
		at = e + 1;
		char name[300];
		unsigned long long dims[3] = {0, 0, 0};
		int k = sscanf(line, "%299s %llu %llu %llu", name, &dims[0], &dims[1], &dims[2]);
		if (k < 2)
			continue;
		qtk_tensor *t = qtk_model_add_tensor(m, name);
		if (!t)
			return;
		t->ndim = k - 1;
		uint64_t elems = 1;
		bool ok = true;
		for (int i = 0; i < t->ndim; i++) {
			t->shape[i] = dims[i] ? dims[i] : 1;
			ok = ok && qtk_mul_u64(elems, t->shape[i], &elems) && elems <= MAX_ELEMS;
		}
		if (!ok)
			t->ndim = 1, t->shape[0] = 1, elems = 1;
		t->layout.kind = QTK_LAYOUT_PLAIN;
		t->layout.type = QTK_T_F16;
		t->nparts = 1;
		t->parts[0].type = QTK_T_F16;
		t->parts[0].ndim = t->ndim;
		memcpy(t->parts[0].shape, t->shape, sizeof t->shape);
		t->parts[0].nbytes = elems * 2;
		qtk_tensor_finish(t);
		back_with_zeros(t);
		count++;
	}
}

/* The view of map over src, built and dropped; 0 when it was made. */
static int try_view(qtk_hfmap *map, qtk_model *src, const qtk_model *meta, qtk_model **keep)
{
	qtk_err e;
	qtk_err_clear(&e);
	qtk_model *v = NULL;
	int rc = qtk_hfmap_view(map, src, meta, &v, &e);
	fz_check_rc(rc, &e, "qtk_hfmap_view");
	if (!rc && keep)
		*keep = v;
	else
		qtk_close(v);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_init();
	static const char mark[] = "\n#QF#tensors\n";
	size_t cfg_len = size, tens_at = size;
	for (size_t i = 0; i + sizeof mark - 1 <= size; i++)
		if (!memcmp(data + i, mark, sizeof mark - 1)) {
			cfg_len = i;
			tens_at = i + sizeof mark - 1;
			break;
		}
	qtk_model *hf = qtk_model_new();
	if (!hf)
		return 0;
	hf->path = qtk_strdup("fuzz-model");
	qtk_model_add_blob(hf, "config.json", data, cfg_len);
	add_tensors(hf, data + tens_at, size - tens_at);
	qtk_model *meta = qtk_model_new();
	qtk_hfmap *map = NULL;
	qtk_err e;
	qtk_err_clear(&e);
	int rc = qtk_hfmap_hf_to_gguf(hf, meta, &map, &e);
	fz_check_rc(rc, &e, "qtk_hfmap_hf_to_gguf");
	qtk_model *view = NULL;
	if (!rc && !try_view(map, hf, meta, &view)) {
		/* the GGUF this would write: the metadata, the view's names and shapes */
		qtk_model *g = qtk_model_new();
		for (size_t i = 0; g && i < meta->nkv; i++) {
			qtk_kv *kv = qtk_model_add_kv(g, meta->kv[i].key);
			if (kv && qtk_value_copy(&kv->val, &meta->kv[i].val))
				break;
		}
		for (size_t i = 0; g && i < view->ntensors; i++) {
			qtk_tensor *t = qtk_model_add_tensor(g, view->tensors[i].name);
			if (!t)
				break;
			char *nm = t->name;
			qtk_tensor_copy(t, &view->tensors[i]);
			t->name = nm;
			for (int p = 0; p < t->nparts; p++)
				t->parts[p].offset = 0;
			back_with_zeros(t);
		}
		qtk_model *hmeta = qtk_model_new();
		qtk_hfmap *back = NULL;
		qtk_err_clear(&e);
		if (g && hmeta) {
			int r2 = qtk_hfmap_gguf_to_hf(g, hmeta, &back, &e);
			fz_check_rc(r2, &e, "qtk_hfmap_gguf_to_hf");
			if (!r2)
				try_view(back, g, g, NULL);
		}
		qtk_hfmap_free(back);
		qtk_close(hmeta);
		qtk_close(g);
	}
	qtk_close(view);
	qtk_hfmap_free(map);
	qtk_close(meta);
	qtk_close(hf);
	return 0;
}
