/* main.c - qconvert: command line, plan, execution and summary. */
#include "cli.h"
#include "convert.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage[] =
	"usage: qconvert [options] INPUT OUTPUT\n"
	"\n"
	"  -t, --to LAYOUT        target layout: keep (default); f32 f16 bf16; ggml types q4_0 q4_1 q5_0\n"
	"                         q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs; llama.cpp mixes Q2_K\n"
	"                         Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K (also Q4_0 ... Q8_0,\n"
	"                         IQ4_NL, IQ4_XS); awq; gptq, gptq-v1, gptq-v2; mlx; ct-int;\n"
	"                         auto-exact\n"
	"  --bits N               bits for gptq (2, 3, 4, 8), mlx (2, 3, 4, 5, 6, 8) and ct-int (2, 4, 8)\n"
	"                         targets (default: the source's, else 4)\n"
	"  --group-size N         group size for awq/gptq/mlx/ct-int targets (32, 64, 128; default: the\n"
	"                         source's when exact, 32 from k-quants, else 128; mlx 64)\n"
	"  --sym                  symmetric gptq or ct-int target\n"
	"  --imatrix FILE         llama.cpp importance matrix for importance-weighted quantization\n"
	"  --split-max-size SIZE  shard the output: GGUF splits (-00001-of-0000N.gguf) or safetensors\n"
	"                         shards in a Hugging Face directory (500M, 4G, 2GiB, ...)\n"
	"  --names hf|gguf|keep   tensor naming of the output (default: HF names in a directory, GGUF\n"
	"                         names (with llama.cpp's Q/K row order) in .gguf, else the source's)\n"
	"  --set KEY=VALUE        set or override a metadata key in the output (repeatable)\n"
	"  --exact                fail (exit 1) unless every tensor converts bit-exactly\n"
	"  --max-error DB         fail (exit 1) if any tensor's SQNR falls below DB decibels\n"
	"  --report FILE          write the per-tensor conversion report (JSON)\n"
	"  --threads N            worker threads (default: all cores); output is identical for any N\n"
	"  --dry-run              print the plan and write nothing\n"
	"  --force                replace an existing OUTPUT directory even if it holds files qtk did\n"
	"                         not write (they are removed with it)\n"
	"  --progress, --no-progress   force the progress bar on or off (default: on a terminal)\n"
	"  --no-color             no colour (also NO_COLOR)\n"
	"  -q, --quiet            only errors on stderr\n"
	"  -v, --verbose          a plan line per tensor\n"
	"  -h, --help             this help\n"
	"  --version              print the version\n"
	"\n"
	"INPUT: a .gguf file (or any shard of a split set), a .safetensors file, a\n"
	"model.safetensors.index.json, a Hugging Face directory, a QPK file, a .tar, .tar.gz, .tar.zst\n"
	"or .zip archive holding one of these, or a .zst-compressed model file; detected from content.\n"
	"OUTPUT: *.gguf (split sets with --split-max-size), *.safetensors, *.qpk (QPK, qtk's\n"
	"packed-group container; *.awq and *.gptq are QPK files defaulting to that layout), a directory\n"
	"(path ending in '/', or an existing one) for a Hugging Face directory, replaced as a whole,\n"
	"or *.tar, *.tar.zst, *.zip for a deployment bundle (the model plus its provenance record).\n"
	"Exact conversions are found and used (AWQ <-> GPTQ repacks, int4 -> q4_0/q5_0/q8_0, ...), and every\n"
	"tensor is verified by decoding it again.\n"
	"Exit status: 0 ok, 1 a check failed (--exact, --max-error), 2 usage, 3 bad input data,\n"
	"4 I/O error, 5 internal error.\n";

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "4G", "500M", "100K" (powers of 1000, as llama.cpp's gguf-split), "2GiB", or bytes. */
static int parse_size(const char *s, uint64_t *out)
{
	static const struct { const char *suf; uint64_t mul; } units[] = {
		{"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
		{"K", 1000ull}, {"M", 1000000ull}, {"G", 1000000000ull}, {"T", 1000000000000ull}, {"", 1},
	};
	size_t n = strlen(s);
	for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
		size_t k = strlen(units[i].suf);
		if (n <= k || strcmp(s + n - k, units[i].suf))
			continue;
		char num[32];
		if (n - k >= sizeof num)
			return -1;
		memcpy(num, s, n - k);
		num[n - k] = 0;
		uint64_t v;
		if (!qtk_parse_u64(num, &v) || !v || !qtk_mul_u64(v, units[i].mul, out))
			return -1;
		return 0;
	}
	return -1;
}

static int parse_args(int argc, char **argv, conv_opts *o)
{
	const char *pos[2] = {NULL, NULL};
	int npos = 0;
	bool done = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = NULL;
		if (done || a[0] != '-' || !a[1]) {
			if (npos == 2)
				return cli_usage_error("unexpected argument '%s'", a);
			pos[npos++] = a;
			continue;
		}
		if (!strcmp(a, "--")) {
			done = true;
			continue;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage, stdout);
			return -1;
		}
		if (!strcmp(a, "--version")) {
			printf("qconvert (qtk) %s\n", QTK_VERSION);
			return -1;
		}
		if (cli_common_flag(a))
			continue;
		if (!strcmp(a, "--exact")) {
			o->exact = true;
			continue;
		}
		if (!strcmp(a, "--dry-run")) {
			o->dry_run = true;
			continue;
		}
		if (!strcmp(a, "--sym")) {
			o->sym = true;
			continue;
		}
		if (!strcmp(a, "--force")) {
			o->force = true;
			continue;
		}
		/* options with a value: "--opt VALUE" or "--opt=VALUE" */
		static const char *const with_val[] = {"-t", "--to", "--set", "--max-error", "--report", "--threads",
						       "--bits", "--group-size", "--imatrix", "--names", "--split-max-size"};
		const char *name = NULL;
		for (size_t k = 0; k < sizeof with_val / sizeof *with_val; k++) {
			size_t n = strlen(with_val[k]);
			if (!strcmp(a, with_val[k])) {
				if (i + 1 >= argc)
					return cli_usage_error("option '%s' needs a value", a);
				name = with_val[k];
				val = argv[++i];
				break;
			}
			if (!strncmp(a, with_val[k], n) && a[n] == '=' && with_val[k][1] == '-') {
				name = with_val[k];
				val = a + n + 1;
				break;
			}
		}
		if (!name)
			return cli_usage_error("unknown option '%s'", a);
		if (!strcmp(name, "-t") || !strcmp(name, "--to")) {
			o->target_name = val;
			if (conv_parse_target(val, &o->target))
				return cli_usage_error("unknown layout '%s' for --to", val);
		} else if (!strcmp(name, "--set")) {
			if (!strchr(val, '=') || val[0] == '=')
				return cli_usage_error("--set takes KEY=VALUE, not '%s'", val);
			if (o->nsets == CONV_MAX_SETS)
				return cli_usage_error("too many --set options (limit %d)", CONV_MAX_SETS);
			o->sets[o->nsets++] = val;
		} else if (!strcmp(name, "--max-error")) {
			char *end;
			o->max_error_db = strtod(val, &end);
			if (end == val || *end)
				return cli_usage_error("--max-error takes decibels, not '%s'", val);
			o->has_max_error = true;
		} else if (!strcmp(name, "--report")) {
			o->report = val;
		} else if (!strcmp(name, "--bits")) {
			uint64_t n;
			if (!qtk_parse_u64(val, &n) || (n != 2 && n != 3 && n != 4 && n != 5 && n != 6 && n != 8))
				return cli_usage_error("--bits takes 2, 3, 4, 5, 6 or 8, not '%s'", val);
			o->bits = (unsigned)n;
		} else if (!strcmp(name, "--group-size")) {
			uint64_t n;
			if (!qtk_parse_u64(val, &n) || (n != 32 && n != 64 && n != 128))
				return cli_usage_error("--group-size takes 32, 64 or 128, not '%s'", val);
			o->group_size = (uint32_t)n;
		} else if (!strcmp(name, "--split-max-size")) {
			if (parse_size(val, &o->split_max_size))
				return cli_usage_error("--split-max-size takes a size such as 500M, 4G or 2GiB, not '%s'", val);
		} else if (!strcmp(name, "--names")) {
			if (!strcmp(val, "hf"))
				o->names = NAMES_HF;
			else if (!strcmp(val, "gguf"))
				o->names = NAMES_GGUF;
			else if (!strcmp(val, "keep"))
				o->names = NAMES_KEEP;
			else
				return cli_usage_error("--names takes hf, gguf or keep, not '%s'", val);
		} else if (!strcmp(name, "--imatrix")) {
			o->imatrix_path = val;
		} else if (!strcmp(name, "--threads")) {
			uint64_t n;
			if (!qtk_parse_u64(val, &n) || n < 1 || n > 1024)
				return cli_usage_error("--threads takes a number from 1 to 1024, not '%s'", val);
			o->threads = (int)n;
		}
	}
	if (npos != 2)
		return cli_usage_error("need INPUT and OUTPUT");
	o->input = pos[0];
	o->output = pos[1];
	return 0;
}

