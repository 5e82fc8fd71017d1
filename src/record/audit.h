/* audit.h - executable content and chat-template audit (docs/provenance.md, "Audit").
 *
 * Two classes of findings:
 *
 *  - code: what can run code when the model is loaded: pickle files (*.bin *.pt *.pth *.ckpt
 *    *.pkl *.pickle *.joblib), Python files (the modules transformers loads for auto_map /
 *    trust_remote_code), native or script files, auto_map entries in a JSON side file, and
 *    any file of a model directory that is not on the allowlist of inert data (weights in
 *    safetensors/GGUF, JSON, tokenizer models, text, images). qverify refuses them unless
 *    --allow-code; qconvert never carries them.
 *  - template: chat templates (GGUF tokenizer.chat_template*, tokenizer_config.json
 *    chat_template, chat_template.json, chat_template.jinja) carrying URLs, encoded blobs
 *    (long base64 or hex runs, runs of \x escapes), terminal escapes and other control or
 *    invisible characters, bytes that are not UTF-8, an unusual size, or conditionals that
 *    test message content against unusual literal strings (a published backdoor class).
 *    These are reported, not refused.
 *
 * Every string in a finding is escaped to printable ASCII (text.h, QTK_TEXT_ASCII), so it
 * can be shown, put in JSON or in a provenance record as it is.
 */
#ifndef QTK_AUDIT_H
#define QTK_AUDIT_H
#include "qtk.h"
#include <cJSON.h>

#define QTK_AUDIT_SCHEME "qtk-audit-v1"
/* Findings kept (sorted; the rest are counted in `dropped`). */
#define QTK_AUDIT_MAX 4096
/* Findings listed in JSON and in records. */
#define QTK_AUDIT_LIST 64
/* Directory entries examined (recursively, three levels deep). */
#define QTK_AUDIT_MAX_ENTRIES 20000
/* A chat template larger than this is flagged. */
#define QTK_AUDIT_TEMPLATE_BIG (64u << 10)

typedef struct qtk_audit_finding {
	char kind[24];     /* see docs/provenance.md: "pickle" "python" "executable" "unlisted" "auto_map",
			      "template_url" "template_encoded" "template_escape" "template_control"
			      "template_invisible" "template_binary" "template_size" "template_trigger" */
	bool code;         /* executable content: qverify refuses it unless --allow-code */
	char where[200];   /* file (relative) or "kv tokenizer.chat_template", "tokenizer_config.json chat_template" */
	char detail[200];  /* what was found, at which byte */
} qtk_audit_finding;

typedef struct qtk_audit {
	size_t n, cap;
	qtk_audit_finding *f;  /* sorted by where, kind, detail once qtk_audit_model returns */
	size_t ncode;          /* findings with code set (counting dropped ones) */
	size_t ntemplates;     /* chat templates examined */
	size_t nentries;       /* directory entries examined */
	size_t dropped;        /* findings beyond QTK_AUDIT_MAX */
	bool listed;           /* a model directory was listed */
	bool truncated;        /* the listing stopped at QTK_AUDIT_MAX_ENTRIES */
} qtk_audit;

/* Audit a model: its directory (an HF directory on disk: every file, three levels deep), its
 * JSON side files (auto_map, chat templates), its chat-template metadata. 0, or QTK_E_IO when
 * out of memory (a directory that cannot be listed is skipped, `listed` false). Free with
 * qtk_audit_free. */
int qtk_audit_model(const qtk_model *m, qtk_audit *a, qtk_err *err);

/* The pieces, for tests and for callers with other inputs. Each returns 0 or QTK_E_IO. */
int qtk_audit_template(qtk_audit *a, const char *where, const char *text, size_t len);
/* Classify one file of a model directory by its relative path. */
int qtk_audit_file(qtk_audit *a, const char *rel);
/* A JSON side file: auto_map entries and chat templates in it. Unparsable JSON is skipped. */
int qtk_audit_json_file(qtk_audit *a, const char *name, const char *text, size_t len);
/* Sort the findings (done by qtk_audit_model). */
void qtk_audit_sort(qtk_audit *a);

/* {"scheme": "qtk-audit-v1", "templates": N, "code": N, "findings": [{"kind", "code", "where",
 * "detail"}...], "more": N (when findings were left out)}. NULL when out of memory. */
cJSON *qtk_audit_json(const qtk_audit *a);
void qtk_audit_free(qtk_audit *a);
#endif
