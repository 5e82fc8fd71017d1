/* fuzz_sigbundle.c - signature bundle reader (src/record/sign.c): qtk_sig_bundle_parse, then the
 * signed statement (qtk_sig_statement_parse) of its payload, as qverify --verify-signature reads
 * them. Properties: no crash; a statement that parses renders again (qtk_sig_statement) to a
 * statement that parses with the same resources and subject digest. The input is a bundle; an
 * input that is no bundle is also tried as a bare statement. */
#include "fuzz.h"
#include "record/sign.h"
#include "json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void statement(const uint8_t *p, size_t n)
{
	qtk_sig_manifest m, m2;
	qtk_err e;
	qtk_err_clear(&e);
	int rc = qtk_sig_statement_parse(p, n, "payload", &m, &e);
	fz_check_rc(rc, &e, "qtk_sig_statement_parse");
	if (rc)
		return;
	char *t = NULL;
	cJSON *rec = m.qtk_record;
	m.qtk_record = NULL;
	uint8_t root[32];
	memcpy(root, m.root, 32);
	size_t n1 = m.n;
	if (!qtk_sig_statement(&m, rec, &t, &e)) {
		qtk_err_clear(&e);
		if (qtk_sig_statement_parse((const uint8_t *)t, strlen(t), "rendered", &m2, &e)) {
			fprintf(stderr, "fuzz: a rendered statement does not parse: %s\n", e.msg);
			abort();
		}
		if (m2.n != n1 || memcmp(m2.root, m.root, 32)) {
			fprintf(stderr, "fuzz: a rendered statement differs\n");
			abort();
		}
		qtk_sig_manifest_free(&m2);
	}
	(void)root;
	qtk_free(t);
	qtk_json_tree_free(rec); /* a record reader's tree: its mapping goes too */
	qtk_sig_manifest_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_init();
	qtk_sig_bundle b;
	qtk_err e;
	qtk_err_clear(&e);
	int rc = qtk_sig_bundle_parse(data, size, "model.sig", &b, &e);
	fz_check_rc(rc, &e, "qtk_sig_bundle_parse");
	if (!rc) {
		uint8_t *pae = NULL;
		size_t np = 0;
		if (!qtk_sig_pae(b.payload, b.npayload, &pae, &np) && np < b.npayload)
			abort();
		qtk_free(pae);
		statement(b.payload, b.npayload);
		qtk_sig_bundle_free(&b);
	} else {
		statement(data, size);
	}
	return 0;
}
