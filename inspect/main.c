/* main.c - qinspect: look inside model files. */
#include "cli.h"
#include "inspect.h"
#include <string.h>
#include <unistd.h>

static const char usage[] =
	"usage: qinspect [options] FILE\n"
	"\n"
	"  --summary        human-readable table: tensors, layouts, sizes, bits per weight\n"
	"  --json           machine-readable report (schema_version 1)\n"
	"  --stats          with --json: value statistics (reads tensor data)\n"
	"  --markdown       the summary as Markdown, for model cards\n"
	"  --no-color       monochrome output (also NO_COLOR)\n"
	"  -q, --quiet      only errors on stderr\n"
	"  -v, --verbose    more detail on stderr\n"
	"  -h, --help       this help\n"
	"  --version        print the version\n"
	"\n"
	"FILE may be a .gguf file (or any shard of a split set), a .safetensors file,\n"
	"a model.safetensors.index.json or a Hugging Face model directory.\n"
	"Exit status: 0 ok, 2 usage, 3 bad input data, 4 I/O error, 5 internal error.\n";

enum mode { M_DEFAULT, M_SUMMARY, M_JSON, M_MARKDOWN };

int main(int argc, char **argv)
{
	cli_init("qinspect");
	enum mode mode = M_DEFAULT;
	insp_opts o = {0};
	const char *file = NULL;
	bool opts_done = false;
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
			mode = M_SUMMARY;
		} else if (!strcmp(a, "--json")) {
			mode = M_JSON;
		} else if (!strcmp(a, "--markdown")) {
			mode = M_MARKDOWN;
		} else if (!strcmp(a, "--stats")) {
			o.stats = true;
		} else if (!cli_common_flag(a)) {
			return cli_usage_error("unknown option '%s'", a);
		}
	}
	if (!file)
		return cli_usage_error("no FILE given");
	if (o.stats && mode != M_JSON)
		return cli_usage_error("--stats goes with --json");
	o.color = g_cli.color;
	qtk_err err;
	qtk_model *m = qtk_open(file, &err);
	if (!m)
		return cli_fail(&err);
	int rc;
	switch (mode) {
	case M_JSON: rc = report_json(m, stdout, &o); break;
	case M_MARKDOWN: rc = report_markdown(m, stdout, &o); break;
	default: rc = report_summary(m, stdout, &o); break;
	}
	int status = 0;
	if (rc)
		status = cli_fail(&m->err);
	if (fflush(stdout) != 0 && !status) {
		fprintf(stderr, "qinspect: error: cannot write the report\n");
		status = 4;
	}
	qtk_close(m);
	return status;
}
