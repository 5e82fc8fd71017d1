/* hfmap.c - Hugging Face <-> GGUF mapping driven by a family descriptor (family.h).
 *
 * Facts from llama.cpp's convert_hf_to_gguf.py (Model.set_gguf_parameters,
 * _create_vocab_sentencepiece, gguf-py SpecialVocab): the keys, their types and their
 * order; which tensors are written as F32. What differs between families (names, keys,
 * the Q/K permutation, the tokenizer) comes from the descriptor. The code is our own.
 */
#include "family/hfmap.h"
#include "family/spm.h"
#include "dequant.h"
#include "json.h"
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct hent {
	char *out;      /* output name, NULL when unmapped */
	int heads;      /* > 0: permute rows */
	bool drop;      /* llama.cpp does not write it */
	unsigned otype; /* output storage type for plain float tensors */
	bool expert;    /* HF -> GGUF: one expert's matrix, a piece of the stacked tensor out */
	uint32_t ei;    /* ... its expert number */
	unsigned char rflags; /* QTK_RULE_* of the name rule */
	bool scalar1;   /* a 0-D scalar written as [1] */
	bool scalar0;   /* a [1] written as a 0-D scalar */
	size_t join;    /* GGUF -> HF: 1 + the index of this NVFP4 weight's `.scale`, 0 when none */
} hent;

/* One output tensor of the view (qtk_hfmap_view). */
typedef struct vent {
	char *name;
	qtk_hfmap_out info;
	int kind;            /* QTK_VIEW_* */
	size_t src;          /* SLICE: the source tensor; STACK: first index into pieces */
	uint32_t n, index;   /* STACK: pieces; SLICE: slices and which */
	uint8_t *mem;        /* MEM: the bytes */
	unsigned mem_type;   /* MEM: F32 */
	int ndim;
	uint64_t shape[QTK_MAX_DIMS];
	bool scalar1;        /* SLICE: a 0-D scalar seen as [1] */
	bool scalar0;        /* SLICE: a [1] seen as a 0-D scalar */
} vent;

struct qtk_hfmap {
	bool to_gguf;
	const qtk_family *fam;
	size_t n;
	char **src;     /* source names */
	hent *e;
	size_t nout;
	char warn[256];
	uint32_t n_expert;       /* experts per MoE block (0: dense) */
	/* HF -> GGUF: tensors llama.cpp's converter generates (rope_freqs, rope_factors_long/short),
	 * F32, written before the checkpoint's own */
	struct {
		const char *name;
		float *v;
		uint32_t n;
	} gen[4];
	size_t ngen;
	/* the view: its entries while it is made, then what the converter asks of it */
	vent *v;
	size_t nv, capv;
	qtk_hfmap_out *vout;     /* nv entries, once the view is made (v is freed then) */
	uint8_t **vmem;          /* the MEM tensors' bytes the view reads, nvmem of them */
	size_t nvmem;
	size_t *pieces;          /* stacks' source tensors */
	size_t npieces;
	qtk_view *views;
	const qtk_tensor **pptr;
};

/* "<dir>/<name>" for error messages (name alone when the model has no path). */
static const char *side_path(const qtk_model *m, const char *name, char *buf, size_t cap)
{
	if (!m || !m->path || !m->path[0])
		return name;
	size_t l = strlen(m->path);
	snprintf(buf, cap, "%s%s%s", m->path, m->path[l - 1] == '/' ? "" : "/", name);
	return buf;
}

static int oom(qtk_err *err) { return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory"); }

static bool starts_with(const char *s, const char *pre) { return strncmp(s, pre, strlen(pre)) == 0; }

void qtk_hfmap_free(qtk_hfmap *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		if (m->src)
			qtk_free(m->src[i]);
		if (m->e)
			qtk_free(m->e[i].out);
	}
	qtk_free(m->src);
	qtk_free(m->e);
	for (size_t i = 0; i < m->ngen; i++)
		qtk_free(m->gen[i].v);
	for (size_t i = 0; m->v && i < m->nv; i++) {
		qtk_free(m->v[i].name);
		qtk_free(m->v[i].mem);
	}
	qtk_free(m->v);
	for (size_t i = 0; i < m->nvmem; i++)
		qtk_free(m->vmem[i]);
	qtk_free(m->vmem);
	qtk_free(m->vout);
	qtk_free(m->pieces);
	qtk_free(m->views);
	qtk_free(m->pptr);
	qtk_free(m);
}

const char *qtk_hfmap_warning(const qtk_hfmap *m) { return m && m->warn[0] ? m->warn : NULL; }

static qtk_hfmap *map_new(const qtk_model *src, bool to_gguf)
{
	qtk_hfmap *m = qtk_calloc(1, sizeof *m);
	if (!m)
		return NULL;
	m->to_gguf = to_gguf;
	m->n = src->ntensors;
	m->src = qtk_calloc(m->n ? m->n : 1, sizeof *m->src);
	m->e = qtk_calloc(m->n ? m->n : 1, sizeof *m->e);
	if (!m->src || !m->e) {
		qtk_hfmap_free(m);
		return NULL;
	}
	for (size_t i = 0; i < m->n; i++)
		if (!(m->src[i] = qtk_strdup(src->tensors[i].name))) {
			qtk_hfmap_free(m);
			return NULL;
		}
	return m;
}

const char *qtk_hfmap_name(const qtk_hfmap *m, const char *src_name, int *heads, bool *inverse)
{
	if (heads)
		*heads = 0;
	if (inverse)
		*inverse = m ? !m->to_gguf : false;
	if (!m || !src_name)
		return NULL;
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->src[i], src_name) == 0) {
			if (heads)
				*heads = m->e[i].heads;
			return m->e[i].out;
		}
	return NULL;
}

size_t qtk_hfmap_count(const qtk_hfmap *m) { return m ? m->nout : 0; }

size_t qtk_hfmap_order(const qtk_hfmap *m, const qtk_model *src, size_t *order)
{
	size_t k = 0;
	if (!m || !src)
		return 0;
	for (size_t i = 0; i < src->ntensors && i < m->n; i++)
		if (!m->e[i].drop)
			order[k++] = i;
	return k;
}

static bool sorted_before(const qtk_model *src, size_t a, size_t b)
{
	const qtk_tensor *x = &src->tensors[a], *y = &src->tensors[b];
	uint32_t fx = x->nparts ? x->parts[0].file : 0, fy = y->nparts ? y->parts[0].file : 0;
	if (fx != fy)
		return fx < fy;
	int c = strcmp(x->name, y->name);
	return c ? c < 0 : a < b;
}

size_t qtk_hfmap_order_sorted(const qtk_hfmap *m, const qtk_model *src, size_t *order)
{
	size_t n = qtk_hfmap_order(m, src, order);
	size_t *tmp = n > 1 ? qtk_malloc(n * sizeof *tmp) : NULL;
	if (tmp) { /* bottom-up merge sort (stable) */
		size_t *a = order, *b = tmp;
		for (size_t w = 1; w < n; w *= 2) {
			for (size_t lo = 0; lo < n; lo += 2 * w) {
				size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
				size_t i = lo, j = mid, k = lo;
				while (i < mid && j < hi)
					b[k++] = sorted_before(src, a[j], a[i]) ? a[j++] : a[i++];
				while (i < mid)
					b[k++] = a[i++];
				while (j < hi)
					b[k++] = a[j++];
			}
			size_t *t = a;
			a = b;
			b = t;
		}
		if (a != order)
			memcpy(order, a, n * sizeof *order);
		qtk_free(tmp);
		return n;
	}
	/* no memory for the merge: insertion sort in place */
	for (size_t i = 1; i < n; i++) {
		size_t v = order[i], lo = 0, hi = i;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (sorted_before(src, v, order[mid]))
				hi = mid;
			else
				lo = mid + 1;
		}
		memmove(order + lo + 1, order + lo, (i - lo) * sizeof *order);
		order[lo] = v;
	}
	return n;
}

unsigned qtk_hfmap_out_type(const qtk_hfmap *m, const qtk_tensor *t)
{
	unsigned ty = t->layout.kind == QTK_LAYOUT_PLAIN ? t->layout.type : QTK_T_MAX;
	if (!m || t->layout.kind != QTK_LAYOUT_PLAIN)
		return ty;
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->src[i], t->name) == 0)
			return m->e[i].otype;
	return ty;
}

/* ---- the output as a view of the source ------------------------------------------------- */

static vent *vadd(qtk_hfmap *m, const char *name, qtk_err *err)
{
	if (m->nv == m->capv) {
		size_t nc = m->capv ? 2 * m->capv : 64;
		vent *nv = qtk_realloc(m->v, nc * sizeof *nv);
		if (!nv) {
			oom(err);
			return NULL;
		}
		m->v = nv;
		m->capv = nc;
	}
	vent *v = &m->v[m->nv];
	memset(v, 0, sizeof *v);
	if (!(v->name = qtk_strdup(name))) {
		oom(err);
		return NULL;
	}
	m->nv++;
	return v;
}

static float rd_float(const uint8_t *p, unsigned ty)
{
	if (ty == QTK_T_F16)
		return qtk_fp16_to_f32(qtk_rd16(p));
	if (ty == QTK_T_BF16)
		return qtk_bf16_to_f32(qtk_rd16(p));
	uint32_t u = qtk_rd32(p);
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* A 1-D float tensor's values plus (HF -> GGUF: 1 + w rounded to the source's type, as the
 * converter adds in the checkpoint's dtype) or minus one (GGUF -> HF), as F32 bytes. */
static int shifted_norm(qtk_model *src, const qtk_tensor *t, bool plus, vent *v, qtk_err *err)
{
	unsigned ty = t->layout.type;
	size_t es = ty == QTK_T_F32 ? 4 : 2;
	if (t->layout.kind != QTK_LAYOUT_PLAIN || (ty != QTK_T_F32 && ty != QTK_T_F16 && ty != QTK_T_BF16) ||
	    t->nparts != 1 || t->parts[0].nbytes != t->n_params * es)
		return qtk_err_set(err, QTK_E_DATA, src->path, -1, t->name, "a norm weight must be F32, F16 or BF16");
	uint8_t *raw;
	if (qtk_read_part_alloc(src, t, 0, &raw)) {
		*err = src->err;
		return err->code;
	}
	if (!(v->mem = qtk_malloc(t->n_params * 4 + 1))) {
		qtk_free(raw);
		return oom(err);
	}
	for (uint64_t i = 0; i < t->n_params; i++) {
		float x = rd_float(raw + i * es, ty), y;
		if (!plus)
			y = x - 1.0f;
		else if (ty == QTK_T_F16)
			y = qtk_fp16_to_f32(qtk_f32_to_fp16(x + 1.0f));
		else if (ty == QTK_T_BF16)
			y = qtk_bf16_to_f32(qtk_f32_to_bf16(x + 1.0f));
		else
			y = x + 1.0f;
		uint32_t u;
		memcpy(&u, &y, 4);
		qtk_wr32(v->mem + 4 * i, u);
	}
	qtk_free(raw);
	v->kind = QTK_VIEW_MEM;
	v->mem_type = QTK_T_F32;
	v->ndim = t->ndim;
	memcpy(v->shape, t->shape, sizeof v->shape);
	v->info.otype = QTK_T_F32;
	return 0;
}

/* The expert entries grouped by the stack they go into (their output name), in one pass:
 * next[i] is the next entry of i's stack (SIZE_MAX: none), head[i] its first. Entries that are
 * not experts get SIZE_MAX in both. */
static int expert_groups(const qtk_hfmap *m, size_t **nextp, size_t **headp, qtk_err *err)
{
	size_t *next = qtk_malloc((m->n ? m->n : 1) * sizeof *next), *head = qtk_malloc((m->n ? m->n : 1) * sizeof *head);
	size_t *tail = qtk_malloc((m->n ? m->n : 1) * sizeof *tail);
	qtk_strmap first = {0};
	int rc = next && head && tail ? 0 : oom(err);
	for (size_t i = 0; i < m->n && !rc; i++) {
		next[i] = head[i] = SIZE_MAX;
		if (!m->e[i].expert || !m->e[i].out)
			continue;
		size_t h;
		int added = qtk_strmap_put(&first, m->e[i].out, i, &h);
		if (added < 0) {
			rc = oom(err);
		} else if (added) {
			head[i] = tail[i] = i;
		} else {
			head[i] = h;
			next[tail[h]] = i;
			tail[h] = i;
		}
	}
	qtk_strmap_free(&first);
	qtk_free(tail);
	if (rc) {
		qtk_free(next);
		qtk_free(head);
		return rc;
	}
	*nextp = next;
	*headp = head;
	return 0;
}

static int add_piece(qtk_hfmap *m, size_t i, qtk_err *err)
{
	size_t *np = qtk_realloc(m->pieces, (m->npieces + 1) * sizeof *np);
	if (!np)
		return oom(err);
	m->pieces = np;
	m->pieces[m->npieces++] = i;
	return 0;
}

/* A quantized layer's activation scale (ModelOpt's `PREFIX.input_scale`, F32 []) goes where
 * llama.cpp's converter puts it: `<GGUF name of PREFIX.weight minus .weight>.input_scale`,
 * F32 [1] (the view gives the scalar that one dimension; GGUF has no 0-D tensors). */
static int map_input_scale(const qtk_family *f, const qtk_tensor *t, bool to_gguf, hent *e, int *kind, qtk_err *err)
{
	size_t l = strlen(t->name);
	char wn[512], nb[512];
	if (l < 12 || l > 400 || strcmp(t->name + l - 12, ".input_scale") || t->layout.kind != QTK_LAYOUT_PLAIN ||
	    t->layout.type != QTK_T_F32 || t->n_params != 1 || t->ndim > 1)
		return 0;
	snprintf(wn, sizeof wn, "%.*s.weight", (int)(l - 12), t->name);
	if (qtk_family_map_name(f, wn, to_gguf, nb, sizeof nb, kind) != 1 || !qtk_str_ends(nb, ".weight"))
		return 0;
	*kind = 0; /* a scalar: nothing to permute */
	size_t nl = strlen(nb) - 7;
	if (!(e->out = qtk_malloc(nl + 13)))
		return oom(err);
	memcpy(e->out, nb, nl);
	memcpy(e->out + nl, ".input_scale", 13);
	e->scalar1 = to_gguf;  /* GGUF: [1]; back in HF: [] as ModelOpt stores it */
	e->scalar0 = !to_gguf;
	return 0;
}

static int build_entries_in(qtk_hfmap *m, qtk_model *src, qtk_err *err, size_t **gn, size_t **gh)
{
	const qtk_family *f = m->fam;
	vent *v;
	for (size_t g = 0; m->to_gguf && g < m->ngen; g++) {
		if (!(v = vadd(m, m->gen[g].name, err)))
			return err->code;
		if (!(v->mem = qtk_malloc((size_t)m->gen[g].n * 4 + 1)))
			return oom(err);
		for (uint32_t i = 0; i < m->gen[g].n; i++) {
			uint32_t u;
			memcpy(&u, &m->gen[g].v[i], 4);
			qtk_wr32(v->mem + 4 * i, u);
		}
		v->kind = QTK_VIEW_MEM;
		v->mem_type = QTK_T_F32;
		v->ndim = 1;
		v->shape[0] = m->gen[g].n;
		v->info.otype = QTK_T_F32;
	}
	for (size_t i = 0; i < m->n && i < src->ntensors; i++) {
		const hent *e = &m->e[i];
		const qtk_tensor *t = &src->tensors[i];
		if (e->drop)
			continue;
		const char *name = e->out ? e->out : t->name;
		if (e->expert && m->to_gguf) {
			if (!*gn && expert_groups(m, gn, gh, err))
				return err->code;
			const size_t *gnext = *gn, *ghead = *gh;
			/* the stack goes where its last expert is */
			if (gnext[i] != SIZE_MAX)
				continue;
			if (!(v = vadd(m, name, err)))
				return err->code;
			v->kind = QTK_VIEW_STACK;
			v->src = m->npieces;
			v->n = m->n_expert;
			/* expert k's entry (the first of the stack with that index), in expert order */
			size_t *slot = qtk_malloc((m->n_expert ? m->n_expert : 1) * sizeof *slot);
			if (!slot)
				return oom(err);
			for (uint32_t k = 0; k < m->n_expert; k++)
				slot[k] = SIZE_MAX;
			for (size_t j = ghead[i]; j != SIZE_MAX; j = gnext[j])
				if (m->e[j].ei < m->n_expert && slot[m->e[j].ei] == SIZE_MAX)
					slot[m->e[j].ei] = j;
			for (uint32_t k = 0; k < m->n_expert; k++)
				if (slot[k] != SIZE_MAX && add_piece(m, slot[k], err)) {
					qtk_free(slot);
					return err->code;
				}
			qtk_free(slot);
			if (m->npieces - v->src != m->n_expert)
				return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, name, "experts missing from a stack");
			v->info.otype = e->otype;
			continue;
		}
		if (e->expert) { /* GGUF -> HF: one tensor per expert */
			uint64_t ne = t->ndim == 3 ? t->shape[0] : 0;
			if (!ne || ne > 65536 || ne != m->n_expert)
				return qtk_err_set(err, QTK_E_DATA, src->path, -1, t->name,
						   "%llu experts in a 3-D tensor, but expert_count is %u",
						   (unsigned long long)ne, m->n_expert);
			for (uint32_t k = 0; k < (uint32_t)ne; k++) {
				char hn[512];
				if (qtk_family_expert_to_hf(f, t->name, k, hn, sizeof hn) != 1)
					return qtk_err_set(err, QTK_E_DATA, src->path, -1, t->name, "tensor name too long");
				if (!(v = vadd(m, hn, err)))
					return err->code;
				v->kind = QTK_VIEW_SLICE;
				v->src = i;
				v->n = (uint32_t)ne;
				v->index = k;
				v->info.otype = e->otype;
				v->info.inverse = true;
			}
			continue;
		}
		if (!(v = vadd(m, name, err)))
			return err->code;
		if (e->join && !m->to_gguf) { /* NVFP4 blocks and their .scale: one layer */
			const qtk_tensor *sc = &src->tensors[e->join - 1];
			uint8_t *b = NULL;
			if (qtk_read_part_alloc(src, sc, 0, &b)) {
				*err = src->err;
				return err->code ? err->code : QTK_E_IO;
			}
			float x = rd_float(b, QTK_T_F32);
			qtk_free(b);
			if (!isfinite(x))
				return qtk_err_set(err, QTK_E_DATA, src->path, -1, sc->name,
						   "the per-tensor scale is not a finite number");
			v->kind = QTK_VIEW_JOIN;
			v->src = m->npieces;
			v->n = 2;
			if (add_piece(m, i, err) || add_piece(m, e->join - 1, err))
				return err->code;
			v->info.heads = e->heads;
			v->info.inverse = true;
			v->info.otype = QTK_T_MAX;
			continue;
		}
		if (e->rflags & QTK_RULE_PLUS1) {
			int rc = shifted_norm(src, t, m->to_gguf, v, err);
			if (rc)
				return rc;
			if (!m->to_gguf)
				v->info.otype = e->otype;
			continue;
		}
		v->kind = QTK_VIEW_SLICE;
		v->src = i;
		v->n = 1;
		v->info.heads = e->heads;
		v->info.inverse = !m->to_gguf;
		v->info.otype = e->otype;
		v->info.force_f32 = m->to_gguf && (e->rflags & QTK_RULE_F32);
		v->info.copy = true;
		v->info.unmapped = !e->out;
		v->scalar1 = e->scalar1 && t->ndim == 0;
		v->scalar0 = e->scalar0 && t->ndim == 1 && t->shape[0] == 1;
	}
	return 0;
}

