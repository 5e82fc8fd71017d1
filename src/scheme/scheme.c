/* scheme.c - the table of packed schemes, and what every scheme shares: lookup, the one
 * validation of a packed tensor description, shapes and bytes of its parts, dispatch to the
 * codecs, exact transcodes. */
#include "scheme.h"
#include "fp16.h"
#include "qgroups.h"
#include "internal.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

extern const qtk_scheme qtk_scheme_awq;
extern const qtk_scheme qtk_scheme_gptq;
extern const qtk_scheme qtk_scheme_mlx;
extern const qtk_scheme qtk_scheme_ct_int, qtk_scheme_fp8, qtk_scheme_nvfp4; /* ct.c */
extern const qtk_scheme qtk_scheme_bnb4;  /* bnb.c */
extern const qtk_scheme qtk_scheme_bnb8;  /* bnb8.c (after bnb4: both are "bitsandbytes") */
extern const qtk_scheme qtk_scheme_mxfp4; /* mxfp4.c */

static const qtk_scheme *const schemes[] = {&qtk_scheme_awq,    &qtk_scheme_gptq, &qtk_scheme_mlx,
					    &qtk_scheme_ct_int, &qtk_scheme_fp8,  &qtk_scheme_nvfp4,
					    &qtk_scheme_bnb4,   &qtk_scheme_mxfp4, &qtk_scheme_bnb8};

#define NSCHEMES (sizeof schemes / sizeof *schemes)

size_t qtk_scheme_count(void) { return NSCHEMES; }

const qtk_scheme *qtk_scheme_at(size_t i) { return i < NSCHEMES ? schemes[i] : NULL; }

const qtk_scheme *qtk_scheme_by_kind(qtk_layout_kind kind)
{
	for (size_t i = 0; i < NSCHEMES; i++)
		if (schemes[i]->kind == kind)
			return schemes[i];
	return NULL;
}

const qtk_scheme *qtk_scheme_by_name(const char *name)
{
	for (size_t i = 0; name && i < NSCHEMES; i++)
		if (!strcmp(schemes[i]->name, name))
			return schemes[i];
	return NULL;
}

const qtk_scheme *qtk_scheme_by_method(const char *quant_method)
{
	for (size_t i = 0; quant_method && i < NSCHEMES; i++)
		if (!qtk_strcasecmp(schemes[i]->quant_method, quant_method))
			return schemes[i];
	return NULL;
}

