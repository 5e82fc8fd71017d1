/* metatypes.c - typed metadata through string-only containers.
 *
 * safetensors' __metadata__ holds strings only. When a model with typed
 * metadata (GGUF keys: integers, floats, bools, arrays) is written there,
 * each value is stored as exact text and the original types are listed in
 * one extra entry, "qtk.metadata_types" = {"key": "u32", "key2": "[f32]"}.
 * Reading such a file turns the values back into their types, so
 * GGUF -> safetensors -> GGUF keeps every key and value.
 */
#include "internal.h"
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool qtk_value_as_i64(const qtk_value *v, int64_t *out)
{
	switch (v->type) {
	case QTK_V_U8: case QTK_V_U16: case QTK_V_U32: case QTK_V_U64:
		if (v->v.u > (uint64_t)INT64_MAX)
			return false;
		*out = (int64_t)v->v.u;
		return true;
	case QTK_V_I8: case QTK_V_I16: case QTK_V_I32: case QTK_V_I64:
		*out = v->v.i;
		return true;
	default:
		return false;
	}
}

bool qtk_value_as_u64(const qtk_value *v, uint64_t *out)
{
	switch (v->type) {
	case QTK_V_U8: case QTK_V_U16: case QTK_V_U32: case QTK_V_U64:
		*out = v->v.u;
		return true;
	case QTK_V_I8: case QTK_V_I16: case QTK_V_I32: case QTK_V_I64:
		if (v->v.i < 0)
			return false;
		*out = (uint64_t)v->v.i;
		return true;
	default:
		return false;
	}
}

static int put_scalar(qtk_buf *b, unsigned type, const uint8_t *raw, const qtk_value *v)
{
	qtk_value x = {0};
	if (raw) { /* an array element */
		qtk_value_from_le(&x, type, raw);
		v = &x;
	}
	uint64_t u = v->v.u;
	int64_t i = v->v.i;
	double f = v->v.f;
	switch (type) {
	case QTK_V_BOOL: return qtk_buf_puts(b, u ? "true" : "false");
	case QTK_V_I8: case QTK_V_I16: case QTK_V_I32: case QTK_V_I64: return qtk_buf_printf(b, "%lld", (long long)i);
	case QTK_V_F32: case QTK_V_F64:
		if (!isfinite(f)) /* JSON has no inf/nan: a quoted token */
			return qtk_buf_puts(b, isnan(f) ? "\"nan\"" : f > 0 ? "\"inf\"" : "\"-inf\"");
		return qtk_buf_printf(b, "%.17g", f);
	default: return qtk_buf_printf(b, "%llu", (unsigned long long)u);
	}
}

char *qtk_value_to_text(const qtk_value *v)
{
	qtk_buf b = {0};
	if (v->type == QTK_V_STR)
		qtk_buf_put(&b, v->v.str.s, (size_t)v->v.str.len);
	else if (v->type != QTK_V_ARR)
		put_scalar(&b, v->type, NULL, v);
	else {
		qtk_buf_putc(&b, '[');
		size_t es = qtk_value_size(v->elem);
		for (uint64_t k = 0; k < v->n; k++) {
			if (k)
				qtk_buf_putc(&b, ',');
			if (v->elem == QTK_V_STR) {
				const qtk_str *s = v->arr;
				cJSON *j = cJSON_CreateString(s[k].s);
				char *t = j ? cJSON_PrintUnformatted(j) : NULL;
				if (t)
					qtk_buf_puts(&b, t);
				else
					b.failed = 1;
				cJSON_free(t);
				cJSON_Delete(j);
			} else {
				put_scalar(&b, v->elem, (const uint8_t *)v->arr + k * es, NULL);
			}
		}
		qtk_buf_putc(&b, ']');
	}
	if (b.failed || !b.p) {
		qtk_buf_free(&b);
		return NULL;
	}
	return (char *)b.p;
}

void qtk_value_type_tag(const qtk_value *v, char *buf, size_t n)
{
	if (v->type == QTK_V_ARR)
		snprintf(buf, n, "[%s]", qtk_value_type_name(v->elem));
	else
		snprintf(buf, n, "%s", qtk_value_type_name(v->type));
}

static int tag_type(const char *tag, int *type, int *elem)
{
	char name[16];
	size_t n = strlen(tag);
	bool arr = n > 2 && tag[0] == '[' && tag[n - 1] == ']';
	if (arr) {
		if (n - 2 >= sizeof name)
			return -1;
		memcpy(name, tag + 1, n - 2);
		name[n - 2] = 0;
	} else if (n < sizeof name) {
		memcpy(name, tag, n + 1);
	} else {
		return -1;
	}
	for (int t = 0; t < QTK_V_MAX; t++)
		if (t != QTK_V_ARR && !strcmp(qtk_value_type_name((unsigned)t), name)) {
			*type = arr ? QTK_V_ARR : t;
			*elem = arr ? t : 0;
			return 0;
		}
	return -1;
}

static bool is_signed(int t) { return t == QTK_V_I8 || t == QTK_V_I16 || t == QTK_V_I32 || t == QTK_V_I64; }

/* Parse one scalar from a JSON item into v (scalars) or raw (array elements,
 * little-endian). Numbers must be exact for their type. Returns 0 or -1. */