static int build_entries(qtk_hfmap *m, qtk_model *src, qtk_err *err)
{
	size_t *gnext = NULL, *ghead = NULL;
	int rc = build_entries_in(m, src, err, &gnext, &ghead);
	qtk_free(gnext);
	qtk_free(ghead);
	return rc;
}

/* The tensor of view entry v. */
static int view_tensor(qtk_hfmap *m, qtk_model *src, const vent *v, qtk_view *vw, qtk_tensor *t, qtk_err *err)
{
	char *name = t->name;
	vw->kind = (qtk_view_kind)v->kind;
	vw->m = src;
	if (v->kind == QTK_VIEW_MEM) {
		qtk_tensor o = QTK_TENSOR_LOCAL;
		o.ndim = v->ndim;
		memcpy(o.shape, v->shape, sizeof o.shape);
		o.layout.kind = QTK_LAYOUT_PLAIN;
		o.layout.type = QTK_T_F32;
		o.layout.bits = (uint8_t)qtk_type(QTK_T_F32)->code_bits;
		o.nparts = 1;
		o.parts[0].type = QTK_T_F32;
		o.parts[0].ndim = v->ndim;
		memcpy(o.parts[0].shape, v->shape, sizeof o.shape);
		qtk_tensor_finish(&o);
		o.parts[0].nbytes = o.n_params * 4;
		if (qtk_tensor_copy(t, &o))
			return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, name, "parts do not fit the view's room");
		vw->mem = v->mem;
	} else if (v->kind == QTK_VIEW_JOIN) {
		const qtk_tensor *w = &src->tensors[m->pieces[v->src]], *sc = &src->tensors[m->pieces[v->src + 1]];
		qtk_tensor o = QTK_TENSOR_LOCAL;
		o.ndim = 2;
		o.shape[0] = w->shape[0];
		o.shape[1] = w->shape[1];
		o.layout = (qtk_layout){.kind = QTK_LAYOUT_NVFP4, .type = QTK_DT_U8, .bits = 4, .sym = true,
					.group_size = 16, .scale_type = 2};
		o.nparts = 2;
		o.parts[0] = w->parts[0];
		o.parts[1] = sc->parts[0];
		snprintf(o.parts[0].role, sizeof o.parts[0].role, "weight");
		snprintf(o.parts[1].role, sizeof o.parts[1].role, "scale");
		o.parts[0].offset = o.parts[1].offset = 0;
		if (qtk_tensor_copy(t, &o))
			return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, name, "parts do not fit the view's room");
		qtk_tensor_finish(t);
		for (uint32_t k = 0; k < 2; k++)
			m->pptr[v->src + k] = &src->tensors[m->pieces[v->src + k]];
		vw->pieces = m->pptr + v->src;
		vw->n = 2;
	} else if (v->kind == QTK_VIEW_STACK) {
		const qtk_tensor *p0 = &src->tensors[m->pieces[v->src]];
		if (qtk_tensor_copy(t, p0))
			return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, name, "parts do not fit the view's room");
		if (p0->ndim + 1 > QTK_MAX_DIMS)
			return qtk_err_set(err, QTK_E_DATA, src->path, -1, p0->name, "too many dimensions to stack");
		memmove(t->shape + 1, p0->shape, (size_t)p0->ndim * sizeof *t->shape);
		t->shape[0] = v->n;
		t->ndim = p0->ndim + 1;
		for (int p = 0; p < t->nparts; p++) {
			qtk_part *q = &t->parts[p];
			if (q->ndim + 1 > QTK_MAX_DIMS || !qtk_mul_u64(q->nbytes, v->n, &q->nbytes))
				return qtk_err_set(err, QTK_E_DATA, src->path, -1, p0->name, "stack too large");
			memmove(q->shape + 1, q->shape, (size_t)q->ndim * sizeof *q->shape);
			q->shape[0] = v->n;
			q->ndim++;
			q->offset = 0;
		}
		for (uint32_t k = 0; k < v->n; k++)
			m->pptr[v->src + k] = &src->tensors[m->pieces[v->src + k]];
		vw->pieces = m->pptr + v->src;
		vw->n = v->n;
	} else {
		const qtk_tensor *s0 = &src->tensors[v->src];
		if (qtk_tensor_copy(t, s0))
			return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, name, "parts do not fit the view's room");
		if (v->n > 1) {
			if (s0->ndim < 2 || s0->shape[0] != v->n)
				return qtk_err_set(err, QTK_E_DATA, src->path, -1, s0->name, "cannot split along experts");
			memmove(t->shape, s0->shape + 1, (size_t)(s0->ndim - 1) * sizeof *t->shape);
			t->shape[s0->ndim - 1] = 0;
			t->ndim = s0->ndim - 1;
			for (int p = 0; p < t->nparts; p++) {
				qtk_part *q = &t->parts[p];
				if (q->ndim < 2 || q->shape[0] != v->n || q->nbytes % v->n)
					return qtk_err_set(err, QTK_E_DATA, src->path, -1, s0->name,
							   "part %d cannot be split along experts", p);
				memmove(q->shape, q->shape + 1, (size_t)(q->ndim - 1) * sizeof *q->shape);
				q->shape[q->ndim - 1] = 0;
				q->ndim--;
				q->nbytes /= v->n;
			}
		}
		if (v->scalar1 && t->ndim == 0 && t->nparts == 1) {
			t->ndim = t->parts[0].ndim = 1;
			t->shape[0] = t->parts[0].shape[0] = 1;
		}
		if (v->scalar0 && t->ndim == 1 && t->shape[0] == 1 && t->nparts == 1) {
			t->ndim = t->parts[0].ndim = 0;
			t->shape[0] = t->parts[0].shape[0] = 0;
		}
		m->pptr[m->npieces + (size_t)(v - m->v)] = s0;
		vw->pieces = m->pptr + m->npieces + (size_t)(v - m->v);
		vw->n = v->n;
		vw->index = v->index;
	}
	t->name = name;
	t->view = vw;
	qtk_tensor_finish(t);
	return 0;
}

/* Once the view is made its tensors hold the names, shapes and parts: of the entries only what
 * the converter asks (qtk_hfmap_view_out) and the MEM bytes the view reads stay, ~200 bytes a
 * tensor less. */
static int shed_entries(qtk_hfmap *m)
{
	size_t nmem = 0;
	for (size_t k = 0; k < m->nv; k++)
		nmem += m->v[k].mem != NULL;
	m->vout = qtk_calloc(m->nv ? m->nv : 1, sizeof *m->vout);
	m->vmem = qtk_calloc(nmem ? nmem : 1, sizeof *m->vmem);
	if (!m->vout || !m->vmem)
		return QTK_E_IO;
	for (size_t k = 0; k < m->nv; k++) {
		m->vout[k] = m->v[k].info;
		if (m->v[k].mem)
			m->vmem[m->nvmem++] = m->v[k].mem;
		qtk_free(m->v[k].name);
	}
	qtk_free(m->v);
	m->v = NULL;
	m->capv = 0;
	return 0;
}

int qtk_hfmap_view(qtk_hfmap *m, qtk_model *src, const qtk_model *meta, qtk_model **viewp, qtk_err *err)
{
	*viewp = NULL;
	if (m->nv || m->views)
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, NULL, "the view was already made");
	int rc = build_entries(m, src, err);
	if (rc)
		return rc;
	m->views = qtk_calloc(m->nv ? m->nv : 1, sizeof *m->views);
	m->pptr = qtk_calloc(m->npieces + m->nv + 1, sizeof *m->pptr);
	qtk_model *vm = qtk_model_new();
	if (!m->views || !m->pptr || !vm || (src->path && !(vm->path = qtk_strdup(src->path)))) {
		qtk_close(vm);
		return oom(err);
	}
	if (qtk_model_reserve_tensors(vm, m->nv)) {
		qtk_close(vm);
		return oom(err);
	}
	for (size_t k = 0; k < m->nv && !rc; k++) {
		const vent *v = &m->v[k];
		int room = v->kind == QTK_VIEW_MEM	  ? 1
			   : v->kind == QTK_VIEW_JOIN	  ? 2
			   : v->kind == QTK_VIEW_STACK ? src->tensors[m->pieces[v->src]].nparts
						       : src->tensors[v->src].nparts;
		qtk_tensor *t = qtk_model_add_tensor_room(vm, v->name, room);
		rc = t ? view_tensor(m, src, &m->v[k], &m->views[k], t, err) : oom(err);
	}
	for (size_t i = 0; meta && i < meta->nkv && !rc; i++) {
		qtk_kv *kv = qtk_model_add_kv(vm, meta->kv[i].key);
		if (!kv || qtk_value_copy(&kv->val, &meta->kv[i].val))
			rc = oom(err);
	}
	if (!rc && shed_entries(m))
		rc = oom(err);
	if (rc) {
		qtk_close(vm);
		return rc;
	}
	*viewp = vm;
	return 0;
}

const qtk_hfmap_out *qtk_hfmap_view_out(const qtk_hfmap *m, size_t k) { return k < m->nv ? &m->vout[k] : NULL; }

bool qtk_hfmap_restructured(const qtk_model *g)
{
	if (!qtk_kv_find(g, "general.architecture"))
		return false;
	for (size_t i = 0; i < g->ntensors; i++) {
		const char *n = g->tensors[i].name;
		if (qtk_str_ends(n, "_exps.weight") || !strcmp(n, "rope_freqs.weight") || !strncmp(n, "rope_factors_", 13))
			return true;
		size_t l = strlen(n);
		char wn[512];
		if (l > 6 && l < 400 && qtk_str_ends(n, ".scale") &&
		    (snprintf(wn, sizeof wn, "%.*s.weight", (int)(l - 6), n), qtk_tensor_find(g, wn)))
			return true; /* an NVFP4 weight and its .scale: one layer (qtk_hfmap_gguf_to_hf) */
	}
	return false;
}

qtk_model *qtk_hfmap_hf_shaped(qtk_model *g, qtk_hfmap **map, qtk_err *err)
{
	qtk_model *meta = qtk_model_new(), *v = NULL;
	*map = NULL;
	if (!meta) {
		oom(err);
		return NULL;
	}
	int rc = qtk_hfmap_gguf_to_hf(g, meta, map, err);
	qtk_close(meta);
	if (!rc)
		rc = qtk_hfmap_view(*map, g, g, &v, err);
	if (rc) {
		qtk_hfmap_free(*map);
		*map = NULL;
		return NULL;
	}
	for (size_t i = 0; i < v->ntensors; i++) {
		const char *stored = qtk_tensor_stored_name(&v->tensors[i]);
		if (stored != v->tensors[i].name) {
			char *n = qtk_strdup(stored);
			if (!n) {
				qtk_close(v);
				qtk_hfmap_free(*map);
				*map = NULL;
				oom(err);
				return NULL;
			}
			qtk_free(v->tensors[i].name);
			v->tensors[i].name = n;
		}
	}
	qtk_model_reindex(v);
	return v;
}

/* ---- metadata values ------------------------------------------------------- */

static qtk_kv *kv_add(qtk_model *meta, const char *key, uint8_t type)
{
	qtk_kv *kv = qtk_model_add_kv(meta, key);
	if (kv)
		kv->val.type = type;
	return kv;
}

static int kv_u32(qtk_model *meta, const char *key, uint64_t v)
{
	qtk_kv *kv = kv_add(meta, key, QTK_V_U32);
	if (!kv)
		return QTK_E_IO;
	kv->val.v.u = v;
	return 0;
}

static int kv_f32(qtk_model *meta, const char *key, double v)
{
	qtk_kv *kv = kv_add(meta, key, QTK_V_F32);
	if (!kv)
		return QTK_E_IO;
	kv->val.v.f = (double)(float)v;
	return 0;
}

static int kv_bool(qtk_model *meta, const char *key, bool v)
{
	qtk_kv *kv = kv_add(meta, key, QTK_V_BOOL);
	if (!kv)
		return QTK_E_IO;
	kv->val.v.u = v;
	return 0;
}

static int kv_strn(qtk_model *meta, const char *key, const char *s, size_t n)
{
	qtk_kv *kv = kv_add(meta, key, QTK_V_STR);
	if (!kv)
		return QTK_E_IO;
	kv->val.v.str.s = qtk_strndup(s, n);
	kv->val.v.str.len = n;
	return kv->val.v.str.s ? 0 : QTK_E_IO;
}

static int kv_str(qtk_model *meta, const char *key, const char *s) { return kv_strn(meta, key, s, strlen(s)); }

/* Takes ownership of arr (freed on failure). */
static int kv_arr(qtk_model *meta, const char *key, uint8_t elem, void *arr, uint64_t n)
{
	qtk_kv *kv = kv_add(meta, key, QTK_V_ARR);
	if (!kv) {
		qtk_value v = {.type = QTK_V_ARR, .elem = elem, .n = n, .arr = arr};
		qtk_value_free(&v);
		return QTK_E_IO;
	}
	kv->val.elem = elem;
	kv->val.n = n;
	kv->val.arr = arr;
	return 0;
}

int qtk_hfmap_set_file_type(qtk_model *meta, uint32_t ftype)
{
	for (size_t i = 0; i < meta->nkv; i++)
		if (strcmp(meta->kv[i].key, "general.file_type") == 0) {
			qtk_value_free(&meta->kv[i].val);
			meta->kv[i].val.type = QTK_V_U32;
			meta->kv[i].val.v.u = ftype;
			return 0;
		}
	return kv_u32(meta, "general.file_type", ftype);
}

static bool val_num(const qtk_value *v, double *out)
{
	int64_t i;
	if (v->type == QTK_V_F32 || v->type == QTK_V_F64) {
		*out = v->v.f;
		return true;
	}
	if (qtk_value_as_i64(v, &i)) {
		*out = (double)i;
		return true;
	}
	return false;
}

