/* fuzz_prov.c - provenance record parser (src/record/prov.c qtk_prov_parse).
 * Property: the canonical text of a record parses, and is a fixed point. */
#include "fuzz.h"
#include "record/prov.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *j = NULL, *k = NULL;
	qtk_err e;
	qtk_err_clear(&e);
	fz_init();
	int rc = qtk_prov_parse((const char *)data, size, "record.json", &j, &e);
	fz_check_rc(rc, &e, "qtk_prov_parse");
	if (rc == 0 && j) {
		char *c1 = qtk_prov_canonical(j);
		if (c1) {
			qtk_err_clear(&e);
			rc = qtk_prov_parse(c1, strlen(c1), "canonical.json", &k, &e);
			if (rc) {
				fprintf(stderr, "fuzz: canonical record does not parse: %s\n", e.msg);
				abort();
			}
			char *c2 = qtk_prov_canonical(k);
			if (!c2 || strcmp(c1, c2) != 0) {
				fprintf(stderr, "fuzz: canonical form is not a fixed point\n");
				abort();
			}
			uint8_t h[32];
			fz_check_rc(qtk_prov_sha256(j, h), NULL, "qtk_prov_sha256");
			qtk_free(c2);
			qtk_free(c1);
		}
	}
	cJSON_Delete(j);
	cJSON_Delete(k);
	return 0;
}
