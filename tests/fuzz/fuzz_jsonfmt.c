/* fuzz_jsonfmt.c - the cJSON_Print layout without cJSON (src/json_print.c).
 * Properties, for the input (its first byte picks a depth 0..3, the rest is the text):
 * qtk_json_refmt either hands the text back having written nothing, or writes exactly what
 * cJSON_ParseWithLength and cJSON_Print give (which must then parse it); and qtk_json_fmt of
 * cJSON's tree equals cJSON_Print's text. */
#include "fuzz.h"
#include "json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cJSON_Print of j set at `depth`: printed inside `depth` objects {"k": ...} and cut out */
static char *print_at(const cJSON *j, int depth)
{
	cJSON *root = cJSON_Duplicate(j, 1);
	for (int d = 0; d < depth && root; d++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "k", root);
		root = o;
	}
	char *txt = root ? cJSON_Print(root) : NULL;
	cJSON_Delete(root);
	if (!txt || !depth)
		return txt;
	char *p = txt;
	for (int d = 0; d < depth; d++)
		p = strstr(p, "\"k\":\t") + 5;
	size_t len = strlen(p);
	for (int d = 0; d < depth; d++)
		len -= 2 + (size_t)d;
	char *out = malloc(len + 1);
	memcpy(out, p, len);
	out[len] = 0;
	free(txt);
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_init();
	if (!size)
		return 0;
	const int depth = data[0] % 4;
	const char *txt = (const char *)data + 1;
	const size_t n = size - 1;
	cJSON *j = cJSON_ParseWithLength(txt, n);
	char *want = j ? print_at(j, depth) : NULL;
	qtk_jtext w = {0};
	int rc = qtk_json_refmt(&w, txt, n, depth);
	if (rc == 1 && w.len) {
		fprintf(stderr, "fuzz: handed back after writing %zu bytes\n", w.len);
		abort();
	}
	if (rc == 0 && (!want || strlen(want) != w.len || memcmp(want, w.p, w.len))) {
		fprintf(stderr, "fuzz: refmt differs from cJSON (%s)\n", want ? "text" : "cJSON refuses it");
		abort();
	}
	qtk_jtext_free(&w);
	if (j && want) {
		qtk_jtext f = {0};
		if (qtk_json_fmt(&f, j, depth) != 0 || strlen(want) != f.len || memcmp(want, f.p, f.len)) {
			fprintf(stderr, "fuzz: fmt differs from cJSON_Print\n");
			abort();
		}
		qtk_jtext_free(&f);
	}
	free(want);
	cJSON_Delete(j);
	return 0;
}
