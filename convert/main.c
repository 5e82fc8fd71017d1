/* main.c - qconvert: command line, plan, execution and summary. */
#include "cli.h"
#include "convert.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
	"usage: qconvert [options] INPUT OUTPUT\n"
	"\n"
	"  -t, --to LAYOUT        target layout (case does not matter): keep (default, also copy);\n"
	"                         f32 f16 bf16; llama-quantize's types Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K\n"
	"                         Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS\n"
	"                         (Q3_K, Q4_K, Q5_K mean the _M mixes), with llama-quantize's rules per\n"
	"                         tensor; mxfp4, nvfp4 (every matrix); awq; gptq, gptq-v1, gptq-v2; mlx;\n"
	"                         ct-int; ct-fp8; auto-exact\n"
	"  --pure                 one type for every matrix: the mix's base type (llama-quantize --pure)\n"
	"  --bits N               bits for gptq (2, 3, 4, 8), mlx (2, 3, 4, 5, 6, 8) and ct-int (2, 4, 8)\n"
	"                         targets (default: the source's, else 4)\n"
	"  --group-size N         group size for awq/gptq/mlx/ct-int targets (32, 64, 128; default: the\n"
	"                         source's when exact, 32 from k-quants, else 128; mlx 64)\n"
	"  --sym                  symmetric gptq or ct-int target\n"
	"  --strategy channel|block   ct-fp8 scales per output channel (default; llm-compressor's\n"
	"                         FP8_DYNAMIC) or per 128 x 128 block (FP8_BLOCK)\n"
	"  --imatrix FILE         llama.cpp importance matrix for importance-weighted quantization\n"
	"  --split-max-size SIZE  shard the output: GGUF splits (-00001-of-0000N.gguf) or safetensors\n"
	"                         shards in a Hugging Face directory (500M, 4G, 2GiB, ...)\n"
	"  --names hf|gguf|keep   tensor naming of the output (default: HF names in a directory, GGUF\n"
	"                         names (with llama.cpp's Q/K row order) in .gguf, else the source's)\n"
	"  --set KEY=VALUE        set or override a metadata key in the output (repeatable)\n"
	"  --carry FILE           carry side file FILE of the input though it is not a known one\n"
	"                         (code such as modeling_x.py, a pickle): never without it (repeatable)\n"
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

/* An unknown --to name: the nearest known one, then the list. */
static int unknown_target(const char *val)
{
	const char *names[64];
	size_t n = conv_target_names(names, sizeof names / sizeof *names);
	const char *near = cli_nearest(val, names, n);
	char list[512] = "";
	size_t at = 0;
	for (size_t i = 0; i < n && at + 1 < sizeof list; i++) {
		int k = snprintf(list + at, sizeof list - at, "%s%s", i ? " " : "", names[i]);
		if (k < 0 || (size_t)k >= sizeof list - at)
			break;
		at += (size_t)k;
	}
	if (near)
		return cli_usage_error("unknown layout '%s' for --to; did you mean '%s'? (known: %s)", val, near, list);
	return cli_usage_error("unknown layout '%s' for --to (known: %s)", val, list);
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
		if (!strcmp(a, "--pure")) {
			o->pure = true;
			continue;
		}
		if (!strcmp(a, "--force")) {
			o->force = true;
			continue;
		}
		/* options with a value: "--opt VALUE" or "--opt=VALUE" */
		static const char *const with_val[] = {"-t", "--to", "--set", "--max-error", "--report", "--threads",
						       "--bits", "--group-size", "--imatrix", "--names", "--split-max-size",
						       "--strategy", "--carry"};
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
			int tr = conv_parse_target(val, &o->target);
			if (tr == CONV_TARGET_READ_ONLY)
				return cli_usage_error("--to %s: qtk can read %s but not write it (yet); writable ggml "
						       "types: q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs mxfp4 nvfp4",
						       val, val);
			if (tr)
				return unknown_target(val);
		} else if (!strcmp(name, "--carry")) {
			if (!val[0] || val[0] == '.' || strchr(val, '/') || strchr(val, '\\'))
				return cli_usage_error("--carry takes a side file's name (no directory), not '%s'", val);
			if (o->ncarry == CONV_MAX_SETS)
				return cli_usage_error("too many --carry options (limit %d)", CONV_MAX_SETS);
			o->carry[o->ncarry++] = val;
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
		} else if (!strcmp(name, "--strategy")) {
			if (strcmp(val, "channel") && strcmp(val, "block"))
				return cli_usage_error("--strategy takes channel or block, not '%s'", val);
			o->fp8_block = !strcmp(val, "block");
			o->has_strategy = true;
		} else if (!strcmp(name, "--imatrix")) {
			o->imatrix_path = val;
		} else if (!strcmp(name, "--threads")) {
			uint64_t n;
			if (!qtk_parse_u64(val, &n) || n < 1 || n > 1024)
				return cli_usage_error("--threads takes a number from 1 to 1024, not '%s'", val);
			o->threads = (int)n;
		}
	}
	if (o->pure && conv_apply_pure(&o->target))
		return cli_usage_error("--pure applies to llama.cpp's types and mixes (--to q4_k_m --pure), not to '%s'",
				       o->target_name ? o->target_name : "keep");
	if (npos != 2)
		return cli_usage_error("need INPUT and OUTPUT");
	if (o->has_strategy && o->target.kind != TGT_CT_FP8)
		return cli_usage_error("--strategy is for --to ct-fp8");
	o->input = pos[0];
	o->output = pos[1];
	return 0;
}

