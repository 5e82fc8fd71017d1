/* audit.c - qverify's audit check: what in FILE can run code (refused unless --allow-code) and
 * chat templates that look like a backdoor (reported). The audit itself is the library's
 * (src/record/audit.h). */
#include "verify.h"
#include <string.h>

int qv_chk_audit(vstate *s)
{
	int rc = qtk_audit_model(s->m, &s->audit, &s->err);
	if (rc)
		return rc;
	s->have_audit = true;
	const qtk_audit *a = &s->audit;
	size_t ntpl = a->n - (a->ncode > a->n ? a->n : a->ncode);
	const qtk_audit_finding *first_code = NULL, *first_tpl = NULL;
	for (size_t i = 0; i < a->n; i++) {
		if (a->f[i].code && !first_code)
			first_code = &a->f[i];
		if (!a->f[i].code && !first_tpl)
			first_tpl = &a->f[i];
	}
	if (a->ncode) {
		qv_result(s, "audit", s->o->allow_code ? "note" : "failed",
			  "%zu file%s or entr%s can run code (first: %s: %s)%s", a->ncode, a->ncode == 1 ? "" : "s",
			  a->ncode == 1 ? "y" : "ies", first_code ? first_code->where : "?",
			  first_code ? first_code->detail : "?", s->o->allow_code ? "; allowed by --allow-code" : "");
	}
	if (first_tpl)
		qv_result(s, "audit", "note", "%zu chat-template finding%s (first: %s: %s: %s)", ntpl, ntpl == 1 ? "" : "s",
			  first_tpl->where, first_tpl->kind, first_tpl->detail);
	if (!a->ncode && !first_tpl)
		qv_result(s, "audit", "ok", "no executable content%s; %zu chat template%s without findings",
			  a->listed ? " in the directory" : "", a->ntemplates, a->ntemplates == 1 ? "" : "s");
	return 0;
}
