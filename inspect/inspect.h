/* inspect.h - qinspect's reporters (pure functions of a model; stdout only). */
#ifndef QTK_INSPECT_H
#define QTK_INSPECT_H
#include "internal.h"
#include <stdio.h>

typedef struct insp_opts {
	bool stats;
	bool color;
} insp_opts;

int report_json(qtk_model *m, FILE *out, const insp_opts *o);
int report_summary(qtk_model *m, FILE *out, const insp_opts *o);
int report_markdown(qtk_model *m, FILE *out, const insp_opts *o);

/* Per-type totals in order of first appearance. */
typedef struct type_total {
	const char *type;
	uint64_t n_tensors, n_params, n_bytes;
} type_total;
typedef struct totals {
	uint64_t n_params, n_bytes;
	size_t ntypes;
	type_total types[64];
} totals;
void compute_totals(const qtk_model *m, totals *t);
void fmt_shape(const qtk_tensor *t, char *buf, size_t n);
void fmt_bytes(uint64_t b, char *buf, size_t n);
#endif
