/* main.c - qverify: integrity and provenance audits of model files (docs/cli.md, "qverify"). */
#include "verify.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: qverify [options] FILE\n"
	"       qverify --emit-record FILE\n"
	"       qverify --record REC.json [--files] FILE\n"
	"       qverify --against SOURCE [--max-error DB] FILE\n"
	"       qverify --emit-bom cyclonedx|spdx FILE\n"
	"       qverify --sign PRIVATE.pem [--signature SIG] [--shard-size N] MODEL\n"
	"       qverify --verify-signature PUBLIC.pem [--signature SIG] [--content] MODEL\n"
	"\n"
	"  (no mode)            validate the structure and check the embedded provenance record:\n"
	"                       recompute every tensor's content digests and compare\n"
	"  --emit-record        print a deployment record for FILE (files, per-tensor digests, roots)\n"
	"  --record REC.json    check FILE against a record: every tensor's content digest must match;\n"
	"                       a file-hash mismatch alone is reported as \"container changed\"\n"
	"  --files              with --record: also require the file-level SHA-256 to match\n"
	"  --against SOURCE     check FILE derives from SOURCE: per tensor exact, or its SQNR\n"
	"  --max-error DB       with --against: fail when a tensor's SQNR is below DB decibels\n"
	"  --emit-bom FORMAT    print an AI-BOM of FILE: cyclonedx (CycloneDX 1.6) or spdx (SPDX 3.0.1)\n"
	"  --allow-code         report executable content (pickles, Python, auto_map) instead of failing\n"
	"  --sign KEY.pem       sign MODEL (a file, a split set or a directory) in the OpenSSF model\n"
	"                       signing format (Sigstore bundle, DSSE, in-toto), with qtk's content\n"
	"                       digests; Ed25519 or ECDSA P-256/P-384/P-521 keys in PEM\n"
	"  --verify-signature KEY.pem   check MODEL against its signature: key, signature, every\n"
	"                       file's SHA-256, every tensor's content digest, the embedded record\n"
	"  --signature SIG      the signature file (default: DIR/model.sig, FILE.sig)\n"
	"  --shard-size N       with --sign: hash files in shards of N bytes (\"shards\" serialization)\n"
	"  --content            with --verify-signature: the signed tensor content decides; file\n"
	"                       differences (a re-containered model) are notes\n"
	"  --json               machine-readable report\n"
	"  --threads N          hashing threads (default: all cores); results do not depend on it\n"
	"  -q, --quiet          print nothing; the exit status tells\n"
	"  -v, --verbose        list every tensor\n"
	"  --progress, --no-progress   progress on stderr (default: when it is a terminal)\n"
	"  --no-color           no colour (also NO_COLOR)\n"
	"  -h, --help           this help\n"
	"  --version            print the version\n"
	"\n"
	"FILE and SOURCE may be a .gguf file (or any shard of a split set), a .safetensors file, a\n"
	"model.safetensors.index.json, a Hugging Face directory, a QPK file, a .tar, .tar.gz,\n"
	".tar.zst or .zip archive holding one of these, or a .zst-compressed model file.\n"
	"Exit status: 0 ok, 1 a check failed, 2 usage, 3 bad input data, 4 I/O error, 5 internal error.\n";

/* The value of an option that takes one ("--record X" or "--record=X"). */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);
	const char *a = argv[*i];
	if (strncmp(a, name, n))
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n])
		return NULL;
	if (*i + 1 >= argc)
		return "";
	return argv[++*i];
}

static int set_mode(vopts *o, vmode m)
{
	if (o->mode && o->mode != m)
		return cli_usage_error("--emit-record, --emit-bom, --record, --against, --sign and --verify-signature exclude each other");
	o->mode = m;
	return 0;
}

