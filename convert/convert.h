/* convert.h - qconvert's plan and execution. */
#ifndef QTK_CONVERT_H
#define QTK_CONVERT_H
#include "internal.h"

typedef enum { TGT_KEEP = 0, TGT_TYPE } target_kind;

typedef struct conv_target {
	target_kind kind;
	unsigned type; /* TGT_TYPE: storage type */
} conv_target;

#define CONV_MAX_SETS 256

typedef struct conv_opts {
	const char *input, *output;
	qtk_out_kind out_kind;
	conv_target target;
	bool exact, dry_run, has_max_error;
	double max_error_db;
	const char *report;
	int threads;
	int nsets;
	const char *sets[CONV_MAX_SETS];
} conv_opts;

/* Error of a converted tensor against its decoded source. */
typedef struct errstat {
	double sum_sq_err, sum_sq_ref, sum_sq_out, dot, max_abs;
	uint64_t n, n_diff_bits;
} errstat;

typedef struct tensor_result {
	const char *name;
	char from[48], to[48];
	bool exact, lossy_possible;
	double rmse, max_abs_err, sqnr_db, cosine;
	uint64_t bytes_in, bytes_out;
} tensor_result;

typedef struct conv_result {
	size_t n;
	tensor_result *t;
	uint64_t bytes_in, bytes_out, params;
	size_t n_exact, n_requant;
	double worst_sqnr;
	const char *worst_name;
	double elapsed;
	qtk_outlist outs;
} conv_result;

int conv_parse_target(const char *s, conv_target *t);
/* Plan, write and verify. Returns the exit status (0, 1, or an error status). */
int conv_run(qtk_model *in, const conv_opts *o, conv_result *res);
void conv_print_summary(const conv_opts *o, const conv_result *res);
void conv_result_free(conv_result *res);
#endif
