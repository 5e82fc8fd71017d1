/* test_export.c - the reference export: qconvert --to f32 writes every tensor
 * dequantized bit-exactly (checked against the fixtures' reference digests). */
#include "internal.h"
#include "t.h"
#include <dirent.h>
#include <openssl/evp.h>

static void sha_hex(const uint8_t *d, size_t n, char *hex)
{
	uint8_t md[32];
	unsigned len = 0;
	EVP_Digest(d, n, md, &len, EVP_sha256(), NULL);
	qtk_hex(md, 32, hex);
}

/* Compare each tensor of the exported file with digest lines "name\t...\tsha\t..." (sha at column col). */
static void check_export(const char *exported, const char *tsv, int col, const char *suffix)
{
	qtk_err e;
	qtk_model *m = qtk_open(exported, &e);
	CHECK(m != NULL, "%s: %s", exported, e.msg);
	FILE *f = fopen(tsv, "r");
	if (!m || !f) {
		if (f)
			fclose(f);
		qtk_close(m);
		return;
	}
	char line[4096];
	int n = 0, bad = 0;
	while (fgets(line, sizeof line, f)) {
		char *fld[8];
		int k = 0;
		char *s = line;
		for (; k < 8; k++) {
			fld[k] = s;
			char *tab = strchr(s, '\t');
			if (!tab)
				break;
			*tab = 0;
			s = tab + 1;
		}
		if (k < col || !strcmp(fld[0], "name"))
			continue;
		char name[512];
		snprintf(name, sizeof name, "%s%s", fld[0], suffix);
		const qtk_tensor *t = qtk_tensor_find(m, name);
		uint8_t *b;
		if (!t || t->layout.type != QTK_T_F32 || qtk_read_part_alloc(m, t, 0, &b)) {
			bad++;
			printf("missing or not f32: %s\n", name);
			continue;
		}
		char hex[65];
		sha_hex(b, (size_t)t->n_bytes, hex);
		free(b);
		n++;
		if (strcmp(hex, fld[col])) {
			bad++;
			printf("digest mismatch: %s\n", name);
		}
	}
	fclose(f);
	CHECK(n > 0 && bad == 0, "%s: %d tensors, %d bad", exported, n, bad);
	qtk_close(m);
}

int main(void)
{
	const char *fx = t_fixtures();
	if (!fx) {
		T_SKIP("fixtures absent: reference export digests");
		return T_DONE();
	}
	char tmp[] = "/tmp/qtk-export-XXXXXX";
	if (!mkdtemp(tmp))
		return 1;
	static const char *const ggufs[] = {"Q4_K_M", "Q2_K", "Q3_K_S", "IQ1_M", "IQ2_XXS", "IQ3_S", "IQ4_XS",
					    "TQ2_0", "BF16", "Q5_1"};
	char cmd[4096], out[1024], tsv[1024];
	for (size_t i = 0; i < sizeof ggufs / sizeof *ggufs; i++) {
		snprintf(out, sizeof out, "%s/%s.safetensors", tmp, ggufs[i]);
		snprintf(cmd, sizeof cmd, "bin/qconvert -q %s/gguf/tiny-%s.gguf %s --to f32", fx, ggufs[i], out);
		CHECK(system(cmd) == 0, "%s", cmd);
		snprintf(tsv, sizeof tsv, "%s/gguf/tiny-%s.digest.tsv", fx, ggufs[i]);
		check_export(out, tsv, 4, "");
	}
	static const char *const hf[] = {"awq-g128", "gptq-4-128-0", "gptq-4-128-1", "gptq-8-128-0",
					 "gptq-3-128-0", "gptq-2-64-0", "gptq-4-32-1s"};
	for (size_t i = 0; i < sizeof hf / sizeof *hf; i++) {
		snprintf(out, sizeof out, "%s/%s.safetensors", tmp, hf[i]);
		snprintf(cmd, sizeof cmd, "bin/qconvert -q %s/hf/tiny-llama/%s %s --to f32", fx, hf[i], out);
		CHECK(system(cmd) == 0, "%s", cmd);
		snprintf(tsv, sizeof tsv, "%s/hf/tiny-llama/ref/%s.digest.tsv", fx, hf[i]);
		check_export(out, tsv, 2, ".weight");
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	if (system(cmd) != 0)
		printf("warning: cannot remove %s\n", tmp);
	return T_DONE();
}