static int scalar_from(const cJSON *j, int type, uint8_t *raw, qtk_value *v)
{
	uint64_t u = 0;
	double f = 0;
	if (type == QTK_V_BOOL) {
		if (!cJSON_IsBool(j))
			return -1;
		u = cJSON_IsTrue(j) ? 1 : 0;
	} else if (type == QTK_V_F32 || type == QTK_V_F64) {
		if (cJSON_IsNumber(j))
			f = j->valuedouble;
		else if (cJSON_IsString(j) && !strcmp(j->valuestring, "nan"))
			f = NAN;
		else if (cJSON_IsString(j) && !strcmp(j->valuestring, "inf"))
			f = INFINITY;
		else if (cJSON_IsString(j) && !strcmp(j->valuestring, "-inf"))
			f = -INFINITY;
		else
			return -1;
		if (type == QTK_V_F32)
			f = (double)(float)f;
	} else {
		static const double hi[QTK_V_MAX] = {255, 127, 65535, 32767, 4294967295.0, 2147483647.0, 0, 1, 0, 0,
						      9007199254740992.0, 9007199254740992.0, 0};
		double x = cJSON_IsNumber(j) ? j->valuedouble : NAN;
		if (!(x == floor(x)) || x > hi[type] || (is_signed(type) ? x < -hi[type] - 1 : x < 0))
			return -1;
		u = is_signed(type) ? (uint64_t)(int64_t)x : (uint64_t)x;
	}
	if (v) {
		v->type = (uint8_t)type;
		if (type == QTK_V_F32 || type == QTK_V_F64)
			v->v.f = f;
		else if (is_signed(type))
			v->v.i = (int64_t)u;
		else
			v->v.u = u;
		return 0;
	}
	uint8_t b[8];
	if (type == QTK_V_F32) {
		float y = (float)f;
		uint32_t w;
		memcpy(&w, &y, 4);
		qtk_wr32(b, w);
	} else if (type == QTK_V_F64) {
		uint64_t w;
		memcpy(&w, &f, 8);
		qtk_wr64(b, w);
	} else {
		qtk_wr64(b, u);
	}
	memcpy(raw, b, qtk_value_size((unsigned)type));
	return 0;
}

/* The value of one key from its text and type tag. */
static int value_from_text(const char *text, size_t len, int type, int elem, qtk_value *out)
{
	memset(out, 0, sizeof *out);
	cJSON *j = cJSON_ParseWithLength(text, len);
	if (!j)
		return -1;
	int rc = 0;
	if (type != QTK_V_ARR) {
		rc = scalar_from(j, type, NULL, out);
	} else if (!cJSON_IsArray(j)) {
		rc = -1;
	} else {
		int n = cJSON_GetArraySize(j);
		out->type = QTK_V_ARR;
		out->elem = (uint8_t)elem;
		if (elem == QTK_V_STR) {
			qtk_str *s = qtk_calloc((size_t)n + 1, sizeof *s);
			out->arr = s;
			int k = 0;
			for (const cJSON *e = j->child; s && e && !rc; e = e->next, k++) {
				if (!cJSON_IsString(e)) {
					rc = -1;
					break;
				}
				s[k].len = strlen(e->valuestring);
				s[k].s = qtk_strdup(e->valuestring);
				if (!s[k].s)
					rc = -1;
				out->n = (uint64_t)k + 1;
			}
			if (!s)
				rc = -1;
		} else {
			size_t es = qtk_value_size((unsigned)elem);
			uint8_t *a = qtk_malloc((size_t)n * es + 1);
			out->arr = a;
			out->n = (uint64_t)n;
			int k = 0;
			for (const cJSON *e = j->child; a && e && !rc; e = e->next, k++)
				rc = scalar_from(e, elem, a + (size_t)k * es, NULL);
			if (!a)
				rc = -1;
		}
	}
	cJSON_Delete(j);
	if (rc)
		qtk_value_free(out);
	return rc;
}

int qtk_meta_restore(qtk_model *m, qtk_err *err)
{
	const qtk_kv *tk = qtk_kv_find(m, QTK_META_TYPES_KEY);
	if (!tk || tk->val.type != QTK_V_STR)
		return 0;
	cJSON *types = cJSON_ParseWithLength(tk->val.v.str.s, (size_t)tk->val.v.str.len);
	if (!cJSON_IsObject(types)) {
		cJSON_Delete(types);
		return qtk_err_set(err, QTK_E_DATA, m->path, -1, QTK_META_TYPES_KEY, "not a JSON object of type names");
	}
	int rc = 0;
	for (const cJSON *c = types->child; c && !rc; c = c->next) {
		int type, elem;
		qtk_kv *kv = (qtk_kv *)qtk_kv_find(m, c->string);
		if (!cJSON_IsString(c) || tag_type(c->valuestring, &type, &elem)) {
			rc = qtk_err_set(err, QTK_E_DATA, m->path, -1, c->string, "unknown metadata type in %s",
					 QTK_META_TYPES_KEY);
			break;
		}
		if (!kv || kv->val.type != QTK_V_STR)
			continue; /* the key was removed or retyped since: keep what is there */
		qtk_value v;
		if (value_from_text(kv->val.v.str.s, (size_t)kv->val.v.str.len, type, elem, &v)) {
			rc = qtk_err_set(err, QTK_E_DATA, m->path, -1, c->string, "value does not parse as %s",
					 c->valuestring);
			break;
		}
		qtk_value_free(&kv->val);
		kv->val = v;
	}
	cJSON_Delete(types);
	if (!rc)
		qtk_kv_remove(m, QTK_META_TYPES_KEY);
	return rc;
}