/* Options the chosen target or output cannot honour are usage errors, not silently ignored. */
static int check_options(const conv_opts *o)
{
	target_kind k = o->target.kind;
	const char *tn = o->target_name ? o->target_name : k == TGT_AWQ ? "awq" : k == TGT_GPTQ ? "gptq" : "keep";
	bool packed = k == TGT_AWQ || k == TGT_GPTQ || k == TGT_MLX || k == TGT_CT;
	bool ggml_quant = (k == TGT_TYPE || k == TGT_MIX) && !qtk_type(o->target.type)->is_float;
	if (o->bits && !packed)
		return cli_usage_error("--bits applies to gptq, mlx and ct-int targets, not --to %s%s", tn,
				       ggml_quant ? " (a ggml type's bits are in its name: q8_0, q5_k_m ...)" : "");
	if (o->bits && k == TGT_AWQ && o->bits != 4)
		return cli_usage_error("--bits %u: AWQ (GEMM) packs 4 bits only; for %u bits use --to gptq, mlx or ct-int",
				       o->bits, o->bits);
	if (o->bits && k == TGT_GPTQ && o->bits != 2 && o->bits != 3 && o->bits != 4 && o->bits != 8)
		return cli_usage_error("--bits %u: gptq packs 2, 3, 4 or 8 bits (5 and 6 are for mlx)", o->bits);
	if (o->bits && k == TGT_CT && o->bits != 2 && o->bits != 4 && o->bits != 8)
		return cli_usage_error("--bits %u: ct-int packs 2, 4 or 8 bits", o->bits);
	if (o->group_size && !packed)
		return cli_usage_error("--group-size applies to awq, gptq, mlx and ct-int targets, not --to %s%s", tn,
				       ggml_quant ? " (ggml types have fixed blocks)" : "");
	if (o->sym && k != TGT_GPTQ && k != TGT_CT)
		return cli_usage_error("--sym applies to gptq and ct-int targets, not --to %s%s", tn,
				       k == TGT_AWQ || k == TGT_MLX ? " (its zero points are part of the format)" : "");
	if (o->imatrix_path && !ggml_quant)
		return cli_usage_error("--imatrix weighs ggml quantized types (q4_k_m, iq4_xs, ...), not --to %s", tn);
	if (o->split_max_size && o->out_kind != QTK_OUT_GGUF && o->out_kind != QTK_OUT_HF)
		return cli_usage_error("--split-max-size shards a .gguf or a Hugging Face directory (a path ending in "
				       "'/'), not '%s'", o->output);
	return 0;
}