/* The supported architectures, comma separated: config.json names (hf) or GGUF ones. */
static void supported(char *buf, size_t n, bool hf)
{
	size_t at = 0;
	buf[0] = 0;
	for (size_t i = 0; i < qtk_family_count(); i++) {
		const qtk_family *f = qtk_family_at(i);
		for (size_t k = 0; hf ? f->hf_archs && f->hf_archs[k] : k < 1; k++) {
			const char *a = hf ? f->hf_archs[k] : f->gguf_arch;
			bool dup = false; /* a GGUF name written by several families: once */
			for (size_t j = 0; !hf && a && j < i && !dup; j++)
				dup = qtk_family_at(j)->gguf_arch && !strcmp(qtk_family_at(j)->gguf_arch, a);
			if (!a || dup)
				continue;
			int w = snprintf(buf + at, n - at, "%s%s", at ? ", " : "", a);
			if (w < 0 || (size_t)w >= n - at)
				return;
			at += (size_t)w;
		}
	}
}

/* ---- config.json -------------------------------------------------------------- */

typedef struct cfg {
	const cJSON *root;
	qtk_err *err;
	const char *file;
} cfg;

static const cJSON *cfg_get(const cfg *c, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, key);
	return v && !cJSON_IsNull(v) ? v : NULL;
}

static int cfg_bad(const cfg *c, const char *key, const char *what)
{
	return qtk_err_set(c->err, QTK_E_DATA, c->file, -1, key, "'%s' %s", key, what);
}

/* The config.json name of hyperparameter k to read: the first of its names present
 * (llama.cpp's find_hparam), else the name qtk writes (for messages). */
static const char *cfg_key(const cfg *c, const qtk_hparam_key *k)
{
	for (size_t i = 0; k->find && k->find[i]; i++)
		if (cfg_get(c, k->find[i]))
			return k->find[i];
	return k->hf;
}

/* An integer in [lo, hi]. Absent: *present false (error when required). */
static int cfg_int(const cfg *c, const char *key, int64_t lo, int64_t hi, bool required, int64_t *out,
		   bool *present)
{
	const cJSON *v = key ? cfg_get(c, key) : NULL;
	*present = v != NULL;
	if (!v)
		return required ? cfg_bad(c, key, "is missing") : 0;
	int64_t x;
	if (!cJSON_IsNumber(v) || !qtk_json_i64(v, &x))
		return cfg_bad(c, key, "must be an integer");
	if (x < lo || x > hi) {
		char msg[96];
		snprintf(msg, sizeof msg, "is %lld; expected %lld..%lld", (long long)x, (long long)lo,
			 (long long)hi);
		return cfg_bad(c, key, msg);
	}
	*out = x;
	return 0;
}

static int cfg_pos_num(const cfg *c, const char *key, double *out, bool *present)
{
	const cJSON *v = cfg_get(c, key);
	*present = v != NULL;
	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0)
		return cfg_bad(c, key, "must be a positive number");
	*out = v->valuedouble;
	return 0;
}

static const char *const special_types[] = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};

typedef struct hparams {
	const qtk_family *fam;
	int64_t n_layer, n_ctx, n_embd, n_ff, n_head, n_head_kv, head_dim, vocab;
	bool has_ctx, has_embd, has_ff, has_head, has_head_kv, has_head_dim, has_vocab;
	const char *vocab_key; /* config.json's name for the vocabulary size (messages) */
	double rope_theta, rms_eps, norm_eps;
	bool has_theta, has_rms, has_norm_eps;
	int64_t n_expert, n_expert_used;
	bool has_expert, has_expert_used;
	bool rope_linear, rope_yarn, rope_llama3;
	double rope_factor, rope_low, rope_high, rope_orig; /* llama3: factor, low/high_freq_factor, context */
	int64_t rope_orig_ctx;
	int rope_kind;   /* QTK_KEY_ROPE_SCALING: 1 linear, 2 yarn (rope_type, else type), 0 none */
	const cJSON *rope_obj; /* rope_scaling */
	bool rope_long;  /* longrope (QTK_FAM_ROPE_LONG): factor lists and attn_factor */
	double rope_attn_factor;
	const cJSON *long_factor, *short_factor;
	int64_t rope_dims_pct; /* int(partial_rotary_factor * n_embd) / n_head (1.0 when absent) */
	int64_t rot_dim; /* rope dimension / per-head size */
	int64_t n_experts; /* experts per block, whatever the key (0: dense) */
} hparams;

/* Architectures llama.cpp converts that qtk refuses, and why. */
static const struct {
	const char *arch, *why;
} refused[] = {
	{"Gemma3ForConditionalGeneration",
	 "is not supported: its text model sits in text_config beside a vision tower, and llama.cpp drops the "
	 "embedding rows past the vocabulary (convert a Gemma3ForCausalLM checkpoint)"},
};

/* rope_scaling's long_factor or short_factor: an array of n finite positive numbers (F32 too). */
static int factor_list(const cfg *c, const cJSON *rs, const char *name, int64_t n, const cJSON **out)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(rs, name);
	char msg[192];
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n) {
		snprintf(msg, sizeof msg, "needs %s as an array of %lld numbers (half the rope dimensions)", name,
			 (long long)n);
		return cfg_bad(c, "rope_scaling", msg);
	}
	int i = 0;
	const cJSON *x;
	cJSON_ArrayForEach(x, a)
	{
		if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble <= 0 ||
		    !isfinite((float)x->valuedouble) || (float)x->valuedouble <= 0) {
			snprintf(msg, sizeof msg, "has a bad %s[%d] (finite positive numbers are needed)", name, i);
			return cfg_bad(c, "rope_scaling", msg);
		}
		i++;
	}
	*out = a;
	return 0;
}

/* Phi-3's rope_scaling (llama.cpp's Phi3MiniModel.generate_extra_tensors): su / longrope (or yarn)
 * with long_factor and short_factor of half the rope dimensions each, and an attention factor
 * from max_position_embeddings / original_max_position_embeddings. */
static int parse_longrope(const cfg *c, hparams *hp, const cJSON *rs, const cJSON *kind)
{
	if (!kind)
		return cfg_bad(c, "rope_scaling", "has no type (rope_type)");
	const char *k = kind->valuestring;
	bool yarn = !qtk_strcasecmp(k, "yarn");
	if (!yarn && qtk_strcasecmp(k, "longrope") && qtk_strcasecmp(k, "su")) {
		char msg[160];
		snprintf(msg, sizeof msg, "of type '%.64s' is not supported by this architecture (longrope, su and yarn are)",
			 k);
		return cfg_bad(c, "rope_scaling", msg);
	}
	int64_t orig;
	bool p;
	int rc = cfg_int(c, "original_max_position_embeddings", 2, 0xffffffffll, true, &orig, &p);
	if (rc)
		return rc;
	if (!hp->has_ctx)
		return cfg_bad(c, hp->fam->keys->n_ctx.hf, "is missing (the rope scaling is relative to it)");
	if (hp->rope_dims_pct < 2 || hp->rope_dims_pct % 2)
		return cfg_bad(c, "partial_rotary_factor", "gives an odd number of rope dimensions");
	int64_t n = hp->rope_dims_pct / 2;
	if ((rc = factor_list(c, rs, "long_factor", n, &hp->long_factor)) ||
	    (rc = factor_list(c, rs, "short_factor", n, &hp->short_factor)))
		return rc;
	double scale = (double)hp->n_ctx / (double)orig;
	hp->rope_attn_factor = scale <= 1.0 ? 1.0 : yarn ? 0.1 * log(scale) + 1.0 : sqrt(1.0 + log(scale) / log((double)orig));
	hp->rope_long = true;
	return 0;
}

static int parse_config(const qtk_model *hf, hparams *hp, qtk_json_doc *doc, qtk_err *err)
{
	memset(hp, 0, sizeof *hp);
	char pbuf[512];
	const char *file = side_path(hf, "config.json", pbuf, sizeof pbuf);
	const qtk_blob *b = qtk_blob_find(hf, "config.json");
	if (!b)
		return qtk_err_set(err, QTK_E_DATA, file, -1, NULL, "the model has no config.json");
	if (b->len > QTK_CAP_JSON)
		return qtk_err_set(err, QTK_E_DATA, file, -1, NULL, "config.json too large");
	int rc = qtk_json_parse((const char *)b->data, b->len, 0, file, 0, err, doc);
	if (rc)
		return rc;
	if (!cJSON_IsObject(doc->root))
		return qtk_err_set(err, QTK_E_DATA, file, 0, NULL, "config.json is not a JSON object");
	cfg c = {doc->root, err, file};
	const cJSON *ar = cfg_get(&c, "architectures");
	if (!ar)
		return cfg_bad(&c, "architectures", "is missing");
	if (!cJSON_IsArray(ar) || !cJSON_IsString(cJSON_GetArrayItem(ar, 0)))
		return cfg_bad(&c, "architectures", "must be a non-empty array of strings");
	const char *an = cJSON_GetArrayItem(ar, 0)->valuestring;
	for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
		if (!strcmp(an, refused[i].arch))
			return qtk_err_set(err, QTK_E_DATA, file, -1, "architectures", "%s %s", an, refused[i].why);
	if (!(hp->fam = qtk_family_by_hf_arch(an))) {
		char shown[128];
		snprintf(shown, sizeof shown, "%s", an);
		char list[512];
		supported(list, sizeof list, true);
		return qtk_err_set(err, QTK_E_DATA, file, -1, "architectures",
				   "unsupported architecture %s (supported: %s)", shown, list);
	}
	const qtk_family_keys *fk = hp->fam->keys;
	const int64_t DIM_MAX = 1 << 20, U32 = 0xffffffffll;
	bool p;
	if ((rc = cfg_int(&c, cfg_key(&c, &fk->n_layer), 1, 65536, true, &hp->n_layer, &p)))
		return rc;
	if ((rc = cfg_int(&c, cfg_key(&c, &fk->n_ctx), 0, U32, false, &hp->n_ctx, &hp->has_ctx)))
		return rc;
	if ((rc = cfg_int(&c, cfg_key(&c, &fk->n_embd), 1, DIM_MAX, true, &hp->n_embd, &hp->has_embd)))
		return rc;
	if ((rc = cfg_int(&c, cfg_key(&c, &fk->n_ff), 1, DIM_MAX, false, &hp->n_ff, &hp->has_ff)))
		return rc;
	if ((rc = cfg_int(&c, cfg_key(&c, &fk->n_head), 1, 65536, true, &hp->n_head, &hp->has_head)))
		return rc;
	if ((rc = cfg_int(&c, cfg_key(&c, &fk->n_head_kv), 1, 65536, false, &hp->n_head_kv, &hp->has_head_kv)))
		return rc;
	if ((rc = cfg_pos_num(&c, cfg_key(&c, &fk->rope_theta), &hp->rope_theta, &hp->has_theta)))
		return rc;
	if ((rc = cfg_pos_num(&c, cfg_key(&c, &fk->rms_eps), &hp->rms_eps, &hp->has_rms)))
		return rc;
	if ((rc = cfg_pos_num(&c, cfg_key(&c, &fk->norm_eps), &hp->norm_eps, &hp->has_norm_eps)))
		return rc;
	if ((rc = cfg_int(&c, cfg_key(&c, &fk->n_expert), 0, 65536, false, &hp->n_expert, &hp->has_expert)))
		return rc;
	if ((rc = cfg_int(&c, cfg_key(&c, &fk->n_expert_used), 0, 65536, false, &hp->n_expert_used,
			  &hp->has_expert_used)))
		return rc;
	{
		/* experts per block under either name the converters read */
		static const char *const ek[] = {"num_local_experts", "num_experts", "n_routed_experts"};
		bool pe = false;
		for (size_t i = 0; i < 3 && !pe; i++)
			if ((rc = cfg_int(&c, ek[i], 0, 65536, false, &hp->n_experts, &pe)))
				return rc;
		bool moe = (hp->fam->flags & QTK_FAM_MOE) != 0;
		if (!moe && pe && hp->n_experts > 0)
			return cfg_bad(&c, fk->n_expert.hf, "is set, but this architecture has no experts");
		if (moe && (!pe || hp->n_experts < 1))
			return qtk_err_set(err, QTK_E_DATA, file, -1, "num_experts",
					   "a mixture-of-experts model needs its expert count (num_local_experts or "
					   "num_experts)");
		if (moe && (!hp->has_expert_used || hp->n_expert_used < 1 || hp->n_expert_used > hp->n_experts))
			return cfg_bad(&c, fk->n_expert_used.hf, "must be between 1 and the number of experts");
		if (!moe)
			hp->n_experts = 0;
	}
	if ((rc = cfg_int(&c, cfg_key(&c, &fk->head_dim), 2, DIM_MAX, false, &hp->head_dim, &hp->has_head_dim)))
		return rc;
	hp->vocab_key = cfg_key(&c, &fk->vocab);
	if ((rc = cfg_int(&c, hp->vocab_key, 1, 1 << 24, (hp->fam->flags & QTK_FAM_VOCAB_KEY) != 0, &hp->vocab,
			  &hp->has_vocab)))
		return rc;
	if (hp->has_head_kv && hp->n_head % hp->n_head_kv != 0)
		return cfg_bad(&c, fk->n_head_kv.hf, "does not divide num_attention_heads");
	if (hp->has_head_dim)
		hp->rot_dim = hp->head_dim;
	else if (hp->n_embd % hp->n_head != 0)
		return cfg_bad(&c, fk->n_embd.hf, "is not divisible by num_attention_heads");
	else
		hp->rot_dim = hp->n_embd / hp->n_head;
	if (hp->rot_dim % 2 != 0)
		return cfg_bad(&c, hp->has_head_dim ? fk->head_dim.hf : fk->n_head.hf,
			       "gives an odd head dimension (rotary embeddings need it even)");
	hp->rope_dims_pct = hp->n_embd / hp->n_head;
	const cJSON *prf = cfg_get(&c, "partial_rotary_factor");
	if (prf && (!cJSON_IsNumber(prf) || !isfinite(prf->valuedouble) || prf->valuedouble <= 0 || prf->valuedouble > 1))
		return cfg_bad(&c, "partial_rotary_factor", "must be a number in (0, 1]");
	if (prf)
		hp->rope_dims_pct = (int64_t)(prf->valuedouble * (double)hp->n_embd) / hp->n_head;
	for (size_t t = 0; t < 7; t++) {
		char sk[32];
		snprintf(sk, sizeof sk, "%s_token_id", special_types[t]);
		const cJSON *v = cfg_get(&c, sk);
		int64_t id;
		/* llama.cpp rejects a negative id; lists and other types it skips */
		if (v && cJSON_IsNumber(v) && qtk_json_i64(v, &id) && id < 0)
			return cfg_bad(&c, sk, "is negative");
	}
	const cJSON *tie = cfg_get(&c, "tie_word_embeddings");
	if (tie && !cJSON_IsBool(tie))
		return cfg_bad(&c, "tie_word_embeddings", "must be true or false");
	const cJSON *rs = cfg_get(&c, "rope_scaling");
	if (rs) {
		if (!cJSON_IsObject(rs))
			return cfg_bad(&c, "rope_scaling", "must be an object");
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(rs, "factor");
		const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rs, "type");
		const cJSON *rty = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
		const cJSON *kind = rty && cJSON_IsString(rty) ? rty : ty && cJSON_IsString(ty) ? ty : NULL;
		hp->rope_obj = rs;
		if (hp->fam->flags & QTK_FAM_ROPE_LONG)
			return parse_longrope(&c, hp, rs, kind);
		if (kind && qtk_strcasecmp(kind->valuestring, "llama3") == 0) {
			if (!(hp->fam->flags & QTK_FAM_ROPE_LLAMA3))
				return cfg_bad(&c, "rope_scaling", "of type llama3 is not used by this architecture");
			/* the converter's defaults for absent values; every value positive and finite,
			 * high_freq_factor above low_freq_factor (the smoothing divides by the gap) */
			static const char *const names[] = {"factor", "low_freq_factor", "high_freq_factor",
							    "original_max_position_embeddings"};
			double vals[4] = {8.0, 1.0, 4.0, 8192.0};
			for (int i = 0; i < 4; i++) {
				const cJSON *x = cJSON_GetObjectItemCaseSensitive(rs, names[i]);
				if (!x || cJSON_IsNull(x))
					continue;
				if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble <= 0 ||
				    x->valuedouble > 1e9) {
					char msg[128];
					snprintf(msg, sizeof msg, "has a bad %s (a positive number is needed)", names[i]);
					return cfg_bad(&c, "rope_scaling", msg);
				}
				vals[i] = x->valuedouble;
			}
			if (!(vals[2] > vals[1]))
				return cfg_bad(&c, "rope_scaling", "has high_freq_factor not above low_freq_factor");
			hp->rope_llama3 = true;
			hp->rope_factor = vals[0];
			hp->rope_low = vals[1];
			hp->rope_high = vals[2];
			hp->rope_orig = vals[3];
			return 0;
		}
		if (kind && qtk_strcasecmp(kind->valuestring, "linear") && qtk_strcasecmp(kind->valuestring, "yarn") &&
		    qtk_strcasecmp(kind->valuestring, "default")) {
			char msg[160];
			snprintf(msg, sizeof msg, "of type '%.64s' is not supported (linear, yarn and llama3 are)",
				 kind->valuestring);
			return cfg_bad(&c, "rope_scaling", msg);
		}
		if (f && !cJSON_IsNull(f)) {
			if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble))
				return cfg_bad(&c, "rope_scaling", "has a non-numeric factor");
			hp->rope_factor = f->valuedouble;
			/* llama.cpp's current base class: rope_type, else type */
			if (kind && !strcmp(kind->valuestring, "linear"))
				hp->rope_kind = 1;
			if (kind && !strcmp(kind->valuestring, "yarn")) {
				const cJSON *o = cJSON_GetObjectItemCaseSensitive(rs, "original_max_position_embeddings");
				int64_t ov;
				if (!o || !qtk_json_i64(o, &ov) || ov < 0 || ov > U32)
					return cfg_bad(&c, "rope_scaling", "of type yarn needs original_max_position_embeddings");
				hp->rope_kind = 2;
				hp->rope_orig_ctx = ov;
			}
			if (ty && cJSON_IsString(ty) && strcmp(ty->valuestring, "linear") == 0)
				hp->rope_linear = true;
			if (ty && cJSON_IsString(ty) && strcmp(ty->valuestring, "yarn") == 0) {
				hp->rope_yarn = true;
				const cJSON *o = cJSON_GetObjectItemCaseSensitive(rs, "original_max_position_embeddings");
				int64_t ov;
				if (!o || !qtk_json_i64(o, &ov) || ov < 0 || ov > U32)
					return cfg_bad(&c, "rope_scaling", "of type yarn needs original_max_position_embeddings");
				hp->rope_orig_ctx = ov;
			}
		}
	}
	return 0;
}

