/* report.c - qverify's output: human lines or one JSON document (deterministic: no timestamps). */
#include "verify.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int vt_cmp(const void *a, const void *b)
{
	return strcmp(((const vtensor *)a)->name, ((const vtensor *)b)->name);
}

static const char *mode_name(vmode m)
{
	switch (m) {
	case MODE_EMIT: return "emit-record";
	case MODE_RECORD: return "record";
	case MODE_AGAINST: return "against";
	case MODE_SIGN: return "sign";
	case MODE_SIGVERIFY: return "verify-signature";
	default: return "embedded";
	}
}

static cJSON *tensor_json(const vstate *s, const vtensor *t)
{
	cJSON *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "name", t->name);
	if (t->stored)
		cJSON_AddStringToObject(c, "stored", t->stored);
	else
		cJSON_AddNullToObject(c, "stored");
	cJSON_AddStringToObject(c, "status", t->status);
	cJSON_AddBoolToObject(c, "failed", t->failed);
	if (t->detail && t->detail[0])
		cJSON_AddStringToObject(c, "detail", t->detail);
	if (s->o->mode == MODE_AGAINST) {
		if (isfinite(t->sqnr_db))
			cJSON_AddNumberToObject(c, "sqnr_db", t->sqnr_db);
		else
			cJSON_AddNullToObject(c, "sqnr_db");
		if (isfinite(t->rmse))
			cJSON_AddNumberToObject(c, "rmse", t->rmse);
		else
			cJSON_AddNullToObject(c, "rmse");
		if (isfinite(t->bias))
			cJSON_AddNumberToObject(c, "bias", t->bias);
		else
			cJSON_AddNullToObject(c, "bias");
	}
	return c;
}

/* The report's "tensors" list as cJSON_Print prints it in the report, one entry at a time (a
 * tree of 100,000 entries and its text took ~90 MB). */
static bool print_tensors(const vstate *s)
{
	qtk_jtext tj = {0};
	bool ok = true;
	for (size_t i = 0; i < s->nt && ok; i++) {
		cJSON *c = tensor_json(s, &s->t[i]);
		tj.len = 0;
		ok = c && !qtk_json_fmt(&tj, c, 2); /* inside the root object and its array */
		cJSON_Delete(c);
		if (ok)
			printf("%s%.*s", i ? ", " : "", (int)tj.len, tj.p);
	}
	qtk_jtext_free(&tj);
	return ok;
}

static void report_json(vstate *s)
{
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "file", s->o->file);
	cJSON_AddStringToObject(r, "mode", mode_name(s->o->mode));
	if (s->o->record)
		cJSON_AddStringToObject(r, "record", s->o->record);
	if (s->o->source)
		cJSON_AddStringToObject(r, "source", s->o->source);
	cJSON_AddBoolToObject(r, "ok", s->status == 0);
	cJSON *cs = cJSON_AddArrayToObject(r, "checks");
	for (size_t i = 0; i < s->nr; i++) {
		cJSON *c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "check", s->r[i].check);
		cJSON_AddStringToObject(c, "status", s->r[i].status);
		cJSON_AddStringToObject(c, "detail", s->r[i].detail);
		cJSON_AddItemToArray(cs, c);
	}
	/* the list, empty here, is printed in its place entry by entry */
	cJSON_AddArrayToObject(r, "tensors");
	if (s->have_audit)
		cJSON_AddItemToObject(r, "audit", qtk_audit_json(&s->audit));
	if (s->have_digests) {
		char h[65];
		cJSON *root = cJSON_AddObjectToObject(r, "tensor_root");
		cJSON_AddStringToObject(root, "scheme", qtk_digest_scheme_name(s->d.scheme));
		cJSON_AddNumberToObject(root, "count", (double)s->d.n);
		qtk_hex(s->d.enc_root, 32, h);
		cJSON_AddStringToObject(root, "encoded", h);
		qtk_hex(s->d.dec_root, 32, h);
		if (s->d.complete)
			cJSON_AddStringToObject(root, "decoded", h);
		else
			cJSON_AddNullToObject(root, "decoded"); /* computed only where needed */
	}
	char *txt = cJSON_Print(r);
	cJSON_Delete(r);
	const size_t head = qtk_json_list_place(txt, "tensors");
	if (head == SIZE_MAX) {
		fprintf(stderr, "qverify: out of memory: the report could not be printed\n");
	} else {
		printf("%.*s", (int)head, txt);
		if (!print_tensors(s))
			fprintf(stderr, "qverify: out of memory: a tensor's report could not be printed\n");
		printf("%s\n", txt + head);
	}
	cJSON_free(txt);
}

/* Human form: failing tensors (all with -v), each check's outcome, a verdict line. */
static void report_text(vstate *s)
{
	if (g_cli.verbose < 0)
		return;
	for (size_t i = 0; i < s->nt; i++) {
		const vtensor *t = &s->t[i];
		bool plain = !strcmp(t->status, "ok") || !strcmp(t->status, "exact");
		if (!t->failed && g_cli.verbose <= 0 && (plain || s->o->mode != MODE_AGAINST) &&
		    strcmp(t->status, "re-encoded"))
			continue;
		char stored[300] = "";
		if (t->stored && strcmp(t->stored, t->name))
			snprintf(stored, sizeof stored, " (stored as '%s')", t->stored);
		/* names and details quote the file: through the sanitiser, so none can fake a verdict */
		printf("%s: tensor '%s'%s: %s%s%s\n", cli_safe(s->o->file), cli_safe(t->name), cli_safe(stored), t->status,
		       t->detail && t->detail[0] ? ": " : "", cli_safe(t->detail ? t->detail : ""));
	}
	for (size_t i = 0; i < s->nr; i++)
		printf("%s: %s: %s: %s\n", cli_safe(s->o->file), s->r[i].check, s->r[i].status, cli_safe(s->r[i].detail));
	printf("%s: %s\n", cli_safe(s->o->file), s->status ? "FAILED" : "ok");
}

void qv_report(vstate *s)
{
	if (s->nt)
		qsort(s->t, s->nt, sizeof *s->t, vt_cmp);
	if (s->o->mode == MODE_EMIT && !s->status)
		return; /* the record or the AI-BOM was printed as it was made */
	if (s->o->json)
		report_json(s);
	else
		report_text(s);
}

void qv_free(vstate *s)
{
	if (s->fthread_on)
		pthread_join(s->fthread, NULL);
	for (size_t i = 0; i < s->nt; i++) {
		qtk_free(s->t[i].name);
		qtk_free(s->t[i].stored);
		qtk_free(s->t[i].detail);
	}
	qtk_free(s->t);
	if (s->rec != s->embedded)
		qtk_json_tree_free(s->rec);
	qtk_json_tree_free(s->embedded);
	qtk_audit_free(&s->audit);
	qtk_digests_free(&s->d);
	qtk_filelist_free(&s->files);
	qtk_close(s->m);
	qtk_close(s->src);
}
