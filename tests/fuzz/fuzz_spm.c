/* fuzz_spm.c - SentencePiece tokenizer.model parser (src/family/spm.c).
 * Property: a model that parses serializes and parses back to an equal model. */
#include "fuzz.h"
#include "family/spm.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	qtk_spm_model a = {0}, b = {0};
	qtk_err e;
	qtk_err_clear(&e);
	fz_init();
	int rc = qtk_spm_parse(data, size, "tokenizer.model", &a, &e);
	fz_check_rc(rc, &e, "qtk_spm_parse");
	if (rc == 0) {
		qtk_buf out = {0};
		rc = qtk_spm_write(&a, &out);
		fz_check_rc(rc, NULL, "qtk_spm_write");
		if (rc == 0 && !out.failed) {
			qtk_err_clear(&e);
			rc = qtk_spm_parse(out.p, out.len, "tokenizer.model(rewritten)", &b, &e);
			if (rc || !qtk_spm_equal(&a, &b)) {
				fprintf(stderr, "fuzz: qtk_spm_parse(qtk_spm_write(x)) != x (rc %d: %s)\n", rc, e.msg);
				abort();
			}
		}
		qtk_buf_free(&out);
	}
	qtk_spm_free(&a);
	qtk_spm_free(&b);
	return 0;
}