/* ---- llama.cpp's size label ---------------------------------------------------- */

static void size_label(uint64_t n, char *out, size_t cap)
{
	double x = (double)n, s;
	const char *suf;
	if (x > 1e12) { s = x * 1e-12; suf = "T"; }
	else if (x > 1e9) { s = x * 1e-9; suf = "B"; }
	else if (x > 1e6) { s = x * 1e-6; suf = "M"; }
	else { s = x * 1e-3; suf = "K"; }
	char d[64];
	snprintf(d, sizeof d, "%.0f", nearbyint(s));
	const char *q = d;
	while (*q == '0')
		q++;
	int fix = 2 - (int)strlen(q);
	if (fix < 0)
		fix = 0;
	snprintf(out, cap, "%.*f%s", fix, s, suf);
}

/* ---- the tokenizer: SentencePiece ------------------------------------------------ */

static bool looks_special(const char *t)
{
	size_t n = strlen(t);
	if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") || !strcmp(t, "[@BOS@]"))
		return true;
	if (n >= 4 && starts_with(t, "<|") && qtk_str_ends(t, "|>"))
		return true;
	/* "<｜" ... "｜>" (U+FF5C) */
	if (starts_with(t, "<\xEF\xBD\x9C") && qtk_str_ends(t, "\xEF\xBD\x9C>") && n >= 8)
		return true;
	if (starts_with(t, "<unused") && qtk_str_ends(t, ">"))
		return true;
	return false;
}

typedef struct vocab {
	size_t n;
	qtk_str *tok;
	float *score;
	int32_t *type;
} vocab;

static void vocab_free(vocab *v)
{
	if (v->tok)
		for (size_t i = 0; i < v->n; i++)
			qtk_free(v->tok[i].s);
	qtk_free(v->tok);
	qtk_free(v->score);
	qtk_free(v->type);
	memset(v, 0, sizeof *v);
}

static int set_tok(qtk_str *t, const char *s, size_t n)
{
	char *c = qtk_strndup(s, n);
	if (!c)
		return QTK_E_IO;
	qtk_free(t->s);
	t->s = c;
	t->len = n;
	return 0;
}

/* Replace every U+2581 with a space (new string). */
static char *unescape_spaces(const char *s)
{
	size_t n = strlen(s);
	char *o = qtk_malloc(n + 1), *w = o;
	if (!o)
		return NULL;
	for (size_t i = 0; i < n;) {
		if (i + 3 <= n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
			*w++ = ' ';
			i += 3;
		} else
			*w++ = s[i++];
	}
	*w = 0;
	return o;
}

static int load_side_json(const qtk_model *m, const char *name, qtk_json_doc *doc, qtk_err *err, bool *present)
{
	const qtk_blob *b = qtk_blob_find(m, name);
	*present = b != NULL;
	if (!b)
		return 0;
	char pbuf[512];
	const char *file = side_path(m, name, pbuf, sizeof pbuf);
	if (b->len > QTK_CAP_JSON)
		return qtk_err_set(err, QTK_E_DATA, file, -1, NULL, "%s too large", name);
	return qtk_json_parse((const char *)b->data, b->len, 0, file, 0, err, doc);
}

static int spm_vocab(const qtk_model *hf, const hparams *hp, vocab *v, qtk_err *err)
{
	const qtk_blob *b = qtk_blob_find(hf, "tokenizer.model");
	qtk_spm_model sp;
	char pbuf[512];
	int rc = qtk_spm_parse(b->data, b->len, side_path(hf, "tokenizer.model", pbuf, sizeof pbuf), &sp, err);
	if (rc)
		return rc;
	size_t n = hp->has_vocab ? (size_t)hp->vocab : sp.n;
	if (sp.n > n) {
		qtk_spm_free(&sp);
		return qtk_err_set(err, QTK_E_DATA, "tokenizer.model", -1, "vocab_size",
				   "tokenizer.model has %zu pieces but config.json's vocab_size is %zu", sp.n, n);
	}
	memset(v, 0, sizeof *v);
	v->n = n;
	v->tok = qtk_calloc(n, sizeof *v->tok);
	v->score = qtk_calloc(n, sizeof *v->score);
	v->type = qtk_calloc(n, sizeof *v->type);
	if (!v->tok || !v->score || !v->type) {
		qtk_spm_free(&sp);
		vocab_free(v);
		return oom(err);
	}
	for (size_t i = 0; i < n && !rc; i++) {
		char pad[32];
		int l = snprintf(pad, sizeof pad, "[PAD%zu]", i);
		v->score[i] = -10000.0f;
		v->type[i] = SPM_UNUSED;
		if (i < sp.n) {
			const qtk_spm_piece *p = &sp.pieces[i];
			rc = set_tok(&v->tok[i], p->piece, p->len);
			v->score[i] = p->score;
			int t = p->type;
			v->type[i] = t == SPM_UNKNOWN || t == SPM_CONTROL || t == SPM_UNUSED || t == SPM_BYTE ? t : SPM_NORMAL;
		} else
			rc = set_tok(&v->tok[i], pad, (size_t)l);
	}
	qtk_spm_free(&sp);
	if (rc) {
		vocab_free(v);
		return oom(err);
	}
	/* added_tokens.json */
	qtk_json_doc d = {0};
	bool present;
	if ((rc = load_side_json(hf, "added_tokens.json", &d, err, &present)))
		goto fail;
	if (present) {
		if (!cJSON_IsObject(d.root)) {
			rc = qtk_err_set(err, QTK_E_DATA, "added_tokens.json", -1, NULL, "added_tokens.json is not an object");
			goto fail;
		}
		const cJSON *it;
		cJSON_ArrayForEach(it, d.root)
		{
			int64_t id;
			if (!qtk_json_i64(it, &id) || id < 0) {
				rc = qtk_err_set(err, QTK_E_DATA, "added_tokens.json", -1, it->string,
						 "added_tokens.json: id of '%s' is not a non-negative integer", it->string);
				goto fail;
			}
			if ((uint64_t)id >= n)
				continue; /* llama.cpp ignores it with a warning */
			if ((rc = set_tok(&v->tok[id], it->string, strlen(it->string))))
				goto fail_oom;
			v->score[id] = -1000.0f;
			v->type[id] = SPM_USER_DEFINED;
		}
		qtk_json_doc_free(&d);
	}
	/* tokenizer_config.json added_tokens_decoder */
	if ((rc = load_side_json(hf, "tokenizer_config.json", &d, err, &present)))
		goto fail;
	if (present && cJSON_IsObject(d.root)) {
		const cJSON *atd = cJSON_GetObjectItemCaseSensitive(d.root, "added_tokens_decoder");
		const cJSON *it;
		if (atd && !cJSON_IsObject(atd)) {
			rc = qtk_err_set(err, QTK_E_DATA, "tokenizer_config.json", -1, "added_tokens_decoder",
					 "tokenizer_config.json: 'added_tokens_decoder' must be an object");
			goto fail;
		}
		cJSON_ArrayForEach(it, atd)
		{
			uint64_t id;
			const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
			if (!qtk_parse_u64(it->string, &id) || id >= n || !cJSON_IsString(content)) {
				rc = qtk_err_set(err, QTK_E_DATA, "tokenizer_config.json", -1, "added_tokens_decoder",
						 "tokenizer_config.json: added_tokens_decoder entry '%s' has a bad id "
						 "(vocabulary of %zu) or no content", it->string, n);
				goto fail;
			}
			const cJSON *sp_ = cJSON_GetObjectItemCaseSensitive(it, "special");
			bool special = sp_ && cJSON_IsTrue(sp_);
			const char *tok = content->valuestring;
			if (special || looks_special(tok)) {
				v->type[id] = SPM_CONTROL;
				rc = set_tok(&v->tok[id], tok, strlen(tok));
			} else {
				char *u = unescape_spaces(tok);
				if (!u)
					goto fail_oom;
				v->type[id] = SPM_USER_DEFINED;
				rc = set_tok(&v->tok[id], u, strlen(u));
				qtk_free(u);
			}
			if (rc)
				goto fail_oom;
			v->score[id] = -1000.0f;
		}
	}
	qtk_json_doc_free(&d);
	return 0;
fail_oom:
	rc = oom(err);
fail:
	qtk_json_doc_free(&d);
	vocab_free(v);
	return rc;
}

/* gguf-py SpecialVocab: special ids, add_*_token, chat template. */
static const char *const special_keys[] = {
	"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
	"tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id", NULL /* cls: no handler */,
	"tokenizer.ggml.mask_token_id",
};

static int special_vocab(const qtk_model *hf, const cJSON *config, size_t n_vocab, qtk_model *meta,
			 const qtk_str *merges, size_t nmerges, qtk_err *err)
{
	int order[7], norder = 0;
	int64_t ids[7];
	bool set[7] = {false};
	int add[7] = {-1, -1, -1, -1, -1, -1, -1};
	qtk_json_doc tj = {0}, tc = {0};
	bool has_tj, has_tc;
	int rc = load_side_json(hf, "tokenizer.json", &tj, err, &has_tj);
	if (!rc)
		rc = load_side_json(hf, "tokenizer_config.json", &tc, err, &has_tc);
	const cJSON *chat = NULL;
	if (!rc && has_tc && cJSON_IsObject(tc.root)) {
		const cJSON *added = has_tj && cJSON_IsObject(tj.root)
					     ? cJSON_GetObjectItemCaseSensitive(tj.root, "added_tokens") : NULL;
		chat = cJSON_GetObjectItemCaseSensitive(tc.root, "chat_template");
		for (int t = 0; t < 7; t++) {
			char key[32];
			snprintf(key, sizeof key, "add_%s_token", special_types[t]);
			const cJSON *a = cJSON_GetObjectItemCaseSensitive(tc.root, key);
			if (a && cJSON_IsBool(a))
				add[t] = cJSON_IsTrue(a);
			snprintf(key, sizeof key, "%s_token", special_types[t]);
			const cJSON *e = cJSON_GetObjectItemCaseSensitive(tc.root, key);
			const char *content = NULL;
			if (cJSON_IsString(e))
				content = e->valuestring;
			else if (cJSON_IsObject(e)) {
				const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
				if (cJSON_IsString(c))
					content = c->valuestring;
			}
			if (!content || !cJSON_IsArray(added))
				continue;
			const cJSON *at;
			cJSON_ArrayForEach(at, added)
			{
				const cJSON *c = cJSON_GetObjectItemCaseSensitive(at, "content");
				if (cJSON_IsString(c) && strcmp(c->valuestring, content) == 0) {
					const cJSON *idj = cJSON_GetObjectItemCaseSensitive(at, "id");
					int64_t id;
					if (idj && qtk_json_i64(idj, &id)) {
						if (id < 0) {
							rc = qtk_err_set(err, QTK_E_DATA, "tokenizer.json", -1, key,
									 "invalid value for special token type %s: %lld",
									 special_types[t], (long long)id);
							goto out;
						}
						if ((uint64_t)id < n_vocab && !set[t]) {
							set[t] = true;
							ids[t] = id;
							order[norder++] = t;
						}
					}
					break;
				}
			}
		}
	}
	if (!rc)
		for (int t = 0; t < 7; t++) {
			char key[32];
			snprintf(key, sizeof key, "%s_token_id", special_types[t]);
			const cJSON *e = cJSON_GetObjectItemCaseSensitive(config, key);
			int64_t id;
			/* only plain ints count (a list of eos ids is skipped, as llama.cpp does) */
			if (!e || !cJSON_IsNumber(e) || !qtk_json_i64(e, &id))
				continue;
			if (id < 0) {
				rc = qtk_err_set(err, QTK_E_DATA, "config.json", -1, key,
						 "config.json: '%s' is negative", key);
				goto out;
			}
			if ((uint64_t)id < n_vocab && !set[t]) {
				set[t] = true;
				ids[t] = id;
				order[norder++] = t;
			}
		}
	if (!rc && nmerges) {
		qtk_str *copy = qtk_calloc(nmerges, sizeof *copy);
		if (!copy)
			rc = oom(err);
		for (size_t i = 0; copy && i < nmerges && !rc; i++)
			if (set_tok(&copy[i], merges[i].s, (size_t)merges[i].len))
				rc = oom(err);
		if (copy && !rc)
			rc = kv_arr(meta, "tokenizer.ggml.merges", QTK_V_STR, copy, nmerges);
		else if (copy) {
			qtk_value tmp = {.type = QTK_V_ARR, .elem = QTK_V_STR, .n = nmerges, .arr = copy};
			qtk_value_free(&tmp);
		}
		if (rc)
			goto out;
	}
	for (int i = 0; i < norder && !rc; i++)
		if (special_keys[order[i]])
			rc = kv_u32(meta, special_keys[order[i]], (uint64_t)ids[order[i]]);
	if (!rc && add[0] >= 0)
		rc = kv_bool(meta, "tokenizer.ggml.add_bos_token", add[0] != 0);
	if (!rc && add[1] >= 0)
		rc = kv_bool(meta, "tokenizer.ggml.add_eos_token", add[1] != 0);
	if (!rc && chat) {
		if (cJSON_IsString(chat))
			rc = kv_str(meta, "tokenizer.chat_template", chat->valuestring);
		else if (cJSON_IsArray(chat)) {
			const cJSON *it, *def = NULL;
			cJSON_ArrayForEach(it, chat)
			{
				const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
				const cJSON *tp = cJSON_GetObjectItemCaseSensitive(it, "template");
				if (!cJSON_IsString(nm) || !cJSON_IsString(tp) || !nm->valuestring[0])
					continue;
				if (!strcmp(nm->valuestring, "default")) {
					def = tp;
					continue;
				}
				char key[300];
				int l = snprintf(key, sizeof key, "tokenizer.chat_template.");
				for (const char *p = nm->valuestring; *p && l < (int)sizeof key - 1; p++) {
					char ch = *p;
					bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
					key[l++] = ok ? ch : '_';
				}
				key[l] = 0;
				if ((rc = kv_str(meta, key, tp->valuestring)))
					break;
			}
			if (!rc && def)
				rc = kv_str(meta, "tokenizer.chat_template", def->valuestring);
		}
	}
	if (rc > 0)
		rc = 0;
	if (rc == QTK_E_IO && !err->code)
		oom(err);
out:
	qtk_json_doc_free(&tj);
	qtk_json_doc_free(&tc);
	return rc;
}

