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
	"  --json           machine-readable report (schema_version 1); with --metadata,\n"
	"                   --tensor, --diff or --memory: that mode's JSON document\n"
	"  --stats          with --json: value statistics (reads tensor data)\n"
	"  --markdown       the summary as Markdown, for model cards\n"
	"  --metadata       every metadata key with its type and value\n"
	"  --tensor NAME    one tensor in detail: stats, histogram, outliers, channels\n"
	"  --diff OTHER     per-tensor error of FILE against OTHER (RMSE, SQNR, cosine)\n"
	"  --memory         weights + KV cache + compute estimate over a context sweep\n"
	"  --ctx LIST, --ctx-size LIST   with --memory: contexts to add to the sweep, comma-separated\n"
	"                   (4k,32k,131072; 32k = 32768)\n"
	"  --kv-type T      with --memory: K and V cache type (default f16): f32, f16,\n"
	"                   bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1\n"
	"  --cache-type-k T, -ctk T   with --memory: the K cache type alone\n"
	"  --cache-type-v T, -ctv T   with --memory: the V cache type alone\n"
	"  --gpu-layers N, -ngl N, --n-gpu-layers N   with --memory: RAM and VRAM with N layers offloaded\n"
	"  --flash-attn, -fa   with --memory: compute estimate with flash attention\n"
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

enum mode { M_DEFAULT, M_SUMMARY, M_JSON, M_MARKDOWN, M_TENSOR, M_DIFF, M_MEMORY, M_METADATA };

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

/* opt_value for an option with several names (NULL-terminated). */
static const char *opt_values(const char *a, const char *const *names, int argc, char **argv, int *i, bool *bad)
{
	const char *v;
	for (; *names; names++)
		if ((v = opt_value(a, *names, argc, argv, i, bad)) || *bad)
			return v;
	return NULL;
}

static bool g_tui_color = true;
static void set_mode(enum mode *mode, enum mode m, bool *conflict)
{
	if (*mode != M_DEFAULT && *mode != m)
		*conflict = true;
	if (*mode == M_DEFAULT)
		*mode = m;
}

/* --ctx LIST: comma-separated context sizes, each added to the sweep. */
static int parse_ctx_list(const char *v, insp_opts *o)
{
	const char *p = v;
	for (;;) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		char item[32];
		uint64_t c;
		if (n >= sizeof item || (memcpy(item, p, n), item[n] = 0, !parse_ctx(item, &c)))
			return cli_usage_error("bad --ctx value '%.*s' in '%s' (a number of tokens from 1 to 4294967296, "
					       "with k for 1024: 32k)", (int)(n < 64 ? n : 64), p, v);
		if (o->nctx == INSP_MAX_CTX)
			return cli_usage_error("too many --ctx values in '%s' (at most %d)", v, INSP_MAX_CTX);
		o->ctxs[o->nctx++] = c;
		if (!e)
			return 0;
		p = e + 1;
	}
}

static int kv_type_arg(const char *opt, const char *v, const char **dst)
{
	if (!(*dst = kv_type_canon(v)))
		return cli_usage_error("bad %s '%s' (one of %s)", opt, v, kv_type_list());
	return 0;
}

int main(int argc, char **argv)
{
	cli_init("qinspect");
	enum mode mode = M_DEFAULT;
	insp_opts o = {0};
	const char *file = NULL, *tensor = NULL, *other = NULL, *v;
	bool opts_done = false, conflict = false, missing = false, json = false, mem_opt = false;
	static const char *const o_ctx[] = {"--ctx", "--ctx-size", NULL}, *const o_ctk[] = {"--cache-type-k", "-ctk", NULL},
				 *const o_ctv[] = {"--cache-type-v", "-ctv", NULL},
				 *const o_ngl[] = {"--gpu-layers", "--n-gpu-layers", "-ngl", NULL};
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
		} else if (!strcmp(a, "--metadata")) {
			set_mode(&mode, M_METADATA, &conflict);
		} else if (!strcmp(a, "--flash-attn") || !strcmp(a, "-fa")) {
			o.flash_attn = mem_opt = true;
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
		} else if ((v = opt_values(a, o_ctx, argc, argv, &i, &missing))) {
			mem_opt = true;
			if (parse_ctx_list(v, &o))
				return 2;
		} else if ((v = opt_value(a, "--kv-type", argc, argv, &i, &missing))) {
			mem_opt = true;
			if (kv_type_arg("--kv-type", v, &o.kv_type))
				return 2;
		} else if ((v = opt_values(a, o_ctk, argc, argv, &i, &missing))) {
			mem_opt = true;
			if (kv_type_arg("--cache-type-k", v, &o.kv_type_k))
				return 2;
		} else if ((v = opt_values(a, o_ctv, argc, argv, &i, &missing))) {
			mem_opt = true;
			if (kv_type_arg("--cache-type-v", v, &o.kv_type_v))
				return 2;
		} else if ((v = opt_values(a, o_ngl, argc, argv, &i, &missing))) {
			mem_opt = o.gpu_split = true;
			if (v[0] == '-' || !qtk_parse_u64(v, &o.gpu_layers) || o.gpu_layers > 0x7fffffffu)
				return cli_usage_error("bad --gpu-layers value '%s' (a number of layers from 0 to 2147483647)", v);
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
		return cli_usage_error("choose one of --summary, --markdown, --metadata, --tensor, --diff, --memory");
	if (json && (mode == M_SUMMARY || mode == M_MARKDOWN))
		return cli_usage_error("--json does not go with %s", mode == M_SUMMARY ? "--summary" : "--markdown");
	if (json && mode == M_DEFAULT)
		mode = M_JSON;
	if (!file)
		return cli_usage_error("no FILE given");
	if (o.stats && mode != M_JSON)
		return cli_usage_error("--stats goes with --json alone");
	if (mem_opt && mode != M_MEMORY)
		return cli_usage_error("--ctx, --kv-type, --cache-type-k/-v, --gpu-layers and --flash-attn go with --memory");
	o.json = json;
	o.width = insp_term_width(1);
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
	case M_METADATA: rc = report_metadata(m, stdout, &o); break;
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
