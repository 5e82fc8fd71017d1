/* verify.h - qverify's state, its table of checks and its reporting. */
#ifndef QTK_VERIFY_H
#define QTK_VERIFY_H
#include "cli.h"
#include <pthread.h>

typedef enum { MODE_EMBEDDED = 1, MODE_EMIT = 2, MODE_RECORD = 4, MODE_AGAINST = 8, MODE_SIGN = 16,
	       MODE_SIGVERIFY = 32 } vmode;

typedef struct vopts {
	vmode mode;
	const char *file;       /* FILE */
	const char *record;     /* --record REC.json */
	const char *source;     /* --against SOURCE */
	bool files;             /* --files */
	bool json;              /* --json */
	bool has_max_error;
	double max_error_db;
	int threads;
	bool allow_code;        /* --allow-code: executable content is reported, not refused */
	const char *bom;        /* --emit-bom cyclonedx|spdx (mode MODE_EMIT) */
	const char *sign_key;   /* --sign PRIVATE.pem */
	const char *verify_key; /* --verify-signature PUBLIC.pem */
	const char *signature;  /* --signature SIG */
	uint64_t shard_size;    /* --shard-size N (with --sign) */
	bool sig_content;       /* --content: the signed tensor content decides */
} vopts;

/* One line of the per-tensor report. */
typedef struct vtensor {
	char *name;        /* canonical */
	char *stored;      /* as stored in FILE, NULL when absent there */
	const char *status;/* "ok" "re-encoded" "changed" "missing" "extra" "exact" "lossy" "below" */
	bool failed;
	char *detail;      /* NULL: none (most tensors: a table of 100,000 is ~25 MB smaller) */
	double sqnr_db;    /* --against: NAN when exact or not applicable */
	double rmse;       /* --against, lossy: root mean square error; NAN otherwise */
	double bias;       /* --against, lossy: <file, source> / <source, source>; NAN otherwise */
} vtensor;

/* Outcome of one check. */
typedef struct vresult {
	const char *check;
	const char *status; /* "ok" "failed" "skipped" "note" */
	char detail[512];
} vresult;

typedef struct vstate {
	const vopts *o;
	qtk_model *m;            /* FILE */
	qtk_model *src;          /* --against SOURCE */
	qtk_digests d;           /* FILE's content digests (when computed) */
	bool have_digests;
	qtk_filelist files;      /* FILE's files (when hashed) */
	bool have_files;
	pthread_t fthread;       /* hashes the files while the digests are computed */
	bool fthread_on;
	int frc;                 /* its result; its error in ferr */
	qtk_err ferr;
	cJSON *rec;              /* the record checked against (REC.json or embedded) */
	const char *rec_name;    /* where rec came from, for messages */
	cJSON *embedded;         /* FILE's embedded record (parsed), or NULL */
	const char *embedded_where;
	qtk_audit audit;         /* executable content and chat templates (audit.c) */
	bool have_audit;
	vtensor *t;
	size_t nt, capt;
	vresult r[16];
	size_t nr;
	int status;              /* exit status so far: 0, or 1 (a check failed) */
	bool stop;               /* a check decided the outcome: run no further checks */
	qtk_err err;             /* an error that stops the run (exit 3/4/5) */
} vstate;

/* A check: returns 0 (its outcome is recorded in the state) or a QTK_E_* error. */
typedef struct vcheck {
	const char *name;
	unsigned modes;          /* vmode bits it runs in */
	int (*run)(vstate *s);
} vcheck;

extern const vcheck qv_checks[];
extern const size_t qv_nchecks;

/* Record the outcome of a check. */
void qv_result(vstate *s, const char *check, const char *status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Append a per-tensor line; returns it (NULL when out of memory). */
vtensor *qv_tensor(vstate *s, const char *name, const char *stored, const char *status, bool failed);
/* t's detail (at most 255 bytes, as printed); left out when out of memory. */
void qv_detail(vtensor *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The audit check (audit.c): executable content fails unless --allow-code. */
int qv_chk_audit(vstate *s);
/* --emit-bom (bom.c): write the AI-BOM of FILE to stdout. 0 or a QTK_E_* error in s->err. */
int qv_emit_bom(vstate *s);

/* --against without --max-error: the SQNR a lossy tensor of bpw bits per weight must reach. */
double qv_default_bar_db(double bpw);
/* Print the report (human or JSON) to stdout. */
void qv_report(vstate *s);
void qv_free(vstate *s);

/* sign.c: --sign and --verify-signature (checks of the table) */
char *qv_sig_path(const vopts *o);
int qv_chk_sign(vstate *s);
int qv_chk_sigverify(vstate *s);
int qv_chk_sigrecord(vstate *s);
/* meta.c: metadata digests against the record, and --against */
int qv_chk_metadata(vstate *s);
int qv_chk_against_metadata(vstate *s);
#endif