static int emit_spm(const qtk_model *hf, const hparams *hp, const cJSON *config, qtk_model *meta, qtk_err *err)
{
	vocab v;
	int rc = spm_vocab(hf, hp, &v, err);
	if (rc)
		return rc;
	uint8_t *sc = qtk_malloc(v.n * 4), *ty = qtk_malloc(v.n * 4);
	if (!sc || !ty) {
		qtk_free(sc);
		qtk_free(ty);
		vocab_free(&v);
		return oom(err);
	}
	for (size_t i = 0; i < v.n; i++) {
		uint32_t u;
		memcpy(&u, &v.score[i], 4);
		qtk_wr32(sc + 4 * i, u);
		qtk_wr32(ty + 4 * i, (uint32_t)v.type[i]);
	}
	size_t n = v.n;
	qtk_str *tok = v.tok;
	v.tok = NULL;
	vocab_free(&v);
	rc = kv_str(meta, "tokenizer.ggml.model", "llama");
	rc = rc ? rc : kv_str(meta, "tokenizer.ggml.pre", "default");
	if (rc) {
		for (size_t i = 0; i < n; i++)
			qtk_free(tok[i].s);
		qtk_free(tok);
		qtk_free(sc);
		qtk_free(ty);
		return oom(err);
	}
	rc = kv_arr(meta, "tokenizer.ggml.tokens", QTK_V_STR, tok, n);
	if (rc) {
		qtk_free(sc);
		qtk_free(ty);
		return oom(err);
	}
	if (kv_arr(meta, "tokenizer.ggml.scores", QTK_V_F32, sc, n)) {
		qtk_free(ty);
		return oom(err);
	}
	if (kv_arr(meta, "tokenizer.ggml.token_type", QTK_V_I32, ty, n))
		return oom(err);
	return special_vocab(hf, config, n, meta, NULL, 0, err);
}

/* ---- HF -> GGUF -------------------------------------------------------------- */

/* A generated tensor of n F32 values (its buffer, NULL when out of memory). */
static float *gen_add(qtk_hfmap *m, const char *name, uint32_t n)
{
	if (m->ngen == sizeof m->gen / sizeof *m->gen)
		return NULL;
	float *v = qtk_calloc(n ? n : 1, sizeof *v);
	if (v) {
		m->gen[m->ngen].name = name;
		m->gen[m->ngen].v = v;
		m->gen[m->ngen++].n = n;
	}
	return v;
}

static bool is_float_plain(const qtk_tensor *t)
{
	if (t->layout.kind != QTK_LAYOUT_PLAIN)
		return false;
	unsigned ty = t->layout.type;
	return ty == QTK_T_F32 || ty == QTK_T_F16 || ty == QTK_T_BF16;
}

/* The tensor's shape against config.json: blocks below num_hidden_layers, the embeddings and
 * every block matrix reading or writing the residual stream hidden_size wide, Q and K rows
 * heads x head size. A checkpoint whose config describes another model is refused (exit 3)
 * rather than given metadata that does not fit its tensors. out: the GGUF name (NULL when
 * unmapped: nothing to check). */
static int check_shape(const qtk_family *f, const hparams *hp, const qtk_tensor *t, const char *out, int qk,
		       qtk_err *err)
{
	if (!out)
		return 0;
	const char *bp = f->gguf_block;
	size_t bl = bp ? strlen(bp) : 0;
	uint64_t embd = (uint64_t)hp->n_embd, hd = (uint64_t)(hp->has_head_dim ? hp->head_dim : hp->n_embd / hp->n_head);
	uint64_t cols = t->ndim >= 2 ? t->shape[t->ndim - 1] : 0, rows = t->ndim >= 1 ? t->shape[0] : 0;
	const char *why = NULL;
	char msg[200];
	if (bp && !strncmp(out, bp, bl)) {
		uint64_t b = 0;
		for (const char *p = out + bl; *p >= '0' && *p <= '9' && b < (1u << 20); p++)
			b = b * 10 + (uint64_t)(*p - '0');
		if (b >= (uint64_t)hp->n_layer) {
			snprintf(msg, sizeof msg, "is in block %llu, but config.json has %lld layers (num_hidden_layers)",
				 (unsigned long long)b, (long long)hp->n_layer);
			why = msg;
		} else if (t->ndim == 2 && qk) {
			uint64_t want = (uint64_t)(qk == 'q' ? hp->n_head : hp->has_head_kv ? hp->n_head_kv : hp->n_head) * hd;
			if (rows != want || cols != embd) {
				snprintf(msg, sizeof msg, "is [%llu, %llu]; config.json gives [%llu, %llu] (%s x head size, "
					 "hidden_size)", (unsigned long long)rows, (unsigned long long)cols,
					 (unsigned long long)want, (unsigned long long)embd,
					 qk == 'q' ? f->keys->n_head.hf : f->keys->n_head_kv.hf);
				why = msg;
			}
		} else if (t->ndim == 2 && cols != embd && rows != embd) {
			snprintf(msg, sizeof msg, "is [%llu, %llu]: neither side is hidden_size %llu from config.json",
				 (unsigned long long)rows, (unsigned long long)cols, (unsigned long long)embd);
			why = msg;
		}
	} else if (t->ndim == 2 && (qtk_str_ends(out, "token_embd.weight") || qtk_str_ends(out, "output.weight")) &&
		   cols != embd) {
		snprintf(msg, sizeof msg, "has rows of %llu, but hidden_size in config.json is %llu",
			 (unsigned long long)cols, (unsigned long long)embd);
		why = msg;
	}
	return why ? qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "%s", why) : 0;
}

/* Every stacked tensor has all of its experts, once each, with one shape and layout. */
static int check_experts(qtk_hfmap *m, const qtk_model *hf, qtk_err *err)
{
	if (!m->n_expert)
		return 0;
	size_t *first = qtk_calloc(m->n_expert, sizeof *first);
	if (!first)
		return oom(err);
	size_t *gnext = NULL, *ghead = NULL;
	int rc = expert_groups(m, &gnext, &ghead, err);
	for (size_t i = 0; i < m->n && !rc; i++) {
		if (!m->e[i].expert || ghead[i] != i) /* each stack once, from its first entry */
			continue;
		m->nout++;
		for (uint32_t k = 0; k < m->n_expert; k++)
			first[k] = SIZE_MAX;
		for (size_t j = i; j != SIZE_MAX && !rc; j = gnext[j]) {
			const qtk_tensor *a = &hf->tensors[i], *b = &hf->tensors[j];
			if (first[m->e[j].ei] != SIZE_MAX)
				rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, b->name, "expert %u appears twice (also as %s)",
						 m->e[j].ei, hf->tensors[first[m->e[j].ei]].name);
			else if (a->ndim != 2 || b->ndim != a->ndim || memcmp(a->shape, b->shape, sizeof a->shape) ||
				 memcmp(&a->layout, &b->layout, sizeof a->layout) || a->nparts != b->nparts)
				rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, b->name,
						 "experts of one layer differ in shape or layout (compare %s)", a->name);
			else
				first[m->e[j].ei] = j;
		}
		for (uint32_t k = 0; k < m->n_expert && !rc; k++)
			if (first[k] == SIZE_MAX)
				rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, m->e[i].out,
						 "expert %u of %u is missing (config.json has %u experts)", k, m->n_expert,
						 m->n_expert);
	}
	qtk_free(gnext);
	qtk_free(ghead);
	qtk_free(first);
	return rc;
}

/* config.json's skip_if_one of k is 1: k is not written. */
static bool spec_skipped(const cfg *c, const qtk_key_spec *k)
{
	const cJSON *v = k->skip_if_one ? cfg_get(c, k->skip_if_one) : NULL;
	return v && cJSON_IsNumber(v) && v->valuedouble == 1;
}

/* rope.scaling.* as llama.cpp's base class writes them (QTK_KEY_ROPE_SCALING). */
static int emit_rope_scaling(qtk_model *meta, const qtk_family *f, const hparams *hp, const cfg *c)
{
	const qtk_family_keys *fk = f->keys;
	char key[160];
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", f->gguf_arch, suffix), key)
	if (!hp->rope_kind)
		return 0;
	if (kv_str(meta, K(fk->rope_type), hp->rope_kind == 1 ? "linear" : "yarn") ||
	    kv_f32(meta, K(fk->rope_factor), hp->rope_factor))
		return oom(c->err);
	if (hp->rope_kind == 1)
		return 0;
	if (kv_u32(meta, K(fk->rope_orig_ctx), (uint64_t)hp->rope_orig_ctx))
		return oom(c->err);
	/* the optional YaRN values, in the converter's order */
	static const char *const from[][2] = {{"extrapolation_factor", NULL},
					      {"attention_factor", "attn_factor"},
					      {"beta_fast", NULL},
					      {"beta_slow", NULL}};
	static const char *const to[] = {"rope.scaling.yarn_ext_factor", "rope.scaling.yarn_attn_factor",
					 "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow"};
	for (int i = 0; i < 4; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(hp->rope_obj, from[i][0]);
		if ((!v || cJSON_IsNull(v)) && from[i][1])
			v = cJSON_GetObjectItemCaseSensitive(hp->rope_obj, from[i][1]);
		if (!v || cJSON_IsNull(v))
			continue;
		if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
			char msg[96];
			snprintf(msg, sizeof msg, "has a non-numeric %s", v->string ? v->string : from[i][0]);
			return cfg_bad(c, "rope_scaling", msg);
		}
		if (kv_f32(meta, K(to[i]), v->valuedouble))
			return oom(c->err);
	}
#undef K
	return 0;
}

/* The keys of a family with its own order (f->gguf_keys). */
static int emit_schedule(qtk_model *meta, const qtk_family *f, const hparams *hp, const cJSON *root, unsigned ftype,
			 qtk_err *err)
{
	const qtk_family_keys *fk = f->keys;
	char key[160];
	cfg c = {root, err, "config.json"};
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", f->gguf_arch, suffix), key)
	int rc = 0;
	for (const qtk_key_spec *k = f->gguf_keys; k->kind != QTK_KEY_END && !rc; k++) {
		switch (k->kind) {
		case QTK_KEY_HP:
			switch (k->hp) {
			case QTK_HP_LAYER: rc = kv_u32(meta, K(fk->n_layer.gguf), (uint64_t)hp->n_layer); break;
			case QTK_HP_CTX: if (hp->has_ctx) rc = kv_u32(meta, K(fk->n_ctx.gguf), (uint64_t)hp->n_ctx); break;
			case QTK_HP_EMBD: rc = kv_u32(meta, K(fk->n_embd.gguf), (uint64_t)hp->n_embd); break;
			case QTK_HP_FF: if (hp->has_ff) rc = kv_u32(meta, K(fk->n_ff.gguf), (uint64_t)hp->n_ff); break;
			case QTK_HP_HEAD: rc = kv_u32(meta, K(fk->n_head.gguf), (uint64_t)hp->n_head); break;
			case QTK_HP_HEAD_KV:
				if (hp->has_head_kv)
					rc = kv_u32(meta, K(fk->n_head_kv.gguf), (uint64_t)hp->n_head_kv);
				break;
			case QTK_HP_THETA:
				if (hp->has_theta)
					rc = kv_f32(meta, K(fk->rope_theta.gguf), hp->rope_theta);
				break;
			case QTK_HP_RMS: if (hp->has_rms) rc = kv_f32(meta, K(fk->rms_eps.gguf), hp->rms_eps); break;
			case QTK_HP_EXPERT:
				if (hp->has_expert)
					rc = kv_u32(meta, K(fk->n_expert.gguf), (uint64_t)hp->n_expert);
				break;
			case QTK_HP_EXPERT_USED:
				if (hp->has_expert_used)
					rc = kv_u32(meta, K(fk->n_expert_used.gguf), (uint64_t)hp->n_expert_used);
				break;
			}
			if (rc)
				rc = oom(err);
			break;
		case QTK_KEY_FILE_TYPE:
			if (kv_u32(meta, "general.file_type", ftype))
				rc = oom(err);
			break;
		case QTK_KEY_HEAD_DIM:
			if (hp->has_head_dim && (kv_u32(meta, K(fk->head_dim.gguf), (uint64_t)hp->head_dim) ||
						 kv_u32(meta, K(fk->value_length), (uint64_t)hp->head_dim)))
				rc = oom(err);
			break;
		case QTK_KEY_ROPE_DIM:
			if (kv_u32(meta, K(fk->rope_dim), (uint64_t)hp->rope_dims_pct))
				rc = oom(err);
			break;
		case QTK_KEY_ROPE_SCALING:
			rc = emit_rope_scaling(meta, f, hp, &c);
			break;
		case QTK_KEY_ABSENT:
			if (cfg_get(&c, k->hf))
				rc = cfg_bad(&c, k->hf, "is set, but llama.cpp's converter refuses it for this architecture");
			break;
		case QTK_KEY_U32: {
			int64_t v = 0;
			bool present = false;
			if (spec_skipped(&c, k))
				break;
			rc = cfg_int(&c, k->hf, 0, 0xffffffffll, false, &v, &present);
			if (!rc && !present && k->def_hf)
				rc = cfg_int(&c, k->def_hf, 0, 0xffffffffll, false, &v, &present);
			if (!rc && (k->opt & QTK_KS_IF_ABSENT)) {
				if (present)
					break;
				v = (int64_t)k->def;
				present = true;
			}
			if (!rc && !present && (k->opt & QTK_KS_REQUIRED))
				rc = cfg_bad(&c, k->hf, "is missing");
			if (!rc && !present && k->def >= 0) {
				v = (int64_t)k->def;
				present = true;
			}
			if (!rc && present && (k->opt & QTK_KS_NONZERO) && v == 0)
				present = false;
			if (!rc && present && kv_u32(meta, K(k->gguf), (uint64_t)v))
				rc = oom(err);
			break;
		}
		case QTK_KEY_F32: {
			if (spec_skipped(&c, k))
				break;
			const cJSON *v = cfg_get(&c, k->hf);
			double x = k->def;
			if (v && (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)))
				rc = cfg_bad(&c, k->hf, "must be a number");
			else if (v)
				x = v->valuedouble;
			bool write = v || k->def >= 0;
			if ((k->opt & QTK_KS_IF_ABSENT) && v)
				write = false;
			if (!rc && !v && (k->opt & QTK_KS_REQUIRED))
				rc = cfg_bad(&c, k->hf, "is missing");
			if ((k->opt & QTK_KS_NONZERO) && x == 0)
				write = false;
			if (!rc && write && kv_f32(meta, K(k->gguf), x))
				rc = oom(err);
			break;
		}
		case QTK_KEY_END: break;
		}
	}
#undef K
	return rc;
}

