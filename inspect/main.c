/* main.c - qinspect: look inside model files. */
#include "cli.h"
#include "inspect.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
	"usage: qinspect [options] FILE\n"
	"\n"
	"  --summary        human-readable table: tensors, layouts, sizes, bits per weight\n"
	"  --json           machine-readable report (schema_version 1)\n"
	"  --stats          with --json: value statistics (reads tensor data)\n"
	"  --markdown       the summary as Markdown, for model cards\n"
	"  --tensor NAME    one tensor in detail: stats, histogram, outliers, channels\n"
	"  --diff OTHER     per-tensor error of FILE against OTHER (RMSE, SQNR, cosine)\n"
	"  --memory         weights + KV cache estimate with a context sweep (--json too)\n"
	"  --ctx N          with --memory: include context N in the sweep\n"
	"  --kv-type T      with --memory: KV cache type f16, q8_0 or q4_0 (default f16)\n"
	"  --no-color       monochrome output (also NO_COLOR)\n"
	"  --progress, --no-progress   progress on stderr (default: when it is a terminal)\n"
	"  -q, --quiet      only errors on stderr\n"
	"  -v, --verbose    more detail on stderr\n"
	"  -h, --help       this help\n"
	"  --version        print the version\n"
	"\n"
	"FILE may be a .gguf file (or any shard of a split set), a .safetensors file,\n"
	"a model.safetensors.index.json, a Hugging Face model directory, a QPK file, a .tar,\n"
	".tar.gz, .tar.zst or .zip archive holding one of these, or a .zst-compressed model file.\n"
	"Without a mode and with a terminal on stdout, qinspect opens the browser\n"
	"(press ? there for its keys); otherwise it prints the summary.\n"
	"Exit status: 0 ok, 2 usage, 3 bad input data, 4 I/O error, 5 internal error.\n";

enum mode { M_DEFAULT, M_SUMMARY, M_JSON, M_MARKDOWN, M_TENSOR, M_DIFF, M_MEMORY };

/* The value of an option that takes one: "--opt V" or "--opt=V". NULL when
 * `a` is not this option; *bad set when the value is missing. */
static const char *opt_value(const char *a, const char *name, int argc, char **argv, int *i, bool *bad)
{
	size_t n = strlen(name);
	if (strncmp(a, name, n) != 0)
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n])
		return NULL;
	if (*i + 1 >= argc) {
		*bad = true;
		return NULL;
	}
	return argv[++*i];
}

static bool g_tui_color = true;
static void set_mode(enum mode *mode, enum mode m, bool *conflict)
{
	if (*mode != M_DEFAULT && *mode != m && !(*mode == M_JSON && m == M_MEMORY) && !(*mode == M_MEMORY && m == M_JSON))
		*conflict = true;
	if (*mode == M_DEFAULT || m == M_MEMORY)
		*mode = m;
}

int main(int argc, char **argv)
{
	cli_init("qinspect");
	enum mode mode = M_DEFAULT;
	insp_opts o = {0};
	const char *file = NULL, *tensor = NULL, *other = NULL, *v;
	bool opts_done = false, conflict = false, missing = false, json = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (opts_done || a[0] != '-' || !a[1]) {
			if (file)
				return cli_usage_error("more than one FILE given ('%s' and '%s')", file, a);
			file = a;
		} else if (!strcmp(a, "--")) {
			opts_done = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(a, "--version")) {
			printf("qinspect (qtk) %s\n", QTK_VERSION);
			return 0;
		} else if (!strcmp(a, "--summary")) {
			set_mode(&mode, M_SUMMARY, &conflict);
		} else if (!strcmp(a, "--json")) {
			json = true;
			set_mode(&mode, M_JSON, &conflict);
		} else if (!strcmp(a, "--markdown")) {
			set_mode(&mode, M_MARKDOWN, &conflict);
		} else if (!strcmp(a, "--memory")) {
			set_mode(&mode, M_MEMORY, &conflict);
		} else if (!strcmp(a, "--no-color")) {
			g_tui_color = false;
		} else if ((v = opt_value(a, "--tensor", argc, argv, &i, &missing))) {
			tensor = v;
			set_mode(&mode, M_TENSOR, &conflict);
		} else if ((v = opt_value(a, "--diff", argc, argv, &i, &missing))) {
			other = v;
			set_mode(&mode, M_DIFF, &conflict);
		} else if ((v = opt_value(a, "--ctx", argc, argv, &i, &missing))) {
			if (!qtk_parse_u64(v, &o.ctx) || o.ctx == 0 || o.ctx > (1ull << 40))
				return cli_usage_error("bad --ctx value '%s' (a positive number of tokens)", v);
		} else if ((v = opt_value(a, "--kv-type", argc, argv, &i, &missing))) {
			if (!strcmp(v, "f16") || !strcmp(v, "q8_0") || !strcmp(v, "q4_0"))
				o.kv_type = v;
			else
				return cli_usage_error("bad --kv-type '%s' (f16, q8_0 or q4_0)", v);
		} else if (missing) {
			return cli_usage_error("option '%s' needs a value", a);
		} else if (!strcmp(a, "--stats")) {
			o.stats = true;
		} else if (!cli_common_flag(a)) {
			return cli_usage_error("unknown option '%s'", a);
		}
	}
	if (missing)
		return cli_usage_error("option '%s' needs a value", argv[argc - 1]);
	if (conflict)
		return cli_usage_error("choose one of --summary, --json, --markdown, --tensor, --diff, --memory");
	if (!file)
		return cli_usage_error("no FILE given");
	if (o.stats && mode != M_JSON)
		return cli_usage_error("--stats goes with --json");
	if ((o.ctx || o.kv_type) && mode != M_MEMORY)
		return cli_usage_error("--ctx and --kv-type go with --memory");
	o.json = json;
	o.color = g_cli.color && g_tui_color;
	if (cli_progress_enabled()) {
		o.progress = cli_progress;
		o.progress_end = cli_progress_end;
	}
	qtk_err err;
	qtk_model *m = qtk_open(file, &err);
	if (!m)
		return cli_fail(&err);
	if (qtk_scheme_unexplained(m, &err)) /* shown as they are stored, with the warning */
		cli_warn_err(&err);
	int rc, status = 0;
	qtk_model *om = NULL;
	switch (mode) {
	case M_JSON: rc = report_json(m, stdout, &o); break;
	case M_MARKDOWN: rc = report_markdown(m, stdout, &o); break;
	case M_TENSOR: rc = report_tensor(m, tensor, stdout, &o); break;
	case M_MEMORY: rc = report_memory(m, stdout, &o); break;
	case M_DIFF:
		om = qtk_open(other, &err);
		if (!om) {
			qtk_close(m);
			return cli_fail(&err);
		}
		rc = report_diff(om, m, stdout, &o);
		if (rc && !m->err.code)
			m->err = om->err;
		break;
	case M_DEFAULT:
		if (isatty(1) && isatty(0)) {
			o.color = g_tui_color && !(getenv("NO_COLOR") && *getenv("NO_COLOR"));
			status = tui_run(m, &o);
			qtk_close(m);
			return status;
		}
		rc = report_summary(m, stdout, &o);
		break;
	default: rc = report_summary(m, stdout, &o); break;
	}
	if (rc)
		status = cli_fail(&m->err);
	qtk_close(om);
	if (fflush(stdout) != 0 && !status) {
		fprintf(stderr, "qinspect: error: cannot write the report\n");
		status = 4;
	}
	qtk_close(m);
	return status;
}
