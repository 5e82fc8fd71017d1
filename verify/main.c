/* main.c - qverify: integrity and provenance audits of model files. */
#include "cli.h"
#include <string.h>

static const char usage[] =
	"usage: qverify [options] FILE\n"
	"\n"
	"  (no option)      validate the file's structure: every header, size and offset\n"
	"  -q, --quiet      print nothing; the exit status tells\n"
	"  -v, --verbose    list every tensor checked\n"
	"  -h, --help       this help\n"
	"  --version        print the version\n"
	"\n"
	"Exit status: 0 ok, 1 a check failed, 2 usage, 3 bad input data, 4 I/O error, 5 internal error.\n";

int main(int argc, char **argv)
{
	cli_init("qverify");
	const char *file = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-' || !a[1]) {
			if (file)
				return cli_usage_error("more than one FILE given");
			file = a;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(a, "--version")) {
			printf("qverify (qtk) %s\n", QTK_VERSION);
			return 0;
		} else if (!cli_common_flag(a)) {
			return cli_usage_error("unknown option '%s'", a);
		}
	}
	if (!file)
		return cli_usage_error("no FILE given");
	qtk_err err;
	qtk_model *m = qtk_open(file, &err);
	if (!m)
		return cli_fail(&err);
	uint64_t bytes = 0;
	for (size_t i = 0; i < m->ntensors; i++) {
		bytes += m->tensors[i].n_bytes;
		cli_verbose("ok %s", m->tensors[i].name);
	}
	if (g_cli.verbose >= 0)
		printf("%s: ok: %s, %zu tensors, %llu bytes of tensor data, %u file%s\n", file, qtk_model_format(m),
		       m->ntensors, (unsigned long long)bytes, m->nfiles, m->nfiles == 1 ? "" : "s");
	qtk_close(m);
	return 0;
}