int qtk_hfmap_hf_to_gguf(const qtk_model *hf, qtk_model *meta, qtk_hfmap **mapp, qtk_err *err)
{
	*mapp = NULL;
	hparams hp;
	qtk_json_doc doc = {0};
	int rc = parse_config(hf, &hp, &doc, err);
	qtk_hfmap *m = NULL;
	if (rc)
		goto out;
	if (!(m = map_new(hf, true))) {
		rc = oom(err);
		goto out;
	}
	const qtk_family *f = m->fam = hp.fam;
	const qtk_family_keys *fk = f->keys;
	int64_t n_head_kv = hp.has_head_kv ? hp.n_head_kv : hp.n_head;
	uint64_t total = 0, expert_params = 0, embd_rows = 0;
	bool all_f32 = true, any_bf16 = false;
	m->n_expert = (uint32_t)hp.n_experts;
	for (size_t i = 0; i < m->n; i++) {
		const qtk_tensor *t = &hf->tensors[i];
		hent *e = &m->e[i];
		if (qtk_family_dropped(f, t->name)) {
			e->drop = true;
			continue;
		}
		int kind;
		char nb[512];
		uint32_t ei = 0;
		int xr = qtk_family_expert_to_gguf(f, t->name, nb, sizeof nb, &ei);
		if (xr < 0) {
			rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "tensor name too long");
			goto out;
		}
		if (xr == 1) {
			if (ei >= (uint64_t)hp.n_experts) {
				rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name,
						 "expert %u, but config.json says %lld experts", ei, (long long)hp.n_experts);
				goto out;
			}
			if ((rc = check_shape(f, &hp, t, nb, 0, err)))
				goto out;
			if (!(e->out = qtk_strdup(nb))) {
				rc = oom(err);
				goto out;
			}
			e->expert = true;
			e->ei = ei;
			e->otype = t->layout.kind == QTK_LAYOUT_PLAIN ? t->layout.type : QTK_T_MAX;
			if (t->layout.kind != QTK_LAYOUT_PLAIN || t->layout.type != QTK_T_F32)
				all_f32 = false;
			if (t->layout.kind == QTK_LAYOUT_PLAIN && t->layout.type == QTK_T_BF16)
				any_bf16 = true;
			total += t->n_params;
			expert_params += t->n_params;
			continue;
		}
		m->nout++;
		if (qtk_family_map_name(f, t->name, true, nb, sizeof nb, &kind) == 1 && !(e->out = qtk_strdup(nb))) {
			rc = oom(err);
			goto out;
		}
		if (!e->out && (rc = map_input_scale(f, t, true, e, &kind, err)))
			goto out;
		const qtk_name_rule *rule = qtk_family_rule(f, t->name, true);
		e->rflags = rule ? rule->flags : 0;
		if ((rc = check_shape(f, &hp, t, e->out, kind, err)))
			goto out;
		if (f->permute_qk && kind) {
			int64_t heads = kind == 'q' ? hp.n_head : n_head_kv;
			uint64_t rows = t->ndim >= 1 ? t->shape[0] : 0;
			if (rows == 0 || rows % (uint64_t)(2 * heads) != 0) {
				rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name,
						 "%" PRIu64 " rows cannot be split into %lld heads of even size (%s)",
						 rows, (long long)heads,
						 kind == 'q' ? fk->n_head.hf : fk->n_head_kv.hf);
				goto out;
			}
			e->heads = (int)heads;
		}
		unsigned ty = t->layout.type;
		e->otype = t->layout.kind == QTK_LAYOUT_PLAIN ? ty : QTK_T_MAX;
		const char *on = e->out ? e->out : t->name;
		if (is_float_plain(t) && (t->ndim <= 1 || qtk_str_ends(on, "_norm.weight") || !qtk_str_ends(on, ".weight") ||
					  (e->rflags & (QTK_RULE_F32 | QTK_RULE_PLUS1))))
			e->otype = QTK_T_F32;
		if ((e->rflags & QTK_RULE_PLUS1) && !is_float_plain(t)) {
			rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "a norm weight must be F32, F16 or BF16");
			goto out;
		}
		if (t->layout.kind != QTK_LAYOUT_PLAIN || ty != QTK_T_F32)
			all_f32 = all_f32 && t->ndim <= 1;
		if (t->layout.kind == QTK_LAYOUT_PLAIN && ty == QTK_T_BF16)
			any_bf16 = true;
		total += t->n_params;
	}
	if ((rc = check_experts(m, hf, err)))
		goto out;
	/* the tensors the converter generates, before the checkpoint's */
	if (hp.rope_llama3) {
		float *v = gen_add(m, "rope_freqs.weight", (uint32_t)(hp.rot_dim / 2));
		if (!v) {
			rc = oom(err);
			goto out;
		}
		qtk_family_llama3_rope(hp.has_theta ? hp.rope_theta : 10000.0, (uint32_t)hp.rot_dim, hp.rope_factor,
				       hp.rope_low, hp.rope_high, hp.rope_orig, v);
	}
	if (hp.rope_long) {
		const cJSON *lists[2] = {hp.long_factor, hp.short_factor};
		static const char *const names[2] = {"rope_factors_long.weight", "rope_factors_short.weight"};
		for (int g = 0; g < 2; g++) {
			float *v = gen_add(m, names[g], (uint32_t)cJSON_GetArraySize(lists[g]));
			if (!v) {
				rc = oom(err);
				goto out;
			}
			const cJSON *x;
			uint32_t i = 0;
			cJSON_ArrayForEach(x, lists[g])
				v[i++] = (float)x->valuedouble;
		}
	}
	for (size_t g = 0; g < m->ngen; g++) {
		m->nout++;
		total += m->gen[g].n;
	}
	/* metadata, in llama.cpp's order */
	const char *an = f->gguf_arch;
	char key[128], lbl[32];
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", an, suffix), key)
	char *base = NULL;
	if (hf->path) {
		size_t l = strlen(hf->path);
		while (l > 1 && hf->path[l - 1] == '/')
			l--;
		size_t s = l;
		while (s > 0 && hf->path[s - 1] != '/')
			s--;
		base = qtk_strndup(hf->path + s, l - s);
	} else
		base = qtk_strdup("model");
	if (!base) {
		rc = oom(err);
		goto out;
	}
	if (m->n_expert) { /* gguf-py's label for experts: count x (shared + one expert's share) */
		char one[24];
		size_label(total - expert_params + expert_params / m->n_expert, one, sizeof one);
		snprintf(lbl, sizeof lbl, "%ux%s", m->n_expert, one);
	} else
		size_label(total, lbl, sizeof lbl);
	rc = kv_str(meta, "general.architecture", an);
	/* the converter adds it while generating the factor tensors, before any other metadata */
	if (hp.rope_long)
		rc = rc ? rc : kv_f32(meta, K("rope.scaling.attn_factor"), hp.rope_attn_factor);
	rc = rc ? rc : kv_str(meta, "general.type", "model");
	rc = rc ? rc : kv_str(meta, "general.name", base);
	qtk_free(base);
	if (total > 0)
		rc = rc ? rc : kv_str(meta, "general.size_label", lbl);
	if (f->gguf_keys) {
		if (!rc)
			rc = emit_schedule(meta, f, &hp, doc.root, all_f32 ? 0u : any_bf16 ? 32u : 1u, err);
		if (rc)
			goto out;
		goto tokenizer;
	}
	rc = rc ? rc : kv_u32(meta, K(fk->n_layer.gguf), (uint64_t)hp.n_layer);
	if (hp.has_ctx)
		rc = rc ? rc : kv_u32(meta, K(fk->n_ctx.gguf), (uint64_t)hp.n_ctx);
	rc = rc ? rc : kv_u32(meta, K(fk->n_embd.gguf), (uint64_t)hp.n_embd);
	if (hp.has_ff)
		rc = rc ? rc : kv_u32(meta, K(fk->n_ff.gguf), (uint64_t)hp.n_ff);
	rc = rc ? rc : kv_u32(meta, K(fk->n_head.gguf), (uint64_t)hp.n_head);
	if (hp.has_head_kv)
		rc = rc ? rc : kv_u32(meta, K(fk->n_head_kv.gguf), (uint64_t)hp.n_head_kv);
	if (hp.has_theta)
		rc = rc ? rc : kv_f32(meta, K(fk->rope_theta.gguf), hp.rope_theta);
	if (hp.has_rms)
		rc = rc ? rc : kv_f32(meta, K(fk->rms_eps.gguf), hp.rms_eps);
	if (hp.has_norm_eps)
		rc = rc ? rc : kv_f32(meta, K(fk->norm_eps.gguf), hp.norm_eps);
	if (hp.has_expert)
		rc = rc ? rc : kv_u32(meta, K(fk->n_expert.gguf), (uint64_t)hp.n_expert);
	if (hp.has_expert_used)
		rc = rc ? rc : kv_u32(meta, K(fk->n_expert_used.gguf), (uint64_t)hp.n_expert_used);
	if (hp.has_head_dim) {
		rc = rc ? rc : kv_u32(meta, K(fk->head_dim.gguf), (uint64_t)hp.head_dim);
		rc = rc ? rc : kv_u32(meta, K(fk->value_length), (uint64_t)hp.head_dim);
	}
	rc = rc ? rc : kv_u32(meta, "general.file_type", all_f32 ? 0u : any_bf16 ? 32u : 1u);
	/* the family's own keys */
	if (f->flags & QTK_FAM_VOCAB_KEY)
		rc = rc ? rc : kv_u32(meta, K(fk->vocab.gguf), (uint64_t)hp.vocab);
	if (f->flags & QTK_FAM_ROPE_DIM)
		rc = rc ? rc : kv_u32(meta, K(fk->rope_dim), (uint64_t)hp.rot_dim);
	if ((f->flags & QTK_FAM_ROPE_LINEAR) && hp.rope_linear) {
		rc = rc ? rc : kv_str(meta, K(fk->rope_type), "linear");
		rc = rc ? rc : kv_f32(meta, K(fk->rope_factor), hp.rope_factor);
	}
	if ((f->flags & QTK_FAM_ROPE_YARN) && hp.rope_yarn) {
		rc = rc ? rc : kv_str(meta, K(fk->rope_type), "yarn");
		rc = rc ? rc : kv_f32(meta, K(fk->rope_factor), hp.rope_factor);
		rc = rc ? rc : kv_u32(meta, K(fk->rope_orig_ctx), (uint64_t)hp.rope_orig_ctx);
	}
#undef K
	if (rc) {
		rc = oom(err);
		goto out;
	}
tokenizer:
	/* The vocabulary is padded with [PAD<i>] tokens up to vocab_size, as llama.cpp's converter
	 * does; a vocabulary longer than the embedding table names tokens no row embeds (and a
	 * hostile vocab_size would make qtk write millions of padding tokens). */
	for (size_t i = 0; i < m->n; i++) {
		const qtk_tensor *t = &hf->tensors[i];
		if (m->e[i].out && !strcmp(m->e[i].out, "token_embd.weight") && t->ndim == 2) {
			embd_rows = t->shape[0];
			break;
		}
	}
	if (embd_rows && hp.has_vocab && (uint64_t)hp.vocab > embd_rows) {
		char pbuf[512];
		rc = qtk_err_set(err, QTK_E_DATA, side_path(hf, "config.json", pbuf, sizeof pbuf), -1, hp.vocab_key,
				 "'%s' is %lld but the embedding table has %" PRIu64
				 " rows: the vocabulary may be padded up to the embedding rows, not past them",
				 hp.vocab_key, (long long)hp.vocab, embd_rows);
		goto out;
	}
	if (qtk_blob_find(hf, "tokenizer.model")) {
		rc = emit_spm(hf, &hp, doc.root, meta, err);
	} else if (qtk_blob_find(hf, "tokenizer.json")) {
		qtk_str *merges = NULL;
		size_t nmerges = 0;
		uint64_t nv = hp.has_vocab ? (uint64_t)hp.vocab : 0;
		/* tokenizer.ggml.pre: named from tokenizer.json's own pre_tokenizer */
		rc = qtk_bpe_hf_vocab(hf, NULL, nv, meta, &merges, &nmerges, err);
		if (!rc) {
			const qtk_kv *tk = qtk_kv_find(meta, "tokenizer.ggml.tokens");
			rc = special_vocab(hf, doc.root, tk ? (size_t)tk->val.n : 0, meta, merges, nmerges, err);
		}
		for (size_t i = 0; merges && i < nmerges; i++)
			qtk_free(merges[i].s);
		qtk_free(merges);
	} else {
		snprintf(m->warn, sizeof m->warn,
			 "no tokenizer.model or tokenizer.json: the GGUF has no vocabulary (llama.cpp cannot run it)");
	}
	if (rc)
		goto out;
	const qtk_kv *vtk = embd_rows ? qtk_kv_find(meta, "tokenizer.ggml.tokens") : NULL;
	if (vtk && vtk->val.n > embd_rows) {
		const char *tf = qtk_blob_find(hf, "tokenizer.model") ? "tokenizer.model" : "tokenizer.json";
		char pbuf[512];
		rc = qtk_err_set(err, QTK_E_DATA, side_path(hf, tf, pbuf, sizeof pbuf), -1, "vocab_size",
				 "%s has %" PRIu64 " tokens but the embedding table has %" PRIu64 " rows", tf,
				 (uint64_t)vtk->val.n, embd_rows);
		goto out;
	}
	if ((f->flags & QTK_FAM_SPM_PREFIX) && qtk_blob_find(hf, "tokenizer.model")) {
		qtk_json_doc tc = {0};
		bool present;
		rc = load_side_json(hf, "tokenizer_config.json", &tc, err, &present);
		if (!rc && present && cJSON_IsObject(tc.root)) {
			const cJSON *a = cJSON_GetObjectItemCaseSensitive(tc.root, "add_prefix_space");
			if (a && cJSON_IsBool(a) && kv_bool(meta, "tokenizer.ggml.add_space_prefix", cJSON_IsTrue(a)))
				rc = oom(err);
		}
		qtk_json_doc_free(&tc);
		if (rc)
			goto out;
	}
	if ((f->flags & QTK_FAM_NO_SPACE_PREFIX) &&
	    (!(f->flags & QTK_FAM_NO_SPACE_PREFIX_SPM) || qtk_blob_find(hf, "tokenizer.model")) &&
	    kv_bool(meta, "tokenizer.ggml.add_space_prefix", false)) {
		rc = oom(err);
		goto out;
	}
	if (f->flags & QTK_FAM_EMBD_VOCAB) {
		/* llama.cpp keeps the embedding rows of the vocabulary only; qtk does not cut tensors */
		const qtk_kv *tk = qtk_kv_find(meta, "tokenizer.ggml.tokens");
		for (size_t i = 0; tk && i < m->n; i++) {
			const qtk_tensor *t = &hf->tensors[i];
			if (m->e[i].out && !strcmp(m->e[i].out, "token_embd.weight") && t->ndim == 2 && t->shape[0] > tk->val.n) {
				rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name,
						 "%" PRIu64 " embedding rows but %" PRIu64 " tokens: llama.cpp drops the rows past the "
						 "vocabulary, which qtk does not do",
						 t->shape[0], (uint64_t)tk->val.n);
				goto out;
			}
		}
	}
	if (kv_u32(meta, "general.quantization_version", 2)) {
		rc = oom(err);
		goto out;
	}
out:
	qtk_json_doc_free(&doc);
	if (rc) {
		qtk_hfmap_free(m);
		return rc;
	}
	*mapp = m;
	return 0;
}

/* ---- JSON writing ----------------------------------------------------------- */

static void jstr(qtk_buf *b, const char *s, size_t n)
{
	qtk_json_put_str_as(b, s, n, QTK_JSON_RAW | QTK_JSON_ESC_SHORT | QTK_JSON_ESC_DEL);
}

/* Python repr() of a float: the shortest digits that read back to the same
 * value (as F32 when is_f32), fixed notation for exponents -4..15. */