/* ---- packed parts without their config ------------------------------------------------------ */

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The checkpoint name of role r of the module `prefix` (suffixes starting with '_' join without
 * a dot: gpt-oss's <prefix>_blocks). */
static bool form_name(const qtk_scheme *s, const char *prefix, size_t plen, const char *r, char *out, size_t n)
{
	const char *suf = s->suffix ? s->suffix(r) : r;
	int k = snprintf(out, n, "%.*s%s%s", (int)plen, prefix, suf[0] == '_' ? "" : ".", suf);
	return k > 0 && (size_t)k < n;
}

/* The forms of s: its own list, or its required parts. */
static int scheme_forms(const qtk_scheme *s, qtk_scheme_form *buf)
{
	if (s->forms) {
		for (int i = 0; i < s->nforms; i++)
			buf[i] = s->forms[i];
		return s->nforms;
	}
	memset(buf, 0, sizeof *buf);
	int k = 0;
	for (int p = 0; p < s->nparts && k < 3; p++)
		if (!s->parts[p].optional)
			buf->role[k++] = s->parts[p].role;
	buf->type = s->nparts ? s->parts[0].type : 0;
	return k ? 1 : 0;
}

static int form_roles(const qtk_scheme_form *f)
{
	int n = 0;
	while (n < 4 && f->role[n])
		n++;
	return n;
}

/* Does plain tensor t head a module of form f of s (all of f's parts present)? */
static bool form_match(const qtk_scheme *s, const qtk_scheme_form *f, const qtk_tensor *t, const char *const *names,
		       size_t n)
{
	if (t->layout.kind != QTK_LAYOUT_PLAIN || t->nparts != 1 || (f->type && t->parts[0].type != f->type))
		return false;
	const char *first = s->suffix ? s->suffix(f->role[0]) : f->role[0];
	size_t tl = strlen(t->name), fl = strlen(first), join = first[0] == '_' ? 0 : 1;
	if (tl <= fl + join || strcmp(t->name + tl - fl, first) || (join && t->name[tl - fl - 1] != '.'))
		return false;
	size_t plen = tl - fl - join;
	for (int r = 1; r < 4 && f->role[r]; r++) {
		char nm[QTK_CAP_NAME + 64];
		const char *key = nm;
		if (!form_name(s, t->name, plen, f->role[r], nm, sizeof nm) ||
		    !bsearch(&key, names, n, sizeof *names, cmp_cstr))
			return false;
	}
	return true;
}

int qtk_scheme_unexplained(const qtk_model *m, qtk_err *err)
{
	if (!m->ntensors)
		return 0;
	const char **names = qtk_malloc(m->ntensors * sizeof *names);
	if (!names)
		return qtk_err_set(err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	for (size_t i = 0; i < m->ntensors; i++)
		names[i] = m->tensors[i].name;
	qsort(names, m->ntensors, sizeof *names, cmp_cstr);
	const qtk_tensor *first = NULL;
	size_t modules = 0;
	bool hit[NSCHEMES] = {0};
	const qtk_scheme_form *hform[NSCHEMES] = {0};
	qtk_scheme_form forms[NSCHEMES][4];
	int nf[NSCHEMES];
	for (size_t k = 0; k < NSCHEMES; k++)
		nf[k] = scheme_forms(schemes[k], forms[k]);
	for (size_t i = 0; i < m->ntensors; i++) {
		const qtk_tensor *t = &m->tensors[i];
		bool any = false;
		for (size_t k = 0; k < NSCHEMES; k++)
			for (int f = 0; f < nf[k]; f++)
				if (form_match(schemes[k], &forms[k][f], t, names, m->ntensors)) {
					any = true;
					if (!first || first == t) { /* the schemes the first module looks like */
						hit[k] = true;
						if (!hform[k] || form_roles(&forms[k][f]) > form_roles(hform[k]))
							hform[k] = &forms[k][f];
					}
				}
		if (any) {
			modules++;
			if (!first)
				first = t;
		}
	}
	qtk_free(names);
	if (!first)
		return 0;
	/* a form whose parts are all in another's is not what the module is (compressed-tensors'
	 * NVFP4 parts hold MXFP4's weight_packed and weight_scale) */
	int most = 0;
	for (size_t k = 0; k < NSCHEMES; k++)
		if (hit[k] && form_roles(hform[k]) > most)
			most = form_roles(hform[k]);
	for (size_t k = 0; k < NSCHEMES; k++)
		hit[k] = hit[k] && form_roles(hform[k]) == most;
	/* "AWQ or GPTQ (qweight, qzeros, scales)" and the configs that would explain them */
	char what[256] = "", parts[160] = "", hints[768] = "";
	size_t wl = 0, pl = 0, hl = 0, nh = 0;
	for (size_t k = 0; k < NSCHEMES; k++) {
		if (!hit[k])
			continue;
		const qtk_scheme *s = schemes[k];
		size_t left = 0;
		for (size_t j = k + 1; j < NSCHEMES; j++)
			left += hit[j];
		wl += (size_t)snprintf(what + wl, wl < sizeof what ? sizeof what - wl : 0, "%s%s", nh ? (left ? ", " : " or ") : "",
				       s->title);
		if (wl >= sizeof what)
			wl = sizeof what - 1;
		if (!pl)
			for (int r = 0; r < 4 && hform[k]->role[r]; r++) {
				const char *suf = s->suffix ? s->suffix(hform[k]->role[r]) : hform[k]->role[r];
				pl += (size_t)snprintf(parts + pl, pl < sizeof parts ? sizeof parts - pl : 0, "%s%s", r ? ", " : "", suf);
				if (pl >= sizeof parts)
					pl = sizeof parts - 1;
			}
		if (s->config_hint) {
			hl += (size_t)snprintf(hints + hl, hl < sizeof hints ? sizeof hints - hl : 0, "%s%s", nh ? " or " : "",
					       s->config_hint);
			if (hl >= sizeof hints)
				hl = sizeof hints - 1;
		}
		nh++;
	}
	char subject[QTK_CAP_NAME + 16];
	snprintf(subject, sizeof subject, "tensor '%s'", first->name);
	return qtk_err_set(err, QTK_E_DATA, m->path, -1, subject,
			   "%zu module%s look%s like %s (%s) but no quantization config explains %s, and packed parts are "
			   "not weights: put the file in the directory of its config.json, or add to config.json %s",
			   modules, modules == 1 ? "" : "s", modules == 1 ? "s" : "", what, parts,
			   modules == 1 ? "it" : "them", hints);
}

const qtk_scheme *qtk_scheme_of(const qtk_tensor *t) { return qtk_scheme_by_kind(t->layout.kind); }

const char *qtk_scheme_part_suffix(const qtk_tensor *t, int p)
{
	const qtk_scheme *s = qtk_scheme_of(t);
	return s && s->suffix ? s->suffix(t->parts[p].role) : t->parts[p].role;
}

int qtk_tensor_part_index(const qtk_tensor *t, const char *role)
{
	for (int k = 0; k < t->nparts; k++)
		if (!strncmp(t->parts[k].role, role, sizeof t->parts[k].role))
			return k;
	return -1;
}

int qtk_int4_runs_begin(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, uint8_t *w,
			qtk_int4_runs *r)
{
	const qtk_layout *l = &t->layout;
	if (l->bits != 4 || l->act_order || t->ndim != 2 || !l->group_size || l->group_size % 32 || t->shape[1] % l->group_size)
		return -1;
	const uint64_t out = t->shape[0], in = t->shape[1], g = l->group_size, ng = in / g, runs = in / 32;
	const int qi = qtk_tensor_part_index(t, "qweight"), zi = qtk_tensor_part_index(t, "qzeros"),
		  si = qtk_tensor_part_index(t, "scales");
	if (qi < 0 || zi < 0 || si < 0 || t->parts[si].type != QTK_T_F16 || o0 > out || n > out - o0 || out % 8 ||
	    o0 % 8 || n % 8 || t->parts[qi].nbytes != in * out / 2 || t->parts[zi].nbytes != ng * out / 2 ||
	    t->parts[si].nbytes != ng * out * 2)
		return -1;
	if (!n) /* a probe: the layout qualifies */
		return 0;
	const uint8_t *sc = pp[si];
	const size_t rb = 4 + 32;
	for (uint64_t k = 0; k < n; k++)
		for (uint64_t u = 0; u < runs; u++)
			qtk_wr32(w + (k * runs + u) * rb, qtk_f32_bits(qtk_h2f(qtk_rd16(sc + 2 * ((u * 32 / g) * out + o0 + k)))));
	*r = (qtk_int4_runs){pp[qi], pp[zi], out, in, g, ng, runs};
	return 1;
}

int qtk_scheme_part_index(const qtk_scheme *s, const char *role)
{
	for (int k = 0; s && k < s->nparts; k++)
		if (!strcmp(s->parts[k].role, role))
			return k;
	return -1;
}

/* "2, 3, 4<last>8" */
static void bits_list(const qtk_scheme *s, const char *last, char *buf, size_t n)
{
	size_t at = 0;
	int cnt = 0, total = 0;
	buf[0] = 0;
	for (unsigned b = 1; b < 32; b++)
		total += (int)((s->bits_mask >> b) & 1u);
	for (unsigned b = 1; b < 32 && at < n; b++) {
		if (!((s->bits_mask >> b) & 1u))
			continue;
		const char *sep = !cnt ? "" : cnt + 1 == total ? last : ", ";
		at += (size_t)snprintf(buf + at, n - at, "%s%u", sep, b);
		cnt++;
	}
}

void qtk_scheme_bits_text(const qtk_scheme *s, char *buf, size_t n) { bits_list(s, " or ", buf, n); }

static int required_parts(const qtk_scheme *s)
{
	int n = 0;
	while (n < s->nparts && !s->parts[n].optional)
		n++;
	return n;
}

int qtk_scheme_dims_of(const qtk_layout *l, uint64_t out, uint64_t in, qtk_scheme_dims *d, char *why, size_t wn)
{
	uint64_t g = l->group_size;
	/* whole groups only (scheme.h) */
	if (g == 0 || in == 0 || in % g)
		return qtk_why(why, wn, "group_size %u does not divide in_features %llu", l->group_size,
			   (unsigned long long)in);
	if (out == 0 || out > (1ull << 40) || in > (1ull << 40))
		return qtk_why(why, wn, "shape [%llu, %llu] out of range", (unsigned long long)out, (unsigned long long)in);
	*d = (qtk_scheme_dims){.out = out, .in = in, .bits = l->bits, .group = g, .ngroups = in / g};
	return 0;
}

/* Bits, group, ranges and the scheme's own rules of t's layout (not its parts). */
static int check_layout(const qtk_scheme *s, const qtk_tensor *t, qtk_scheme_dims *d, char *why, size_t wn)
{
	const qtk_layout *l = &t->layout;
	if (t->ndim != 2)
		return qtk_why(why, wn, "shape: %s layout needs 2 dimensions [out, in], not %d", s->quant_method, t->ndim);
	if (l->bits >= 32 || !((s->bits_mask >> l->bits) & 1u)) {
		char list[64];
		bits_list(s, ", ", list, sizeof list);
		if (!(s->bits_mask & (s->bits_mask - 1u)))
			return qtk_why(why, wn, "bits %u: %s packing holds %s-bit codes only", l->bits, s->title, list);
		return qtk_why(why, wn, "bits %u is not one of %s", l->bits, list);
	}
	int rc = qtk_scheme_dims_of(l, t->shape[0], t->shape[1], d, why, wn);
	return rc ? rc : s->check_layout(t, why, wn);
}

static int part_mismatch(const qtk_part *want, const qtk_part *q, char *why, size_t wn)
{
	if (q->type != want->type)
		return qtk_why(why, wn, "part '%.8s' type %s, expected %s", want->role,
			       qtk_type(q->type) ? qtk_type(q->type)->upper : "?", qtk_type(want->type)->upper);
	bool same = q->ndim == want->ndim;
	for (int i = 0; same && i < want->ndim; i++)
		same = q->shape[i] == want->shape[i];
	if (!same) {
		char got[100], exp[100];
		qtk_shape_text(got, sizeof got, q->ndim < 0 || q->ndim > QTK_MAX_DIMS ? 0 : q->ndim, q->shape);
		qtk_shape_text(exp, sizeof exp, want->ndim, want->shape);
		return qtk_why(why, wn, "part '%.8s' shape %.99s does not match the layout: expected %.99s", want->role, got,
			       exp);
	}
	return 0;
}

/* The parts of t against the scheme's list for its layout, in order; absent optional parts are
 * skipped. */
static int check_specs(const qtk_scheme *s, const qtk_tensor *t, const qtk_scheme_dims *d, int *bad_part, char *why,
		       size_t wn)
{
	qtk_part want[QTK_MAX_PARTS];
	bool opt[QTK_MAX_PARTS] = {false};
	memset(want, 0, sizeof want);
	int n = s->part_specs(&t->layout, d, want, opt), j = 0;
	if (t->nparts < 1 || t->nparts > QTK_MAX_PARTS)
		return qtk_why(why, wn, "nparts %d", t->nparts);
	for (int k = 0; k < n; k++) {
		bool match = j < t->nparts && !strncmp(t->parts[j].role, want[k].role, sizeof want[k].role);
		if (!match) {
			if (opt[k])
				continue;
			*bad_part = j < t->nparts ? j : -1;
			return qtk_why(why, wn, "%s layout needs a part '%.8s'%s", s->name, want[k].role,
				       j < t->nparts ? " here" : "");
		}
		*bad_part = j;
		int rc = part_mismatch(&want[k], &t->parts[j], why, wn);
		if (rc)
			return rc;
		j++;
	}
	if (j != t->nparts) {
		*bad_part = j;
		return qtk_why(why, wn, "part %d '%.8s' is not a part of a %s layout", j, t->parts[j].role, s->name);
	}
	*bad_part = -1;
	return 0;
}

static bool expert_of(const qtk_tensor *t, const void *const *parts, uint64_t e, qtk_tensor *sub, const void **sp);

int qtk_scheme_check(const qtk_tensor *t, int *bad_part, char *why, size_t wn)
{
	const qtk_scheme *s = qtk_scheme_of(t);
	*bad_part = -1;
	if (!s)
		return qtk_why(why, wn, "layout kind %u is not a packed scheme", (unsigned)t->layout.kind);
	if (t->ndim == 3 && s->part_specs) { /* stacked experts (gpt-oss): every part stacked alike */
		const void *none[QTK_MAX_PARTS] = {NULL}, *sp[QTK_MAX_PARTS];
		qtk_tensor sub = QTK_TENSOR_LOCAL;
		if (t->nparts < 1 || !expert_of(t, none, 0, &sub, sp))
			return qtk_why(why, wn, "shape: the parts of a 3-D %s tensor must be stacked along its first dimension (%llu)",
				       s->name, (unsigned long long)t->shape[0]);
		return qtk_scheme_check(&sub, bad_part, why, wn);
	}
	qtk_scheme_dims d;
	int rc = check_layout(s, t, &d, why, wn);
	if (rc)
		return rc;
	if (s->part_specs)
		return check_specs(s, t, &d, bad_part, why, wn);
	int req = required_parts(s);
	if (t->nparts < req || t->nparts > s->nparts) {
		char roles[128];
		size_t at = 0;
		for (int k = 0; k < s->nparts && at < sizeof roles; k++)
			at += (size_t)snprintf(roles + at, sizeof roles - at, "%s%s%s", k == req ? "[" : "", k ? ", " : "",
					       s->parts[k].role);
		if (req < s->nparts && at < sizeof roles)
			snprintf(roles + at, sizeof roles - at, "]");
		if (req == s->nparts)
			return qtk_why(why, wn, "nparts %d, %s has %d (%s)", t->nparts, s->quant_method, req, roles);
		return qtk_why(why, wn, "nparts %d, %s has %d or %d (%s)", t->nparts, s->quant_method, req, s->nparts, roles);
	}
	if (t->layout.act_order && t->nparts == req)
		return qtk_why(why, wn, "act_order set but the tensor has no %s part", s->parts[req].role);
	for (int k = 0; k < t->nparts; k++) {
		const qtk_scheme_part *sp = &s->parts[k];
		const qtk_part *q = &t->parts[k];
		*bad_part = k;
		if (strncmp(q->role, sp->role, sizeof q->role) != 0)
			return qtk_why(why, wn, "part %d role '%.8s', expected '%s'", k, q->role, sp->role);
		unsigned want_type = s->part_type ? s->part_type(t, k) : sp->type;
		if (q->type != want_type)
			return qtk_why(why, wn, "part '%s' type %s, expected %s", sp->role,
				   qtk_type(q->type) ? qtk_type(q->type)->upper : "?", qtk_type(want_type)->upper);
		uint64_t want[QTK_MAX_DIMS] = {0};
		sp->shape(&d, want);
		bool same = q->ndim == sp->ndim;
		for (int i = 0; same && i < sp->ndim; i++)
			same = q->shape[i] == want[i];
		if (!same) {
			char got[100], exp[100];
			qtk_shape_text(got, sizeof got, q->ndim < 0 || q->ndim > QTK_MAX_DIMS ? 0 : q->ndim, q->shape);
			qtk_shape_text(exp, sizeof exp, sp->ndim, want);
			return qtk_why(why, wn, "part '%.8s' shape %.99s does not match the layout: expected %.99s", sp->role, got,
				   exp);
		}
	}
	*bad_part = -1;
	return 0;
}

int qtk_scheme_describe(qtk_tensor *t, const qtk_layout *l, uint64_t out, uint64_t in, bool with_optional,
			char *why, size_t wn)
{
	const qtk_scheme *s = qtk_scheme_by_kind(l->kind);
	if (!s)
		return qtk_why(why, wn, "layout kind %u is not a packed scheme", (unsigned)l->kind);
	qtk_scheme_dims d;
	int rc = qtk_scheme_dims_of(l, out, in, &d, why, wn);
	if (rc)
		return rc;
	t->ndim = 2;
	memset(t->shape, 0, sizeof t->shape);
	t->shape[0] = out;
	t->shape[1] = in;
	t->layout = *l;
	if (t->room < QTK_MAX_PARTS) /* a scheme's parts may be up to that many */
		return qtk_why(why, wn, "no room for the parts of a %s tensor", s->name);
	t->nparts = with_optional ? s->nparts : required_parts(s);
	memset(t->parts, 0, QTK_MAX_PARTS * sizeof *t->parts);
	if (s->part_specs) {
		qtk_part want[QTK_MAX_PARTS];
		bool opt[QTK_MAX_PARTS] = {false};
		memset(want, 0, sizeof want);
		int n = s->part_specs(l, &d, want, opt);
		t->nparts = 0;
		for (int k = 0; k < n; k++)
			if (!opt[k] || with_optional)
				t->parts[t->nparts++] = want[k];
	}
	for (int k = 0; k < t->nparts; k++) {
		if (s->part_specs) {
			qtk_part *p = &t->parts[k];
			uint64_t n = 1;
			for (int i = 0; i < p->ndim; i++)
				if (!qtk_mul_u64(n, p->shape[i], &n))
					return qtk_why(why, wn, "part '%.8s' is too large", p->role);
			if (qtk_type_nbytes(p->type, n, &p->nbytes))
				return qtk_why(why, wn, "part '%.8s' is too large", p->role);
			continue;
		}
		const qtk_scheme_part *sp = &s->parts[k];
		qtk_part *p = &t->parts[k];
		snprintf(p->role, sizeof p->role, "%s", sp->role);
		p->type = sp->type;
		p->ndim = sp->ndim;
		sp->shape(&d, p->shape);
		uint64_t n = 1;
		for (int i = 0; i < sp->ndim; i++)
			if (!qtk_mul_u64(n, p->shape[i], &n))
				return qtk_why(why, wn, "part '%s' is too large", sp->role);
		if (qtk_type_nbytes(sp->type, n, &p->nbytes))
			return qtk_why(why, wn, "part '%s' is too large", sp->role);
	}
	qtk_tensor_finish(t);
	int part;
	return qtk_scheme_check(t, &part, why, wn);
}

int qtk_scheme_bytes(const qtk_layout *l, uint64_t out, uint64_t in, bool with_optional,
		     uint64_t bytes[QTK_MAX_PARTS], uint64_t *total)
{
	qtk_tensor t = QTK_TENSOR_LOCAL;
	char why[200];
	int rc = qtk_scheme_describe(&t, l, out, in, with_optional, why, sizeof why);
	if (rc)
		return rc;
	*total = 0;
	for (int k = 0; k < QTK_MAX_PARTS; k++) {
		if (bytes)
			bytes[k] = k < t.nparts ? t.parts[k].nbytes : 0;
		if (k < t.nparts && !qtk_add_u64(*total, t.parts[k].nbytes, total))
			return QTK_E_DATA;
	}
	return 0;
}

/* The codec hooks trust that t describes its parts; these cheap checks keep a description that
 * never went through qtk_scheme_check from dividing by zero or running past the group count. */
static bool dims_ok(const qtk_tensor *t)
{
	const qtk_scheme *s = qtk_scheme_of(t);
	return t->ndim == 2 && t->shape[0] <= UINT32_MAX && t->shape[1] <= UINT32_MAX && t->layout.group_size &&
	       t->shape[1] % t->layout.group_size == 0 && t->nparts >= (s && s->part_specs ? 2 : 3);
}

static bool rows_ok(const qtk_scheme *s, const qtk_tensor *t, uint64_t o0, uint64_t n)
{
	return s && dims_ok(t) && n && o0 % s->row_align == 0 && o0 <= t->shape[0] && n <= t->shape[0] - o0 &&
	       (n % s->row_align == 0 || o0 + n == t->shape[0]) && t->shape[0] <= UINT32_MAX &&
	       t->shape[1] <= UINT32_MAX;
}

/* A 3-D packed tensor is a stack of 2-D ones along its first dimension (the experts of an MoE
 * layer, each part stacked the same way): expert e's description into *sub and its part
 * pointers into sp. False when t is no such stack. */
static bool expert_of(const qtk_tensor *t, const void *const *parts, uint64_t e, qtk_tensor *sub, const void **sp)
{
	uint64_t ne = t->ndim == 3 ? t->shape[0] : 0;
	if (!ne || e >= ne || t->nparts > QTK_MAX_PARTS)
		return false;
	if (qtk_tensor_copy(sub, t))
		return false;
	sub->view = NULL;
	sub->ndim = 2;
	sub->shape[0] = t->shape[1];
	sub->shape[1] = t->shape[2];
	sub->shape[2] = 0;
	for (int p = 0; p < t->nparts; p++) {
		qtk_part *q = &sub->parts[p];
		if (q->ndim < 2 || q->shape[0] != ne || q->nbytes % ne)
			return false;
		memmove(q->shape, q->shape + 1, (size_t)(q->ndim - 1) * sizeof *q->shape);
		q->shape[q->ndim - 1] = 0;
		q->ndim--;
		q->nbytes /= ne;
		sp[p] = parts[p] ? (const uint8_t *)parts[p] + e * q->nbytes : NULL;
	}
	qtk_tensor_finish(sub);
	return true;
}

int qtk_scheme_decode_rows(const qtk_tensor *t, const void *const *parts, uint64_t o0, uint64_t n, float *dst)
{
	const qtk_scheme *s = qtk_scheme_of(t);
	if (s && t->ndim == 3) { /* stacked experts: rows run through them in order */
		uint64_t out = t->shape[1], total;
		if (!out || !qtk_mul_u64(out, t->shape[0], &total) || o0 > total || n > total - o0)
			return -1;
		while (n) {
			uint64_t e = o0 / out, a = o0 % out, k = out - a < n ? out - a : n;
			qtk_tensor sub = QTK_TENSOR_LOCAL;
			const void *sp[QTK_MAX_PARTS] = {NULL};
			if (!expert_of(t, parts, e, &sub, sp) || !rows_ok(s, &sub, a, k) ||
			    s->decode_rows(&sub, sp, a, k, dst))
				return -1;
			dst += k * t->shape[2];
			o0 += k;
			n -= k;
		}
		return 0;
	}
	return rows_ok(s, t, o0, n) ? s->decode_rows(t, parts, o0, n, dst) : -1;
}

/* Part k of a window: rows o0 .. o0+n-1 of 2-D packed t keep, of each part, the stretch of the
 * one dimension that grows with the output features (or the whole part when none does). The
 * stretch must be proportional to the rows and start on a whole element; anything else (a
 * rounded-up count, a dimension that is neither) leaves the window undefined. */
static int window_part(const qtk_part *full, const qtk_part *want, uint64_t out, uint64_t o0, uint64_t n,
		       qtk_part *q, qtk_scheme_slice *sl)
{
	uint64_t numel = 1;
	for (int i = 0; i < full->ndim; i++)
		if (!qtk_mul_u64(numel, full->shape[i], &numel))
			return -1;
	if (!numel || full->nbytes % numel || want->ndim != full->ndim)
		return -1;
	uint64_t es = full->nbytes / numel;
	int k = -1;
	for (int i = 0; i < full->ndim; i++)
		if (want->shape[i] != full->shape[i]) {
			if (k >= 0)
				return -1;
			k = i;
		}
	*q = *full;
	if (k < 0) { /* the same whatever the rows: read whole */
		*sl = (qtk_scheme_slice){0, full->nbytes, full->nbytes, 1};
		return 0;
	}
	uint64_t a, b;
	if (!qtk_mul_u64(want->shape[k], out, &a) || !qtk_mul_u64(full->shape[k], n, &b) || a != b ||
	    !qtk_mul_u64(full->shape[k], o0, &a) || a % out)
		return -1;
	uint64_t start = a / out, inner = es, outer = 1;
	for (int i = k + 1; i < full->ndim; i++)
		inner *= full->shape[i];
	for (int i = 0; i < k; i++)
		outer *= full->shape[i];
	q->shape[k] = want->shape[k];
	q->nbytes = outer * want->shape[k] * inner;
	q->offset = 0;
	*sl = (qtk_scheme_slice){start * inner, want->shape[k] * inner, full->shape[k] * inner, outer};
	return 0;
}

int qtk_scheme_window(const qtk_tensor *t, uint64_t o0, uint64_t n, qtk_tensor *sub, qtk_scheme_slice *sl)
{
	const qtk_scheme *s = qtk_scheme_of(t);
	qtk_tensor whole = QTK_TENSOR_LOCAL;
	uint64_t base = 0; /* 3-D: bytes before the expert, per part */
	if (!s || t->nparts > QTK_MAX_PARTS)
		return -1;
	const qtk_tensor *w = t;
	if (t->ndim == 3) { /* one expert of a stack: its rows only */
		uint64_t out = t->shape[1];
		const void *none[QTK_MAX_PARTS] = {NULL}, *sp[QTK_MAX_PARTS];
		if (!out || o0 / out != (o0 + n - 1) / out || !expert_of(t, none, o0 / out, &whole, sp))
			return -1;
		base = o0 / out;
		o0 %= out;
		w = &whole;
	}
	if (w->ndim != 2 || !rows_ok(s, w, o0, n))
		return -1;
	qtk_tensor d = QTK_TENSOR_LOCAL;
	char why[160];
	if (qtk_scheme_describe(&d, &w->layout, n, w->shape[1], true, why, sizeof why))
		return -1;
	if (qtk_tensor_copy(sub, w))
		return -1;
	sub->view = NULL;
	sub->shape[0] = n;
	for (int p = 0; p < w->nparts; p++) {
		const qtk_part *want = NULL;
		for (int k = 0; k < d.nparts && !want; k++)
			if (!strcmp(d.parts[k].role, w->parts[p].role))
				want = &d.parts[k];
		if (!want || window_part(&w->parts[p], want, w->shape[0], o0, n, &sub->parts[p], &sl[p]))
			return -1;
		sl[p].off += base * w->parts[p].nbytes;
	}
	qtk_tensor_finish(sub);
	return 0;
}

void qtk_scheme_window_finish(const qtk_tensor *o, void *const *parts)
{
	for (int k = 0; k < o->nparts && o->ndim == 2; k++)
		if (!strcmp(o->parts[k].role, "shape") && o->parts[k].type == QTK_T_I64 && o->parts[k].nbytes == 16) {
			qtk_wr64(parts[k], o->shape[0]);
			qtk_wr64((uint8_t *)parts[k] + 8, o->shape[1]);
		}
}

int qtk_scheme_to_ggml_rows(const qtk_tensor *t, const void *const *parts, uint64_t o0, uint64_t n, unsigned type,
			    void *dst)
{
	const qtk_scheme *s = qtk_scheme_of(t);
	uint64_t rb;
	if (!s || !s->to_ggml_rows || (t->ndim != 2 && t->ndim != 3) || qtk_type_nbytes(type, t->shape[t->ndim - 1], &rb))
		return -1;
	if (t->ndim == 2)
		return rows_ok(s, t, o0, n) ? s->to_ggml_rows(t, parts, o0, n, type, dst) : -1;
	uint64_t out = t->shape[1], total;
	if (!out || !qtk_mul_u64(out, t->shape[0], &total) || o0 > total || n > total - o0)
		return -1;
	uint8_t *d = dst;
	while (n) { /* stacked experts: rows run through them in order */
		uint64_t e = o0 / out, a = o0 % out, k = out - a < n ? out - a : n;
		qtk_tensor sub = QTK_TENSOR_LOCAL;
		const void *sp[QTK_MAX_PARTS] = {NULL};
		if (!expert_of(t, parts, e, &sub, sp) || !rows_ok(s, &sub, a, k) || s->to_ggml_rows(&sub, sp, a, k, type, d))
			return -1;
		d += k * rb;
		o0 += k;
		n -= k;
	}
	return 0;
}

int qtk_scheme_encode_rows(const qtk_tensor *t, const float *x, uint64_t o0, uint64_t n, void *const *parts)
{
	const qtk_scheme *s = qtk_scheme_of(t);
	return rows_ok(s, t, o0, n) && s->encode_rows ? s->encode_rows(t, x, o0, n, parts) : -1;
}

int qtk_scheme_to_groups(const qtk_tensor *t, const void *const *parts, struct qgroups *g)
{
	const qtk_scheme *s = qtk_scheme_of(t);
	if (s && s->to_groups && t->ndim == 3) { /* stacked experts: their rows one after another */
		memset(g, 0, sizeof *g);
		uint64_t ne = t->shape[0], rows;
		if (!ne || !qtk_mul_u64(ne, t->shape[1], &rows) || rows > UINT32_MAX)
			return -1;
		for (uint64_t e = 0; e < ne; e++) {
			qtk_tensor sub = QTK_TENSOR_LOCAL;
			const void *sp[QTK_MAX_PARTS] = {NULL};
			qgroups one;
			if (!expert_of(t, parts, e, &sub, sp) || !dims_ok(&sub) || s->to_groups(&sub, sp, &one)) {
				qg_free(g);
				return -1;
			}
			bool same = true;
			if (!e) {
				same = !qg_alloc(g, (uint32_t)rows, one.in, one.group, one.ngroups, one.bits);
				if (same && one.g_idx) {
					g->g_idx = qtk_malloc((size_t)one.in * sizeof *g->g_idx);
					same = g->g_idx != NULL;
					if (same)
						memcpy(g->g_idx, one.g_idx, (size_t)one.in * sizeof *g->g_idx);
				}
			} else { /* one input order and group shape for the whole stack */
				same = one.in == g->in && one.group == g->group && one.ngroups == g->ngroups &&
				       one.bits == g->bits && !one.g_idx == !g->g_idx &&
				       (!one.g_idx || !memcmp(g->g_idx, one.g_idx, (size_t)g->in * sizeof *g->g_idx));
			}
			if (!same) {
				qg_free(&one);
				qg_free(g);
				return -1;
			}
			uint64_t r0 = e * one.out;
			memcpy(g->q + r0 * g->in, one.q, (size_t)one.out * one.in);
			memcpy(g->z + r0 * g->ngroups, one.z, (size_t)one.out * one.ngroups * sizeof *g->z);
			memcpy(g->s + r0 * g->ngroups, one.s, (size_t)one.out * one.ngroups * sizeof *g->s);
			qg_free(&one);
		}
		return 0;
	}
	return s && s->to_groups && dims_ok(t) ? s->to_groups(t, parts, g) : -1;
}

int qtk_scheme_from_groups(const struct qgroups *g, const qtk_tensor *o, bool wrap, void *const *parts)
{
	const qtk_scheme *s = qtk_scheme_of(o);
	return s && s->from_groups && dims_ok(o) ? s->from_groups(g, o, wrap, parts) : -1;
}

/* ---- exact transcodes --------------------------------------------------------------------
 * Integer groups with fp16 scales, (q - z) * s, keep their values in ggml's legacy blocks when
 * q - z fits: q4_0 holds q - z in [-8, 7] (symmetric 4-bit, any 2- or 3-bit), q5_0 any 4-bit,
 * q8_0 symmetric 8-bit; blocks of 32 must not straddle groups. Shared by AWQ and GPTQ (and by
 * ggml's q4_0/q8_0 as sources: kind PLAIN). */
#define B(b) (1u << (b))
const qtk_scheme_transcode qtk_scheme_int_transcodes[QTK_SCHEME_INT_NTRANSCODES] = {
	{QTK_LAYOUT_PLAIN, QTK_T_Q4_0, B(2) | B(3), false, 32},
	{QTK_LAYOUT_PLAIN, QTK_T_Q4_0, B(4), true, 32},
	{QTK_LAYOUT_PLAIN, QTK_T_Q5_0, B(4), false, 32},
	{QTK_LAYOUT_PLAIN, QTK_T_Q8_0, B(8), true, 32},
	{QTK_LAYOUT_AWQ, 0, B(4), false, 0},
	{QTK_LAYOUT_GPTQ, 0, B(2) | B(3) | B(4) | B(8), false, 0},
};
#undef B

static const qtk_scheme_transcode *transcodes_of(qtk_layout_kind from, int *n)
{
	const qtk_scheme *s = qtk_scheme_by_kind(from);
	*n = s ? s->ntranscodes : QTK_SCHEME_INT_NTRANSCODES;
	return s ? s->transcodes : qtk_scheme_int_transcodes;
}

unsigned qtk_scheme_exact_ggml(qtk_layout_kind from, unsigned bits, bool sym, uint64_t group, uint64_t in)
{
	int n;
	const qtk_scheme_transcode *tc = transcodes_of(from, &n);
	for (int i = 0; i < n; i++) {
		const qtk_scheme_transcode *x = &tc[i];
		if (x->kind != QTK_LAYOUT_PLAIN || bits >= 32 || !((x->bits_mask >> bits) & 1u) || (x->need_sym && !sym))
			continue;
		if (x->group_align && (group % x->group_align || in % x->group_align))
			continue;
		return x->type;
	}
	return 0;
}

bool qtk_scheme_exact_to(qtk_layout_kind from, qtk_layout_kind to, unsigned bits)
{
	int n;
	const qtk_scheme_transcode *tc = transcodes_of(from, &n);
	for (int i = 0; i < n; i++)
		if (tc[i].kind == to && to != QTK_LAYOUT_PLAIN && bits < 32 && ((tc[i].bits_mask >> bits) & 1u))
			return true;
	return false;
}