static int parse_args(int argc, char **argv, vopts *o)
{
	bool done = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		if (!done && !strcmp(a, "--")) {
			done = true; /* everything after it is a file name */
		} else if (done || a[0] != '-' || !a[1]) {
			if (o->file)
				return cli_usage_error("more than one FILE given");
			o->file = a;
		} else if (!strcmp(a, "--emit-record")) {
			if (o->bom)
				return cli_usage_error("--emit-record and --emit-bom exclude each other");
			if (set_mode(o, MODE_EMIT))
				return 2;
		} else if ((v = opt_value(argc, argv, &i, "--emit-bom"))) {
			if (strcmp(v, "cyclonedx") && strcmp(v, "spdx"))
				return cli_usage_error("--emit-bom needs cyclonedx or spdx, not '%s'", v);
			if (o->mode == MODE_EMIT && !o->bom)
				return cli_usage_error("--emit-record and --emit-bom exclude each other");
			if (set_mode(o, MODE_EMIT))
				return 2;
			o->bom = v;
		} else if (!strcmp(a, "--allow-code")) {
			o->allow_code = true;
		} else if ((v = opt_value(argc, argv, &i, "--record"))) {
			if (!*v)
				return cli_usage_error("--record needs a file");
			if (set_mode(o, MODE_RECORD))
				return 2;
			o->record = v;
		} else if ((v = opt_value(argc, argv, &i, "--against"))) {
			if (!*v)
				return cli_usage_error("--against needs a file");
			if (set_mode(o, MODE_AGAINST))
				return 2;
			o->source = v;
		} else if ((v = opt_value(argc, argv, &i, "--sign"))) {
			if (!*v)
				return cli_usage_error("--sign needs a private key file");
			if (set_mode(o, MODE_SIGN))
				return 2;
			o->sign_key = v;
		} else if ((v = opt_value(argc, argv, &i, "--verify-signature"))) {
			if (!*v)
				return cli_usage_error("--verify-signature needs a public key file");
			if (set_mode(o, MODE_SIGVERIFY))
				return 2;
			o->verify_key = v;
		} else if ((v = opt_value(argc, argv, &i, "--signature"))) {
			if (!*v)
				return cli_usage_error("--signature needs a file");
			o->signature = v;
		} else if ((v = opt_value(argc, argv, &i, "--shard-size"))) {
			if (!qtk_parse_u64(v, &o->shard_size) || o->shard_size < 1 || o->shard_size > (1ull << 50))
				return cli_usage_error("--shard-size needs a positive number of bytes, not '%s'", v);
		} else if (!strcmp(a, "--content")) {
			o->sig_content = true;
		} else if ((v = opt_value(argc, argv, &i, "--max-error"))) {
			char *end = NULL;
			o->max_error_db = strtod(v, &end);
			if (!*v || !end || *end || !isfinite(o->max_error_db))
				return cli_usage_error("--max-error needs a number of decibels, not '%s'", v);
			o->has_max_error = true;
		} else if ((v = opt_value(argc, argv, &i, "--threads"))) {
			uint64_t n;
			if (!qtk_parse_u64(v, &n) || n < 1 || n > 256)
				return cli_usage_error("--threads needs a number from 1 to 256, not '%s'", v);
			o->threads = (int)n;
		} else if (!strcmp(a, "--files")) {
			o->files = true;
		} else if (!strcmp(a, "--json")) {
			o->json = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage, stdout);
			return -1;
		} else if (!strcmp(a, "--version")) {
			printf("qverify (qtk) %s\n", QTK_VERSION);
			return -1;
		} else if (!cli_common_flag(a)) {
			return cli_usage_error("unknown option '%s'", a);
		}
	}
	if (!o->file)
		return cli_usage_error("no FILE given");
	if (!o->mode)
		o->mode = MODE_EMBEDDED;
	if (o->has_max_error && o->mode != MODE_AGAINST)
		return cli_usage_error("--max-error needs --against");
	if (o->bom && o->json)
		return cli_usage_error("--json does not apply to --emit-bom (the BOM is JSON)");
	if (o->signature && !(o->mode & (MODE_SIGN | MODE_SIGVERIFY)))
		return cli_usage_error("--signature needs --sign or --verify-signature");
	if (o->shard_size && o->mode != MODE_SIGN)
		return cli_usage_error("--shard-size needs --sign (a signature names its own serialization)");
	if (o->sig_content && o->mode != MODE_SIGVERIFY)
		return cli_usage_error("--content needs --verify-signature");
	if (o->files && o->mode != MODE_RECORD)
		return cli_usage_error("--files needs --record (a file cannot carry its own hash)");
	return 0;
}

int main(int argc, char **argv)
{
	cli_init("qverify");
	cli_install_signals();
	vopts o;
	memset(&o, 0, sizeof o);
	int rc = parse_args(argc, argv, &o);
	if (rc)
		return rc < 0 ? 0 : rc;
	cli_set_activity("verifying %s", o.file ? o.file : "");
	vstate s;
	memset(&s, 0, sizeof s);
	s.o = &o;
	qtk_err_clear(&s.err);
	/* a failed check stops --emit-record: no record is printed for a file that fails its own digests */
	/* nor is a model signed that fails them; a signature that does not verify ends the run */
	for (size_t i = 0; i < qv_nchecks && !rc && !s.stop && !((o.mode & (MODE_EMIT | MODE_SIGN)) && s.status); i++)
		if (qv_checks[i].modes & o.mode)
			rc = qv_checks[i].run(&s);
	if (rc && o.mode == MODE_SIGVERIFY && s.status) {
		/* the files already differ from the signature (reordered shards, an edited header): that is
		 * the verdict; the tensor level could not be read */
		qv_result(&s, "signed_content", "skipped", "cannot be checked: %s", s.err.msg);
		rc = 0;
	}
	int status;
	if (rc) {
		if (!s.err.code)
			s.err.code = rc;
		status = cli_fail(&s.err);
	} else if (o.bom && !s.status) {
		status = qv_emit_bom(&s) ? cli_fail(&s.err) : 0;
	} else {
		qv_report(&s);
		status = s.status;
	}
	qv_free(&s);
	return status;
}