int main(int argc, char **argv)
{
	cli_init("qconvert");
	cli_install_signals();
	conv_opts o;
	memset(&o, 0, sizeof o);
	o.target.kind = TGT_KEEP;
	int r = parse_args(argc, argv, &o);
	if (r)
		return r < 0 ? 0 : r;
	o.out_kind = qtk_out_kind_for_path(o.output);
	if (o.out_kind == QTK_OUT_UNKNOWN) {
		char forms[256];
		qtk_out_path_forms(forms, sizeof forms);
		return cli_usage_error("cannot tell the output format from '%s' (use %s)", o.output, forms);
	}
	/* *.awq and *.gptq are QPK files whose default target is that layout */
	size_t ol = strlen(o.output);
	if (o.target.kind == TGT_KEEP && o.out_kind == QTK_OUT_QPK && ol > 4) {
		if (!qtk_strcasecmp(o.output + ol - 4, ".awq"))
			o.target.kind = TGT_AWQ;
		else if (ol > 5 && !qtk_strcasecmp(o.output + ol - 5, ".gptq"))
			o.target.kind = TGT_GPTQ;
	}
	double t0 = now_s();
	qtk_err err;
	qtk_model *in = qtk_open(o.input, &err);
	if (!in)
		return cli_fail(&err);
	if (qtk_scheme_unexplained(in, &err)) { /* packed parts are never written as weights */
		qtk_close(in);
		return cli_fail(&err);
	}
	conv_result res;
	int status = conv_run(in, &o, &res);
	if (status == 0) {
		res.elapsed = now_s() - t0;
		conv_print_summary(&o, &res);
	}
	conv_result_free(&res);
	qtk_close(in);
	return status;
}