static void jnum(qtk_buf *b, double v, bool is_f32)
{
	if (!isfinite(v)) {
		qtk_buf_puts(b, "null");
		return;
	}
	char e[64];
	int prec;
	for (prec = 1; prec <= 17; prec++) {
		snprintf(e, sizeof e, "%.*e", prec - 1, v);
		if (is_f32 ? strtof(e, NULL) == (float)v : strtod(e, NULL) == v)
			break;
	}
	/* e = "[-]d.ddde[+-]xx" */
	char digits[32];
	size_t nd = 0;
	const char *p = e;
	bool neg = *p == '-';
	if (neg)
		p++;
	for (; *p && *p != 'e'; p++)
		if (*p != '.')
			digits[nd++] = *p;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	int ex = (int)strtol(p + 1, NULL, 10);
	if (neg)
		qtk_buf_putc(b, '-');
	if (ex >= -4 && ex < 16) {
		if (ex < 0) {
			qtk_buf_puts(b, "0.");
			for (int k = -1; k > ex; k--)
				qtk_buf_putc(b, '0');
			qtk_buf_put(b, digits, nd);
		} else {
			for (int k = 0; k <= ex; k++)
				qtk_buf_putc(b, k < (int)nd ? digits[k] : '0');
			qtk_buf_putc(b, '.');
			if ((int)nd > ex + 1)
				qtk_buf_put(b, digits + ex + 1, nd - (size_t)(ex + 1));
			else
				qtk_buf_putc(b, '0');
		}
	} else {
		qtk_buf_putc(b, digits[0]);
		if (nd > 1) {
			qtk_buf_putc(b, '.');
			qtk_buf_put(b, digits + 1, nd - 1);
		}
		qtk_buf_printf(b, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
	}
}

/* ---- GGUF -> HF -------------------------------------------------------------- */

static int g_bad(qtk_err *err, const char *key, const char *what)
{
	return qtk_err_set(err, QTK_E_DATA, NULL, -1, key, "GGUF key '%s' %s", key, what);
}

static int g_int(const qtk_model *g, const char *key, int64_t lo, int64_t hi, bool required, int64_t *out,
		 bool *present, qtk_err *err)
{
	const qtk_kv *kv = qtk_kv_find(g, key);
	*present = kv != NULL;
	if (!kv)
		return required ? g_bad(err, key, "is missing") : 0;
	int64_t x;
	if (!qtk_value_as_i64(&kv->val, &x))
		return g_bad(err, key, "must be an integer");
	if (x < lo || x > hi) {
		char msg[96];
		snprintf(msg, sizeof msg, "is %lld; expected %lld..%lld", (long long)x, (long long)lo, (long long)hi);
		return g_bad(err, key, msg);
	}
	*out = x;
	return 0;
}

static int g_num(const qtk_model *g, const char *key, double *out, bool *is_f32, qtk_err *err)
{
	const qtk_kv *kv = qtk_kv_find(g, key);
	if (!kv)
		return 0;
	if (!val_num(&kv->val, out) || !isfinite(*out) || *out <= 0)
		return g_bad(err, key, "must be a positive number");
	*is_f32 = kv->val.type == QTK_V_F32;
	return 0;
}

static const qtk_str *g_tokens(const qtk_model *g, size_t *n)
{
	const qtk_kv *kv = qtk_kv_find(g, "tokenizer.ggml.tokens");
	*n = 0;
	if (!kv || kv->val.type != QTK_V_ARR || kv->val.elem != QTK_V_STR)
		return NULL;
	*n = (size_t)kv->val.n;
	return kv->val.arr;
}

/* A special token id from the GGUF (or -1). */
static int64_t g_special(const qtk_model *g, const char *key, size_t ntok)
{
	const qtk_kv *kv = qtk_kv_find(g, key);
	int64_t id;
	if (!kv || !qtk_value_as_i64(&kv->val, &id) || id < 0 || (uint64_t)id >= ntok)
		return -1;
	return id;
}

static int g_bool(const qtk_model *g, const char *key)
{
	const qtk_kv *kv = qtk_kv_find(g, key);
	if (!kv || kv->val.type != QTK_V_BOOL)
		return -1;
	return kv->val.v.u != 0;
}

static int put_blob(qtk_model *meta, const char *name, qtk_buf *b, qtk_err *err)
{
	int rc = b->failed ? QTK_E_IO : qtk_model_add_blob(meta, name, b->p ? b->p : (uint8_t *)"", b->len);
	qtk_buf_free(b);
	return rc ? oom(err) : 0;
}

static void jkey(qtk_buf *b, bool *first, const char *k)
{
	qtk_buf_puts(b, *first ? "{\n  " : ",\n  ");
	*first = false;
	jstr(b, k, strlen(k));
	qtk_buf_puts(b, ": ");
}

static void jtok(qtk_buf *b, bool *first, const char *k, const qtk_str *toks, int64_t id)
{
	jkey(b, first, k);
	jstr(b, toks[id].s, (size_t)toks[id].len);
}

/* bos/eos/unk/pad_token for the ids that are set (>= 0) */
static void jtok_specials(qtk_buf *b, bool *first, const qtk_str *toks, int64_t bos, int64_t eos, int64_t unk,
			  int64_t pad)
{
	static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
	const int64_t ids[] = {bos, eos, unk, pad};
	for (int i = 0; i < 4; i++)
		if (ids[i] >= 0)
			jtok(b, first, keys[i], toks, ids[i]);
}

/* chat_template, when the GGUF has one */
static void jchat_template(qtk_buf *b, bool *first, const qtk_model *g)
{
	const qtk_kv *ct = qtk_kv_find(g, "tokenizer.chat_template");
	if (ct && ct->val.type == QTK_V_STR) {
		jkey(b, first, "chat_template");
		jstr(b, ct->val.v.str.s, (size_t)ct->val.v.str.len);
	}
}

/* llama.cpp's layout for NVFP4 checkpoints: `X.weight` in ggml's NVFP4 and `X.scale`, the F32
 * per-tensor multiplier it applies to the product. The weight's values are blocks x scale, so
 * the view joins the two into one nvfp4 layer (scale_type 2); the stored tensors stay as they are.
 * 1 when tensor i is such a `.scale` (its weight's entry gets the join), 0 when not a `.scale` or
 * no `X.weight` is beside it (kept as stored), or an error (exit 3) for a pair qtk cannot value. */
static int nvfp4_scale_pair(const qtk_model *g, size_t i, qtk_hfmap *m, qtk_err *err)
{
	const qtk_tensor *t = &g->tensors[i];
	size_t l = strlen(t->name);
	if (l < 7 || l > 400 || strcmp(t->name + l - 6, ".scale"))
		return 0;
	char wn[512];
	snprintf(wn, sizeof wn, "%.*s.weight", (int)(l - 6), t->name);
	const qtk_tensor *w = qtk_tensor_find(g, wn);
	if (!w)
		return 0;
	size_t wi = (size_t)(w - g->tensors);
	if (w->layout.kind != QTK_LAYOUT_PLAIN || w->layout.type != QTK_T_NVFP4)
		return qtk_err_set(err, QTK_E_DATA, g->path, -1, t->name,
				   "a per-tensor scale beside a weight that is not NVFP4 ('%.200s'): qtk applies "
				   "`.scale` tensors only to NVFP4 weights", wn);
	if (w->ndim != 2)
		return qtk_err_set(err, QTK_E_DATA, g->path, -1, t->name,
				   "per-expert NVFP4 scales (a 3-D weight) are not supported yet");
	if (t->layout.kind != QTK_LAYOUT_PLAIN || t->layout.type != QTK_T_F32 || t->ndim != 1 || t->shape[0] != 1 ||
	    t->nparts != 1 || t->parts[0].nbytes != 4)
		return qtk_err_set(err, QTK_E_DATA, g->path, -1, t->name,
				   "the per-tensor scale of an NVFP4 weight must be F32 [1]");
	if (w->shape[1] % 64)
		return qtk_err_set(err, QTK_E_DATA, g->path, -1, wn, "NVFP4 rows must be whole blocks of 64");
	if (wi >= m->n || m->e[wi].join)
		return qtk_err_set(err, QTK_E_DATA, g->path, -1, t->name, "a second scale for '%.200s'", wn);
	m->e[wi].join = i + 1;
	return 1;
}

int qtk_hfmap_gguf_to_hf(const qtk_model *g, qtk_model *meta, qtk_hfmap **mapp, qtk_err *err)
{
	*mapp = NULL;
	const qtk_kv *akv = qtk_kv_find(g, "general.architecture");
	if (!akv || akv->val.type != QTK_V_STR)
		return g_bad(err, "general.architecture", "is missing or not a string");
	const char *an = akv->val.v.str.s;
	const qtk_family *f = qtk_family_by_gguf_arch(an);
	int64_t n_expert = 0;
	bool p_exp = false;
	if (f) { /* a GGUF architecture shared by a dense and an MoE family: the expert count decides */
		char ek[128];
		snprintf(ek, sizeof ek, "%s.%s", an, f->keys->n_expert.gguf);
		int rc0 = g_int(g, ek, 0, 65536, false, &n_expert, &p_exp, err);
		if (rc0)
			return rc0;
		for (size_t i = 0; i < qtk_family_count(); i++) {
			const qtk_family *c = qtk_family_at(i);
			if (c->gguf_arch && !strcmp(c->gguf_arch, an) && ((c->flags & QTK_FAM_MOE) != 0) == (n_expert > 0)) {
				f = c;
				break;
			}
		}
		if ((f->flags & QTK_FAM_MOE) && n_expert < 1)
			return g_bad(err, ek, "is missing: a mixture-of-experts model needs its expert count");
		if (!(f->flags & QTK_FAM_MOE) && n_expert > 0)
			return g_bad(err, ek, "is set, but qtk knows no mixture-of-experts model of this architecture");
	}
	if (!f) {
		char shown[64];
		snprintf(shown, sizeof shown, "%s", an);
		char list[512];
		supported(list, sizeof list, false);
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, "general.architecture",
				   "unsupported architecture %s (supported: %s)", shown, list);
	}
	char key[128];
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", an, suffix), key)
	int64_t n_layer, n_embd, n_ff, n_head, n_head_kv = 0, n_ctx = 0, key_len = 0, rot = 0, n_vocab = 0;
	bool p_kv, p_ctx, p_kl, p_rot, p_voc, p;
	const int64_t DIM_MAX = 1 << 20;
	const qtk_family_keys *fk = f->keys;
	int rc = g_int(g, K(fk->n_layer.gguf), 1, 65536, true, &n_layer, &p, err);
	rc = rc ? rc : g_int(g, K(fk->n_embd.gguf), 1, DIM_MAX, true, &n_embd, &p, err);
	rc = rc ? rc : g_int(g, K(fk->n_ff.gguf), 1, DIM_MAX, true, &n_ff, &p, err);
	rc = rc ? rc : g_int(g, K(fk->n_head.gguf), 1, 65536, true, &n_head, &p, err);
	rc = rc ? rc : g_int(g, K(fk->n_head_kv.gguf), 1, 65536, false, &n_head_kv, &p_kv, err);
	rc = rc ? rc : g_int(g, K(fk->n_ctx.gguf), 0, 0xffffffffll, false, &n_ctx, &p_ctx, err);
	rc = rc ? rc : g_int(g, K(fk->head_dim.gguf), 2, DIM_MAX, false, &key_len, &p_kl, err);
	rc = rc ? rc : g_int(g, K(fk->rope_dim), 0, DIM_MAX, false, &rot, &p_rot, err);
	rc = rc ? rc : g_int(g, K(fk->vocab.gguf), 1, 1 << 24, false, &n_vocab, &p_voc, err);
	if (rc)
		return rc;
	if (!p_kv)
		n_head_kv = n_head;
	if (n_head % n_head_kv)
		return g_bad(err, K(fk->n_head_kv.gguf), "does not divide attention.head_count");
	if (!p_kl && n_embd % n_head)
		return g_bad(err, K(fk->n_embd.gguf), "is not divisible by attention.head_count");
	double theta = 10000.0, eps = f->default_rms_eps, factor = 0;
	bool theta_f32 = false, eps_f32 = false, factor_f32 = false;
	rc = g_num(g, K(fk->rope_theta.gguf), &theta, &theta_f32, err);
	rc = rc ? rc : g_num(g, K(fk->rms_eps.gguf), &eps, &eps_f32, err);
	const qtk_kv *rst = qtk_kv_find(g, K(fk->rope_type));
	bool linear = rst && rst->val.type == QTK_V_STR && !strcmp(rst->val.v.str.s, "linear");
	bool yarn = (f->flags & QTK_FAM_ROPE_YARN) && rst && rst->val.type == QTK_V_STR && !strcmp(rst->val.v.str.s, "yarn");
	int64_t yarn_orig = 0;
	if (linear || yarn)
		rc = rc ? rc : g_num(g, K(fk->rope_factor), &factor, &factor_f32, err);
	if (yarn) {
		bool p_yo;
		rc = rc ? rc : g_int(g, K(fk->rope_orig_ctx), 1, 0xffffffffll, true, &yarn_orig, &p_yo, err);
	}
	if (rc)
		return rc;
	size_t ntok;
	const qtk_str *toks = g_tokens(g, &ntok);
	if (!p_voc)
		n_vocab = (int64_t)ntok;
	qtk_hfmap *m = map_new(g, false);
	if (!m)
		return oom(err);
	m->fam = f;
	m->n_expert = (uint32_t)n_expert;
	bool tied = true;
	unsigned mat_type = QTK_T_MAX;
	bool mixed = false;
	for (size_t i = 0; i < m->n; i++) {
		const qtk_tensor *t = &g->tensors[i];
		hent *e = &m->e[i];
		int kind;
		char nb[512];
		/* tensors llama.cpp's converter generates: transformers computes them from config.json */
		if (!strcmp(t->name, "rope_freqs.weight") || !strncmp(t->name, "rope_factors_", 13)) {
			e->drop = true;
			continue;
		}
		int sp = nvfp4_scale_pair(g, i, m, err);
		if (sp < 0) {
			qtk_hfmap_free(m);
			return sp;
		}
		if (sp) {
			e->drop = true; /* joined to its weight */
			continue;
		}
		if (m->n_expert && qtk_family_expert_to_hf(f, t->name, 0, nb, sizeof nb) == 1) {
			if (t->ndim != 3 || t->shape[0] != (uint64_t)n_expert) {
				qtk_hfmap_free(m);
				return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name,
						   "an expert tensor must be 3-D with expert_count (%lld) experts",
						   (long long)n_expert);
			}
			e->expert = true;
			e->otype = t->layout.kind == QTK_LAYOUT_PLAIN ? t->layout.type : QTK_T_MAX;
			m->nout += (size_t)n_expert;
			if (mat_type == QTK_T_MAX && !mixed)
				mat_type = e->otype;
			else if (mat_type != e->otype)
				mixed = true;
			continue;
		}
		m->nout++;
		const qtk_name_rule *rule = qtk_family_rule(f, t->name, false);
		e->rflags = rule ? rule->flags : 0;
		if (qtk_family_map_name(f, t->name, false, nb, sizeof nb, &kind) == 1 && !(e->out = qtk_strdup(nb))) {
			qtk_hfmap_free(m);
			return oom(err);
		}
		int isr = e->out ? 0 : map_input_scale(f, t, false, e, &kind, err);
		if (isr) {
			qtk_hfmap_free(m);
			return isr;
		}
		if (!strcmp(t->name, "output.weight"))
			tied = false;
		if (!strcmp(t->name, "token_embd.weight") && !n_vocab && t->ndim == 2)
			n_vocab = (int64_t)t->shape[0];
		if (f->permute_qk && kind) {
			int64_t heads = kind == 'q' ? n_head : n_head_kv;
			uint64_t rows = t->ndim >= 1 ? t->shape[0] : 0;
			if (rows == 0 || rows % (uint64_t)(2 * heads) != 0) {
				qtk_hfmap_free(m);
				return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name,
						   "%" PRIu64 " rows cannot be split into %lld heads of even size", rows,
						   (long long)heads);
			}
			e->heads = (int)heads;
		}
		e->otype = t->layout.kind == QTK_LAYOUT_PLAIN ? t->layout.type : QTK_T_MAX;
		if (t->ndim >= 2 && !(e->rflags & QTK_RULE_F32)) { /* routers are F32 by rule */
			unsigned ty = t->layout.kind == QTK_LAYOUT_PLAIN ? t->layout.type : QTK_T_MAX;
			if (mat_type == QTK_T_MAX && !mixed)
				mat_type = ty;
			else if (mat_type != ty)
				mixed = true;
		}
	}
	/* torch_dtype: the matrices' float type; quantized or mixed: float16 */
	unsigned dtype = QTK_T_F16;
	const char *dname = "float16";
	if (!mixed && mat_type == QTK_T_F32) {
		dtype = QTK_T_F32;
		dname = "float32";
	} else if (!mixed && mat_type == QTK_T_BF16) {
		dtype = QTK_T_BF16;
		dname = "bfloat16";
	}
	bool float_mats = !mixed && (mat_type == QTK_T_F16 || mat_type == QTK_T_BF16);
	for (size_t i = 0; i < m->n; i++) {
		const qtk_tensor *t = &g->tensors[i];
		if (float_mats && (t->ndim <= 1 || (m->e[i].rflags & QTK_RULE_F32)) && t->layout.kind == QTK_LAYOUT_PLAIN &&
		    t->layout.type == QTK_T_F32)
			m->e[i].otype = dtype;
	}
	int64_t bos = g_special(g, "tokenizer.ggml.bos_token_id", ntok);
	int64_t eos = g_special(g, "tokenizer.ggml.eos_token_id", ntok);
	int64_t unk = g_special(g, "tokenizer.ggml.unknown_token_id", ntok);
	int64_t pad = g_special(g, "tokenizer.ggml.padding_token_id", ntok);
	/* Llama 3's rope_freqs: the GGUF keeps only the factors; config.json needs the parameters.
	 * Written when Llama 3.1's published ones reproduce the factors exactly, else left out
	 * with a warning. */
	bool rope3 = false;
	double r3[4] = {0, 1.0, 4.0, 8192.0};
	const qtk_tensor *rf = qtk_tensor_find(g, "rope_freqs.weight");
	if (rf && (f->flags & QTK_FAM_ROPE_LLAMA3)) {
		uint32_t dim = (uint32_t)(p_rot && rot ? rot : p_kl ? key_len : n_embd / n_head);
		uint8_t *raw = NULL;
		float *want = NULL;
		if (rf->layout.kind == QTK_LAYOUT_PLAIN && rf->layout.type == QTK_T_F32 && rf->n_params == dim / 2 &&
		    dim >= 2 && !qtk_read_part_alloc((qtk_model *)g, rf, 0, &raw) &&
		    (want = qtk_malloc((size_t)dim / 2 * sizeof *want))) {
			float mx = 0;
			for (uint32_t i = 0; i < dim / 2; i++) {
				uint32_t u = qtk_rd32(raw + 4 * i);
				float x;
				memcpy(&x, &u, 4);
				mx = x > mx ? x : mx;
			}
			r3[0] = mx;
			qtk_family_llama3_rope(theta, dim, r3[0], r3[1], r3[2], r3[3], want);
			rope3 = mx > 0;
			for (uint32_t i = 0; i < dim / 2 && rope3; i++) {
				uint32_t u;
				memcpy(&u, &want[i], 4);
				rope3 = qtk_rd32(raw + 4 * i) == u;
			}
		}
		qtk_free(raw);
		qtk_free(want);
		if (!rope3)
			snprintf(m->warn, sizeof m->warn,
				 "rope_freqs.weight is not Llama 3.1's rope scaling (factor, low/high frequency factors "
				 "1/4, context 8192): config.json gets no rope_scaling");
	}
	/* Phi-3's longrope: the factor tensors back into rope_scaling */
	float *longf[2] = {NULL, NULL};
	uint32_t nlong = 0;
	const char *long_type = "longrope";
	if ((f->flags & QTK_FAM_ROPE_LONG) && (qtk_tensor_find(g, "rope_factors_long.weight") ||
					       qtk_tensor_find(g, "rope_factors_short.weight"))) {
		static const char *const names[2] = {"rope_factors_long.weight", "rope_factors_short.weight"};
		uint32_t dim = (uint32_t)(p_rot && rot ? rot : n_embd / n_head);
		nlong = dim / 2;
		for (int k = 0; k < 2 && !rc; k++) {
			const qtk_tensor *t = qtk_tensor_find(g, names[k]);
			uint8_t *raw = NULL;
			if (!t || t->layout.kind != QTK_LAYOUT_PLAIN || t->layout.type != QTK_T_F32 || t->ndim != 1 ||
			    t->n_params != nlong || !nlong)
				rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, names[k],
						 "rope_factors_long and rope_factors_short must both be F32 [%u] (half the rope "
						 "dimensions)", nlong);
			else if (qtk_read_part_alloc((qtk_model *)g, t, 0, &raw)) {
				*err = g->err;
				rc = err->code ? err->code : QTK_E_IO;
			} else if (!(longf[k] = qtk_malloc(nlong * sizeof *longf[k])))
				rc = oom(err);
			for (uint32_t i = 0; !rc && i < nlong; i++) {
				uint32_t u = qtk_rd32(raw + 4 * i);
				memcpy(&longf[k][i], &u, 4);
				if (!isfinite(longf[k][i]) || longf[k][i] <= 0)
					rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, names[k], "factor %u is not a positive number", i);
			}
			qtk_free(raw);
		}
		/* the attention factor tells YaRN's formula from longrope's */
		const qtk_kv *af = qtk_kv_find(g, K("rope.scaling.attn_factor"));
		const qtk_kv *oc = qtk_kv_find(g, K(fk->rope_orig_ctx));
		double a = 0, o = 0;
		if (!rc && af && oc && val_num(&af->val, &a) && val_num(&oc->val, &o) && p_ctx && o > 1 && (double)n_ctx > o) {
			double scale = (double)n_ctx / o;
			float y = (float)(0.1 * log(scale) + 1.0), l = (float)sqrt(1.0 + log(scale) / log(o));
			if ((float)a == y && y != l)
				long_type = "yarn";
		}
		if (rc) {
			qtk_free(longf[0]);
			qtk_free(longf[1]);
			qtk_hfmap_free(m);
			return rc;
		}
	}
	/* config.json */
	qtk_buf b = {0};
	bool first = true;
	jkey(&b, &first, "architectures");
	qtk_buf_printf(&b, "[\n    \"%s\"\n  ]", f->hf_arch_out);
	jkey(&b, &first, "model_type");
	qtk_buf_printf(&b, "\"%s\"", f->hf_model_type);
	jkey(&b, &first, fk->n_embd.hf);
	qtk_buf_printf(&b, "%lld", (long long)n_embd);
	jkey(&b, &first, fk->n_ff.hf);
	qtk_buf_printf(&b, "%lld", (long long)n_ff);
	jkey(&b, &first, fk->n_layer.hf);
	qtk_buf_printf(&b, "%lld", (long long)n_layer);
	jkey(&b, &first, fk->n_head.hf);
	qtk_buf_printf(&b, "%lld", (long long)n_head);
	jkey(&b, &first, fk->n_head_kv.hf);
	qtk_buf_printf(&b, "%lld", (long long)n_head_kv);
	if (p_kl) { /* llama.cpp writes key_length only from config.json's head_dim */
		jkey(&b, &first, fk->head_dim.hf);
		qtk_buf_printf(&b, "%lld", (long long)key_len);
	}
	if (n_vocab) {
		jkey(&b, &first, fk->vocab.hf);
		qtk_buf_printf(&b, "%lld", (long long)n_vocab);
	}
	jkey(&b, &first, fk->rms_eps.hf);
	jnum(&b, eps, eps_f32);
	jkey(&b, &first, fk->rope_theta.hf);
	jnum(&b, theta, theta_f32);
	jkey(&b, &first, fk->n_ctx.hf);
	qtk_buf_printf(&b, "%lld", (long long)(p_ctx ? n_ctx : 2048));
	jkey(&b, &first, "tie_word_embeddings");
	qtk_buf_puts(&b, tied ? "true" : "false");
	jkey(&b, &first, f->hidden_act_key ? f->hidden_act_key : "hidden_act");
	qtk_buf_printf(&b, "\"%s\"", f->hidden_act ? f->hidden_act : "silu");
	if (f->flags & QTK_FAM_MOE) { /* the expert counts under the names the HF class reads */
		int64_t used = 0;
		bool p_used = false;
		rc = g_int(g, K(fk->n_expert_used.gguf), 1, n_expert, true, &used, &p_used, err);
		if (rc)
			goto fail;
		if (!f->gguf_keys) {
			jkey(&b, &first, fk->n_expert.hf);
			qtk_buf_printf(&b, "%lld", (long long)n_expert);
		}
		jkey(&b, &first, fk->n_expert_used.hf);
		qtk_buf_printf(&b, "%lld", (long long)used);
	}
	for (const qtk_key_spec *ks = f->gguf_keys; ks && ks->kind != QTK_KEY_END; ks++) {
		if ((ks->kind != QTK_KEY_U32 && ks->kind != QTK_KEY_F32) || (ks->opt & QTK_KS_IF_ABSENT))
			continue;
		double x;
		bool x32;
		const qtk_kv *kx = qtk_kv_find(g, K(ks->gguf));
		if (!kx)
			continue;
		if ((rc = g_num(g, K(ks->gguf), &x, &x32, err)))
			goto fail;
		jkey(&b, &first, ks->hf);
		if (ks->kind == QTK_KEY_U32)
			qtk_buf_printf(&b, "%.0f", x);
		else
			jnum(&b, x, x32);
	}
	if (f->hf_head_dim_copy && (p_kl || n_embd % n_head == 0)) {
		bool embd = f->hf_head_dim_copy_embd_layers && n_layer == f->hf_head_dim_copy_embd_layers;
		jkey(&b, &first, f->hf_head_dim_copy);
		qtk_buf_printf(&b, "%lld", (long long)(p_kl && !embd ? key_len : n_embd / n_head));
	}
	if (f->hf_swa_pattern && qtk_kv_find(g, K("attention.sliding_window"))) {
		/* llama.cpp's fixed pattern: every hf_swa_pattern-th layer attends globally */
		jkey(&b, &first, "sliding_window_pattern");
		qtk_buf_printf(&b, "%u", f->hf_swa_pattern);
		jkey(&b, &first, "layer_types");
		qtk_buf_puts(&b, "[");
		for (int64_t l = 0; l < n_layer; l++)
			qtk_buf_printf(&b, "%s\"%s_attention\"", l ? ", " : "",
				       (l + 1) % f->hf_swa_pattern ? "sliding" : "full");
		qtk_buf_puts(&b, "]");
	}
	if (nlong) {
		jkey(&b, &first, "rope_scaling");
		for (int k = 0; k < 2; k++) {
			qtk_buf_puts(&b, k ? "], \"short_factor\": [" : "{\"long_factor\": [");
			for (uint32_t i = 0; i < nlong; i++) {
				if (i)
					qtk_buf_puts(&b, ", ");
				jnum(&b, longf[k][i], true);
			}
		}
		qtk_buf_printf(&b, "], \"type\": \"%s\"}", long_type);
	}
	qtk_free(longf[0]);
	qtk_free(longf[1]);
	longf[0] = longf[1] = NULL;
	if (yarn) {
		jkey(&b, &first, "rope_scaling");
		qtk_buf_puts(&b, "{\"type\": \"yarn\", \"factor\": ");
		jnum(&b, factor, factor_f32);
		qtk_buf_printf(&b, ", \"original_max_position_embeddings\": %lld}", (long long)yarn_orig);
	}
	if (rope3) {
		jkey(&b, &first, "rope_scaling");
		qtk_buf_puts(&b, "{\"factor\": ");
		jnum(&b, r3[0], false);
		qtk_buf_puts(&b, ", \"high_freq_factor\": ");
		jnum(&b, r3[2], false);
		qtk_buf_puts(&b, ", \"low_freq_factor\": ");
		jnum(&b, r3[1], false);
		qtk_buf_printf(&b, ", \"original_max_position_embeddings\": %.0f, \"rope_type\": \"llama3\"}", r3[3]);
	}
	if (linear) {
		jkey(&b, &first, "rope_scaling");
		qtk_buf_puts(&b, "{\"type\": \"linear\", \"factor\": ");
		jnum(&b, factor, factor_f32);
		qtk_buf_puts(&b, "}");
	}
	if (bos >= 0) {
		jkey(&b, &first, "bos_token_id");
		qtk_buf_printf(&b, "%lld", (long long)bos);
	}
	if (eos >= 0) {
		jkey(&b, &first, "eos_token_id");
		qtk_buf_printf(&b, "%lld", (long long)eos);
	}
	if (pad >= 0) {
		jkey(&b, &first, "pad_token_id");
		qtk_buf_printf(&b, "%lld", (long long)pad);
	}
	jkey(&b, &first, "torch_dtype");
	qtk_buf_printf(&b, "\"%s\"", dname);
	qtk_buf_puts(&b, "\n}\n");
