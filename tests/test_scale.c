/* test_scale.c - work bounded in the number of keys and tensors: lookups count their string
 * comparisons (qtk_lookup_steps), so a scan per key (quadratic work) fails without timing. */
#include "qtk.h"
#include "qtk_util.h"
#include "t.h"
#include <stdint.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/qtk-scale-XXXXXX";

static void put64(qtk_buf *b, uint64_t v)
{
	uint8_t x[8];
	qtk_wr64(x, v);
	qtk_buf_put(b, x, 8);
}

/* A safetensors file with nkeys __metadata__ entries and ntensors one-element F32 tensors. */
static char *st_file(const char *name, size_t nkeys, size_t ntensors)
{
	qtk_buf h = {0};
	qtk_buf_puts(&h, "{");
	if (nkeys) {
		qtk_buf_puts(&h, "\"__metadata__\":{");
		for (size_t i = 0; i < nkeys; i++)
			qtk_buf_printf(&h, "%s\"key.%zu\":\"%zu\"", i ? "," : "", i, i);
		qtk_buf_puts(&h, "}");
	}
	for (size_t i = 0; i < ntensors; i++)
		qtk_buf_printf(&h, "%s\"model.layers.%zu.w.weight\":{\"dtype\":\"F32\",\"shape\":[1],"
			       "\"data_offsets\":[%zu,%zu]}", nkeys || i ? "," : "", i, 4 * i, 4 * i + 4);
	qtk_buf_puts(&h, "}");
	while (h.len % 8)
		qtk_buf_putc(&h, ' ');
	char *p = qtk_path_join(tmpdir, name);
	FILE *f = fopen(p, "wb");
	qtk_buf lb = {0};
	put64(&lb, h.len);
	fwrite(lb.p, 1, lb.len, f);
	fwrite(h.p, 1, h.len, f);
	for (size_t i = 0; i < 4 * ntensors; i++)
		fputc(0, f);
	fclose(f);
	qtk_buf_free(&h);
	qtk_buf_free(&lb);
	return p;
}

static void test_st_metadata(void)
{
	const size_t n = 200000;
	char *p = st_file("meta.safetensors", n, 1);
	size_t s0 = qtk_lookup_steps;
	qtk_err e;
	qtk_model *m = qtk_open(p, &e);
	size_t steps = qtk_lookup_steps - s0;
	CHECK(m && m->nkv >= n, "open: %s", m ? "" : e.msg);
	CHECK(steps < 8 * n, "%zu string comparisons to read %zu metadata keys", steps, n);
	if (m) {
		s0 = qtk_lookup_steps;
		char k[32];
		size_t found = 0;
		for (size_t i = 0; i < n; i++) {
			snprintf(k, sizeof k, "key.%zu", i);
			const qtk_kv *kv = qtk_kv_find(m, k);
			found += kv && kv->val.type == QTK_V_STR && (size_t)atol(kv->val.v.str.s) == i;
		}
		CHECK(found == n, "%zu of %zu keys found", found, n);
		CHECK(!qtk_kv_find(m, "key.none") && !qtk_kv_find(m, ""), "absent keys");
		steps = qtk_lookup_steps - s0;
		CHECK(steps < 8 * n, "%zu string comparisons for %zu lookups", steps, n);
	}
	qtk_close(m);
	free(p);
}

static void test_tensor_index(void)
{
	const size_t n = 50000;
	char *p = st_file("tensors.safetensors", 0, n);
	size_t s0 = qtk_lookup_steps;
	qtk_err e;
	qtk_model *m = qtk_open(p, &e);
	CHECK(m && m->ntensors == n, "open: %s", m ? "" : e.msg);
	if (m) {
		char k[64];
		size_t found = 0;
		for (size_t i = 0; i < n; i++) {
			snprintf(k, sizeof k, "model.layers.%zu.w.weight", i);
			const qtk_tensor *t = qtk_tensor_find(m, k);
			found += t && t == &m->tensors[i];
		}
		CHECK(found == n, "%zu of %zu tensors found", found, n);
		CHECK(!qtk_tensor_find(m, "model.layers.x.w.weight"), "absent tensor");
		size_t steps = qtk_lookup_steps - s0;
		CHECK(steps < 16 * n, "%zu string comparisons to open %zu tensors and find each", steps, n);
		/* a model changed in place keeps finding through a rebuilt index */
		char *old = m->tensors[7].name;
		m->tensors[7].name = qtk_strdup("renamed.weight");
		qtk_free(old);
		qtk_model_reindex(m);
		CHECK(qtk_tensor_find(m, "renamed.weight") == &m->tensors[7] &&
			      !qtk_tensor_find(m, "model.layers.7.w.weight"),
		      "rename after reindex");
	}
	qtk_close(m);
	free(p);
}

/* A model built by hand: added keys are found at once, a removed key is gone, duplicates keep
 * the first. */
static void test_model_edits(void)
{
	qtk_model *m = qtk_model_new();
	char k[32];
	for (int i = 0; i < 1000; i++) {
		snprintf(k, sizeof k, "k%d", i);
		CHECK(qtk_model_set_kv_str(m, k, "v") == 0, "set");
	}
	CHECK(qtk_model_set_kv_str(m, "k5", "again") == 0 && m->nkv == 1000, "replace keeps the count");
	CHECK(!strcmp(qtk_kv_find(m, "k5")->val.v.str.s, "again"), "replaced value");
	CHECK(qtk_kv_remove(m, "k3") == 1 && !qtk_kv_find(m, "k3") && m->nkv == 999, "removed");
	CHECK(qtk_kv_find(m, "k999") && !strcmp(qtk_kv_find(m, "k999")->key, "k999"), "after removal");
	qtk_close(m);
}

int main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_st_metadata();
	test_tensor_index();
	test_model_edits();
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		printf("cannot remove %s\n", tmpdir);
	return T_DONE();
}
