/* fuzz_prov.c - provenance record parser (src/record/prov.c qtk_prov_parse).
 * Properties: the canonical text of a record parses, and is a fixed point; reading the tensor
 * lists as text (qtk_prov_parse) and as trees (qtk_prov_parse_tree) accept and refuse the same
 * records, with the same error code, and give the same canonical text; the check that keeps
 * nothing (qtk_prov_check_canonical, a chained parent's) gives the same verdict, and calls a
 * record canonical exactly when its canonical text is the record itself. */
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
	cJSON *t = NULL;
	qtk_err et;
	qtk_err_clear(&et);
	int rt = qtk_prov_parse_tree((const char *)data, size, "record.json", &t, &et);
	if (rt != rc && rt != QTK_E_IO && rc != QTK_E_IO) {
		fprintf(stderr, "fuzz: the lists as text give %d (%s), as trees %d (%s)\n", rc, e.msg, rt, et.msg);
		abort();
	}
	if (!rc && !rt) {
		char *a = qtk_prov_canonical(j), *b = qtk_prov_canonical(t);
		if (a && b && strcmp(a, b)) {
			fprintf(stderr, "fuzz: the lists as text and as trees give different canonical records\n");
			abort();
		}
		qtk_free(a);
		qtk_free(b);
	}
	qtk_json_tree_free(t);
	qtk_err ec;
	qtk_err_clear(&ec);
	bool canon = false;
	int rcc = qtk_prov_check_canonical((const char *)data, size, "record.json", &canon, &ec);
	if (rcc != rc && rcc != QTK_E_IO && rc != QTK_E_IO) {
		fprintf(stderr, "fuzz: the check in place gives %d (%s), the reader %d (%s)\n", rcc, ec.msg, rc, e.msg);
		abort();
	}
	if (!rc && !rcc && j) {
		char *c0 = qtk_prov_canonical(j);
		if (c0 && canon != (strlen(c0) == size && !memcmp(c0, data, size))) {
			fprintf(stderr, "fuzz: the check in place says canonical %d, wrongly\n", canon);
			abort();
		}
		qtk_free(c0);
	}
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
	qtk_json_tree_free(j);
	qtk_json_tree_free(k);
	return 0;
}