#undef K
	if ((rc = put_blob(meta, "config.json", &b, err)))
		goto fail;
	/* generation_config.json */
	first = true;
	jkey(&b, &first, "_from_model_config");
	qtk_buf_puts(&b, "true");
	if (bos >= 0) {
		jkey(&b, &first, "bos_token_id");
		qtk_buf_printf(&b, "%lld", (long long)bos);
	}
	if (eos >= 0) {
		jkey(&b, &first, "eos_token_id");
		qtk_buf_printf(&b, "%lld", (long long)eos);
	}
	if (pad >= 0) {
		jkey(&b, &first, "pad_token_id");
		qtk_buf_printf(&b, "%lld", (long long)pad);
	}
	qtk_buf_puts(&b, "\n}\n");
	if ((rc = put_blob(meta, "generation_config.json", &b, err)))
		goto fail;
	/* the tokenizer */
	const qtk_kv *tm = qtk_kv_find(g, "tokenizer.ggml.model");
	const char *tmodel = tm && tm->val.type == QTK_V_STR ? tm->val.v.str.s : NULL;
	bool spm = tmodel && !strcmp(tmodel, "llama") && toks;
	bool bpe = tmodel && !strcmp(tmodel, "gpt2") && toks;
	if (spm) {
		const qtk_kv *sk = qtk_kv_find(g, "tokenizer.ggml.scores");
		const qtk_kv *tk = qtk_kv_find(g, "tokenizer.ggml.token_type");
		float *scores = NULL;
		int32_t *types = NULL;
		if (sk && (sk->val.type != QTK_V_ARR || sk->val.elem != QTK_V_F32 || sk->val.n != ntok)) {
			rc = g_bad(err, "tokenizer.ggml.scores", "must be an f32 array as long as tokenizer.ggml.tokens");
			goto fail;
		}
		if (tk && (tk->val.type != QTK_V_ARR || tk->val.elem != QTK_V_I32 || tk->val.n != ntok)) {
			rc = g_bad(err, "tokenizer.ggml.token_type", "must be an i32 array as long as tokenizer.ggml.tokens");
			goto fail;
		}
		scores = sk ? qtk_malloc(ntok * sizeof *scores) : NULL;
		types = tk ? qtk_malloc(ntok * sizeof *types) : NULL;
		if ((sk && !scores) || (tk && !types)) {
			qtk_free(scores);
			qtk_free(types);
			rc = oom(err);
			goto fail;
		}
		for (size_t i = 0; i < ntok; i++) {
			if (scores) {
				uint32_t u = qtk_rd32((const uint8_t *)sk->val.arr + 4 * i);
				memcpy(&scores[i], &u, 4);
			}
			if (types)
				types[i] = (int32_t)qtk_rd32((const uint8_t *)tk->val.arr + 4 * i);
		}
		int asp = g_bool(g, "tokenizer.ggml.add_space_prefix");
		int rew = g_bool(g, "tokenizer.ggml.remove_extra_whitespaces");
		const qtk_kv *cm = qtk_kv_find(g, "tokenizer.ggml.precompiled_charsmap");
		qtk_spm_build_opts o = {
			.model_type = 2, .unk_id = unk >= 0 ? unk : -1, .bos_id = bos, .eos_id = eos, .pad_id = pad,
			.add_dummy_prefix = asp != 0, .remove_extra_whitespaces = rew == 1,
			.charsmap = cm && cm->val.type == QTK_V_ARR && (cm->val.elem == QTK_V_U8 || cm->val.elem == QTK_V_I8)
					    ? cm->val.arr : NULL,
			.charsmap_len = cm && cm->val.type == QTK_V_ARR ? (size_t)cm->val.n : 0,
		};
		if (o.unk_id < 0)
			for (size_t i = 0; types && i < ntok; i++)
				if (types[i] == SPM_UNKNOWN) {
					o.unk_id = (int64_t)i;
					break;
				}
		unk = o.unk_id; /* for tokenizer_config.json: the UNKNOWN piece when the GGUF names none */
		qtk_spm_model sp;
		rc = qtk_spm_build(&sp, ntok, toks, scores, types, &o, err);
		qtk_free(scores);
		if (!rc) {
			rc = qtk_spm_write(&sp, &b);
			qtk_spm_free(&sp);
			if (rc) {
				qtk_buf_free(&b);
				rc = oom(err);
			} else
				rc = put_blob(meta, "tokenizer.model", &b, err);
		}
		if (rc) {
			qtk_free(types);
			goto fail;
		}
		/* tokenizer_config.json */
		first = true;
		int ab = g_bool(g, "tokenizer.ggml.add_bos_token"), ae = g_bool(g, "tokenizer.ggml.add_eos_token");
		if (ab >= 0) {
			jkey(&b, &first, "add_bos_token");
			qtk_buf_puts(&b, ab ? "true" : "false");
		}
		if (ae >= 0) {
			jkey(&b, &first, "add_eos_token");
			qtk_buf_puts(&b, ae ? "true" : "false");
		}
		bool any_ud = false;
		for (size_t i = 0; types && i < ntok; i++)
			any_ud |= types[i] == SPM_USER_DEFINED;
		if (any_ud) {
			jkey(&b, &first, "added_tokens_decoder");
			qtk_buf_puts(&b, "{");
			bool f2 = true;
			for (size_t i = 0; i < ntok; i++) {
				if (types[i] != SPM_USER_DEFINED)
					continue;
				qtk_buf_printf(&b, "%s\n    \"%zu\": {\"content\": ", f2 ? "" : ",", i);
				jstr(&b, toks[i].s, (size_t)toks[i].len);
				qtk_buf_puts(&b, ", \"lstrip\": false, \"normalized\": false, \"rstrip\": false, "
						 "\"single_word\": false, \"special\": false}");
				f2 = false;
			}
			qtk_buf_puts(&b, "\n  }");
		}
		qtk_free(types);
		jtok_specials(&b, &first, toks, bos, eos, unk, pad);
		jchat_template(&b, &first, g);
		jkey(&b, &first, "clean_up_tokenization_spaces");
		qtk_buf_puts(&b, "false");
		jkey(&b, &first, "legacy");
		qtk_buf_puts(&b, "true");
		jkey(&b, &first, "model_max_length");
		qtk_buf_printf(&b, "%lld", (long long)(p_ctx ? n_ctx : 2048));
		jkey(&b, &first, "sp_model_kwargs");
		qtk_buf_puts(&b, "{}");
		jkey(&b, &first, "tokenizer_class");
		qtk_buf_printf(&b, "\"%s\"", f->spm_class);
		qtk_buf_puts(&b, "\n}\n");
		if ((rc = put_blob(meta, "tokenizer_config.json", &b, err)))
			goto fail;
	} else if (bpe) {
		if ((rc = qtk_bpe_gguf_tokenizer_json(g, &b, err))) {
			qtk_buf_free(&b);
			goto fail;
		}
		if ((rc = put_blob(meta, "tokenizer.json", &b, err)))
			goto fail;
		first = true;
		int ab = g_bool(g, "tokenizer.ggml.add_bos_token");
		if (ab >= 0) {
			jkey(&b, &first, "add_bos_token");
			qtk_buf_puts(&b, ab ? "true" : "false");
		}
		jtok_specials(&b, &first, toks, bos, eos, unk, pad);
		jchat_template(&b, &first, g);
		jkey(&b, &first, "clean_up_tokenization_spaces");
		qtk_buf_puts(&b, "false");
		jkey(&b, &first, "model_max_length");
		qtk_buf_printf(&b, "%lld", (long long)(p_ctx ? n_ctx : 2048));
		jkey(&b, &first, "tokenizer_class");
		qtk_buf_printf(&b, "\"%s\"", f->bpe_class);
		qtk_buf_puts(&b, "\n}\n");
		if ((rc = put_blob(meta, "tokenizer_config.json", &b, err)))
			goto fail;
	} else {
		snprintf(m->warn, sizeof m->warn, "the GGUF has no %svocabulary: no tokenizer files written",
			 tmodel ? "supported " : "");
	}
	if (spm || bpe) {
		first = true;
		jtok_specials(&b, &first, toks, bos, eos, unk, pad);
		qtk_buf_puts(&b, first ? "{}\n" : "\n}\n");
		if ((rc = put_blob(meta, "special_tokens_map.json", &b, err)))
			goto fail;
	}
	*mapp = m;
	return 0;
fail:
	qtk_free(longf[0]);
	qtk_free(longf[1]);
	qtk_buf_free(&b);
	qtk_hfmap_free(m);
	return rc;
}
