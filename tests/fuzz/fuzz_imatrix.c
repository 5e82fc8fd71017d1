/* fuzz_imatrix.c - llama.cpp importance-matrix reader (legacy binary and
 * GGUF), through qtk_imatrix_load and every accessor. */
#include "fuzz.h"
#include "imatrix.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile float fsink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path;
	fz_materialize(data, size, "imatrix.dat", &path);
	qtk_err e;
	qtk_err_clear(&e); /* qtk_imatrix_load does not clear it (qtk_open does) */
	qtk_imatrix *m = qtk_imatrix_load(path, &e);
	if (getenv("QTK_FUZZ_DEBUG"))
		fprintf(stderr, "fuzz: imatrix %s: %s\n", path, m ? "ok" : e.msg);
	if (!m) {
		fz_check_rc(e.code ? e.code : QTK_E_INTERNAL, &e, "qtk_imatrix_load");
	} else {
		size_t n = qtk_imatrix_count(m);
		for (size_t i = 0; i < n; i++) {
			const char *name = qtk_imatrix_name(m, i);
			uint64_t nval = 0;
			const float *w = qtk_imatrix_find(m, name, &nval);
			float s = 0;
			for (uint64_t k = 0; w && k < nval; k++)
				s += w[k];
			const float *g = qtk_imatrix_get(m, name, nval);
			if (g)
				s += g[nval - 1];
			(void)qtk_imatrix_get(m, name, 1);
			fsink = s;
		}
		(void)qtk_imatrix_name(m, n);
		(void)qtk_imatrix_chunks(m);
		const char *ds = qtk_imatrix_dataset(m);
		if (ds)
			fsink = (float)strlen(ds);
		(void)qtk_imatrix_is_legacy(m);
		fsink = (float)qtk_imatrix_sha256(m)[31];
		qtk_imatrix_free(m);
	}
	fz_clear();
	return 0;
}