/* ---- outputs that would destroy an input ---------------------------------------------- */

static bool same_node(const struct stat *a, const struct stat *b) { return a->st_dev == b->st_dev && a->st_ino == b->st_ino; }

/* stat of the directory that holds path. */
static int stat_dir_of(const char *path, struct stat *st)
{
	char *d = qtk_path_dir(path);
	int r = d ? stat(d, st) : -1;
	qtk_free(d);
	return r;
}

/* True when directory `dir` (st) holds `file` at any depth (or is it). */
static bool dir_holds(const struct stat *dir, const char *file)
{
	char real[PATH_MAX];
	if (!realpath(file, real))
		return false;
	for (int depth = 0; depth < 256; depth++) {
		struct stat st;
		if (stat(real, &st) == 0 && same_node(&st, dir))
			return true;
		char *slash = strrchr(real, '/');
		if (!slash)
			return false;
		if (slash == real) {
			if (!real[1])
				return false;
			real[1] = 0;
		} else {
			*slash = 0;
		}
	}
	return false;
}

/* The directory a file path names its file in ("." for a bare name); false when too long. */
static bool parent_of(const char *path, char *out, size_t cap)
{
	const char *slash = strrchr(path, '/');
	size_t pn = slash ? (size_t)(slash - path) : 0;
	if (pn + 2 > cap)
		return false;
	if (slash) {
		memcpy(out, path, pn ? pn : 1);
		out[pn ? pn : 1] = 0;
	} else {
		strcpy(out, ".");
	}
	return true;
}

/* Does the report path (in directory parent) lie inside directory dir (which may not exist
 * yet)? By the files when both directories exist, else by the names. */
static bool report_in_dir(const char *report, const char *parent, const char *dir)
{
	struct stat dst;
	if (stat(dir, &dst) == 0 && S_ISDIR(dst.st_mode)) {
		struct stat pst;
		if (stat(parent, &pst) == 0)
			return dir_holds(&dst, parent);
	}
	size_t dn = strlen(dir);
	while (dn > 1 && dir[dn - 1] == '/')
		dn--;
	return !strncmp(report, dir, dn) && report[dn] == '/';
}

/* A name of the split set OUTPUT would write (<stem>-NNNNN-of-NNNNN.gguf beside it)? */
static bool split_name_of(const char *output, const char *file)
{
	const char *ob = qtk_path_base(output), *fb = qtk_path_base(file);
	size_t ol = strlen(ob), stem = ol >= 5 && !qtk_strcasecmp(ob + ol - 5, ".gguf") ? ol - 5 : ol;
	if (strncmp(ob, fb, stem) || strlen(fb) != stem + 20 || qtk_strcasecmp(fb + stem + 15, ".gguf"))
		return false;
	const char *t = fb + stem;
	for (int i = 0; i < 15; i++) {
		bool digit = t[i] >= '0' && t[i] <= '9';
		if ((i == 0 || (i >= 6 && i <= 9)) ? digit : !digit)
			return false;
	}
	if (t[0] != '-' || strncmp(t + 6, "-of-", 4))
		return false;
	struct stat a, b;
	return stat_dir_of(output, &a) == 0 && stat_dir_of(file, &b) == 0 && same_node(&a, &b);
}

/* Refuse (usage error, exit 2, both paths named) any output that resolves to an input: the
 * model file or each shard it may write, an HF output directory that holds an input, the report.
 * The inputs are also recorded for qtk_ofile_open, which refuses them for every file written. */
static int check_paths(const qtk_model *in, const conv_opts *o)
{
	size_t nin = 0;
	const char *ins[4];
	ins[nin++] = o->input;
	if (o->imatrix_path)
		ins[nin++] = o->imatrix_path;
	for (size_t i = 0; i < nin; i++)
		if (qtk_protect_input(ins[i]))
			return cli_fail(&(qtk_err){.code = QTK_E_IO, .offset = -1, .msg = "out of memory"});
	for (uint32_t i = 0; i < in->nfiles; i++)
		qtk_protect_input(in->files[i]);
	struct stat ist;
	if (stat(o->input, &ist) == 0 && S_ISDIR(ist.st_mode))
		for (size_t i = 0; i < in->nblobs; i++) { /* the side files read from the input directory */
			char *p = qtk_path_join(o->input, in->blobs[i].name);
			if (p)
				qtk_protect_input(p);
			qtk_free(p);
		}
	const char *hit;
	if (o->out_kind == QTK_OUT_HF) {
		struct stat dst;
		if (stat(o->output, &dst) == 0) {
			for (size_t i = 0; i < nin + in->nfiles; i++) {
				const char *f = i < nin ? ins[i] : in->files[i - nin];
				if (dir_holds(&dst, f))
					return cli_usage_error("the output directory '%s' holds the input '%s': "
							       "choose another directory", o->output, f);
			}
		}
	} else if ((hit = qtk_protected_input(o->output))) {
		return cli_usage_error("the output '%s' is the input '%s': choose another name", o->output, hit);
	}
	if (o->out_kind == QTK_OUT_GGUF && o->split_max_size)
		for (size_t i = 0; i < nin + in->nfiles; i++) {
			const char *f = i < nin ? ins[i] : in->files[i - nin];
			if (split_name_of(o->output, f))
				return cli_usage_error("the output '%s' would be split into shards named like the input '%s': "
						       "choose another name", o->output, f);
		}
	if (o->report) {
		struct stat a, b;
		if ((hit = qtk_protected_input(o->report)))
			return cli_usage_error("the report '%s' is the input '%s': choose another name", o->report, hit);
		bool same = stat(o->report, &a) == 0 && stat(o->output, &b) == 0 && same_node(&a, &b);
		if (!same && !strcmp(qtk_path_base(o->report), qtk_path_base(o->output)) && stat_dir_of(o->report, &a) == 0 &&
		    stat_dir_of(o->output, &b) == 0 && same_node(&a, &b))
			same = true;
		if (same)
			return cli_usage_error("the report '%s' is the output '%s': choose another name", o->report, o->output);
		char parent[PATH_MAX];
		const bool named = parent_of(o->report, parent, sizeof parent);
		if (named && o->out_kind == QTK_OUT_HF && report_in_dir(o->report, parent, o->output))
			return cli_usage_error("the report '%s' would be inside the output directory '%s', which is "
					       "replaced as a whole: choose another place", o->report, o->output);
		/* a report that cannot be written fails now, not after the whole conversion */
		struct stat pst;
		const bool there = named && stat(parent, &pst) == 0;
		if (named && (!there || !S_ISDIR(pst.st_mode) || access(parent, W_OK | X_OK) != 0)) {
			qtk_err e;
			qtk_err_clear(&e);
			qtk_err_set(&e, QTK_E_IO, o->report, -1, NULL, "cannot write the report: its directory '%s' %s",
				    parent, there ? "is not a writable directory" : "does not exist");
			return cli_fail(&e);
		}
	}
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
	if ((r = check_options(&o)))
		return r;
	cli_set_activity("converting %s to %s", o.input, o.output);
	double t0 = now_s();
	qtk_err err;
	qtk_model *in = qtk_open(o.input, &err);
	if (!in)
		return cli_fail(&err);
	if ((r = check_paths(in, &o))) {
		qtk_close(in);
		return r;
	}
	/* --carry: a side file the reader holds (QPK, bundle) or one of the input directory */
	for (size_t i = 0; i < o.ncarry; i++)
		if (!qtk_blob_find(in, o.carry[i]) && qtk_hf_load_side_file(in, o.carry[i], &err)) {
			qtk_close(in);
			if (err.code == QTK_E_USAGE)
				return cli_usage_error("--carry %s: no such side file in '%s'", o.carry[i], o.input);
			return cli_fail(&err);
		}
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
