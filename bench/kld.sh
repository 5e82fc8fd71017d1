#!/bin/sh
# bench/kld.sh: output divergence of qtk's quantizations against llama-quantize's, measured by
# llama.cpp's own llama-perplexity (--kl-divergence-base on the F16 model, --kl-divergence on each
# quantized one). Called by bench/run.sh when LLAMA_PERPLEXITY is set; runs alone as well:
#   LLAMA_QUANTIZE=... LLAMA_PERPLEXITY=... sh bench/kld.sh
#   KLD_TYPES     types to compare (default: every single type qtk writes and a Q4_K_M mix)
#   KLD_MODELS    which models: tiny (the fixture's tiny-f32.gguf, when fixtures are present),
#                 vocab (a generated model with the fixture's 32k llama vocabulary), samples (the
#                 project's own tiny-llama sample, 512-token vocabulary); default "tiny vocab",
#                 "samples" standing in when the fixtures are absent
#   KLD_CHUNKS    128-token chunks of the text per model (default 200 for small vocabularies,
#                 80 for the 32k one)
#   KLD_SEEDS     perturbed copies per model besides the model itself (default 4 for the small
#                 vocabularies, 2 for the 32k one): `gen --perturb` flips the lowest mantissa bit
#                 of each weight at random, so each copy is the same model within rounding and
#                 its quantizations are other draws of equally good encodings. Two encodings of
#                 equal error can differ by 10-25% in KLD on a small model; the mean over the
#                 copies (both tools quantize every copy; KLD always against the original F16
#                 model's logits) separates an encoder's real difference from that spread, and
#                 the table prints the lowest and highest per-copy ratio beside the ratio of means
#   LLAMA_IMATRIX llama.cpp's llama-imatrix: besides each type, a "TYPE+im" row where both tools
#                 quantize with the same importance matrix (llama-imatrix on the F16 model, the
#                 same text, KLD_IM_CHUNKS chunks, default 100)
# The text is the project's own documentation (README.md and docs/*.md), so nothing third-party
# is needed. Every row goes to $BENCH_DIR/kld.tsv; bench/run.sh puts it into results.json.
set -u
B=${QTK_BUILD:-build}
D=${BENCH_DIR:-$B/bench}
TH=${BENCH_THREADS:-$(nproc)}
LQ=${LLAMA_QUANTIZE:-}
LP=${LLAMA_PERPLEXITY:-}
LI=${LLAMA_IMATRIX:-}
VARIANTS=plain
[ -n "$LI" ] && { [ -x "$LI" ] || { echo "kld: LLAMA_IMATRIX is not an executable"; exit 1; }; VARIANTS="plain im"; }
FX=${QTK_FIXTURES:-../shared/fixtures}
TYPES=${KLD_TYPES:-"q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs Q4_K_M"}
[ -x "$LQ" ] && [ -x "$LP" ] || { echo "kld: needs LLAMA_QUANTIZE and LLAMA_PERPLEXITY (executables)"; exit 1; }
K=$D/kld
mkdir -p "$K"
: >"$D/kld.tsv"

# llama-quantize's name for a single type (its ftype whose default type it is) or a mix
lq_name() {
	case $1 in
	q2_k) echo Q2_K ;; q3_k) echo Q3_K_S ;; q4_k) echo Q4_K_S ;; q5_k) echo Q5_K_S ;;
	*) echo "$1" | tr a-z A-Z ;;
	esac
}
is_mix() { case $1 in *_[SML]) return 0 ;; esac; return 1; }

# the text: the project's documentation, the same bytes for every model
cat README.md docs/*.md >"$K/text.txt"

# models: NAME FILE CHUNKS
models=""
want=${KLD_MODELS:-"tiny vocab"}
[ -f "$FX/gguf/tiny-f32.gguf" ] || want=$(echo "$want" | sed 's/tiny/samples/')
for m in $want; do
	case $m in
	tiny)
		[ -f "$FX/gguf/tiny-f32.gguf" ] || { echo "kld: no fixtures: tiny skipped"; continue; }
		bin/qconvert -q "$FX/gguf/tiny-f32.gguf" "$K/tiny-f16.gguf" --to f16 || exit 1
		models="$models tiny:$K/tiny-f16.gguf:${KLD_CHUNKS:-200}:${KLD_SEEDS:-4}" ;;
	vocab)
		v=$FX/vocab/ggml-vocab-llama-spm.gguf
		[ -f "$v" ] || { echo "kld: no fixture vocabulary: vocab skipped"; continue; }
		[ -f "$K/vocab-f16.gguf" ] || "$B/samples/gen" --bench 40 "$K/vocab-f16.gguf" 512 1536 "$v" >/dev/null || exit 1
		models="$models vocab32k:$K/vocab-f16.gguf:${KLD_CHUNKS:-80}:${KLD_SEEDS:-2}" ;;
	samples)
		"$B/samples/gen" "$K/samples" >/dev/null || exit 1
		bin/qconvert -q "$K/samples/tiny-llama-f32.gguf" "$K/samples-f16.gguf" --to f16 || exit 1
		models="$models samples:$K/samples-f16.gguf:${KLD_CHUNKS:-200}:${KLD_SEEDS:-4}" ;;
	esac
done

# kld_of FILE BASE: "mean_kld same_top_percent" from llama-perplexity's statistics
kld_of() {
	"$LP" -m "$1" -t "$TH" --kl-divergence-base "$2" --kl-divergence >"$K/lp.out" 2>&1 || { echo "nan nan"; return; }
	awk '/^Mean +KLD:/ { k = $3 } /^Same top p:/ { p = $4 } END { print (k == "" ? "nan" : k), (p == "" ? "nan" : p) }' "$K/lp.out"
}
# rmse_ratio SRC A B: "mean max n_le n" of the per-tensor RMSE ratios A/B against SRC
rmse_ratio() {
	bin/qinspect --diff "$1" "$2" >"$K/d1" 2>/dev/null
	bin/qinspect --diff "$1" "$3" >"$K/d2" 2>/dev/null
	awk 'FNR == NR && $1 != "worst:" && $4 ~ /^[0-9.e+-]+$/ { a[$1] = $4; next }
	     $1 != "worst:" && $4 ~ /^[0-9.e+-]+$/ && ($1 in a) && $4 > 0 { r = a[$1] / $4; n++; s += r; if (r > mx) mx = r; if (r <= 1) le++ }
	     END { if (n) printf "%.4f %.4f %d %d\n", s / n, mx, le, n; else print "nan nan 0 0" }' "$K/d1" "$K/d2"
}
# layouts FILE: tensor name and layout, one per line
layouts() { bin/qinspect "$1" 2>/dev/null | awk '$1 ~ /\.weight$/ { for (i = 2; i < NF; i++) if ($i ~ /]$/) { print $1, $(i + 1); break } }' | sort; }

printf '| %-9s | %-9s | %10s | %10s | %6s | %15s | %7s | %7s | %11s |\n' model type "KLD qtk" "KLD llama" ratio "per copy" "top qtk" "top lq" "RMSE ratio"
printf '|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n' ----------- ----------- ------------ ------------ -------- ----------------- --------- --------- -------------
for spec in $models; do
	name=${spec%%:*}; rest=${spec#*:}; f16=${rest%%:*}; rest=${rest#*:}; chunks=${rest%%:*}; seeds=${rest#*:}
	base=$K/$name.kld
	"$LP" -m "$f16" -f "$K/text.txt" -c 128 -t "$TH" --chunks "$chunks" --kl-divergence-base "$base" >"$K/lp.out" 2>&1 ||
		{ echo "kld: llama-perplexity failed on $f16"; tail -3 "$K/lp.out"; continue; }
	if [ -n "$LI" ]; then
		"$LI" -m "$f16" -f "$K/text.txt" -c 128 -t "$TH" --chunks "${KLD_IM_CHUNKS:-100}" -o "$K/$name.imatrix" >"$K/li.out" 2>&1 ||
			{ echo "kld: llama-imatrix failed on $f16"; tail -3 "$K/li.out"; continue; }
	fi
	for v in $VARIANTS; do
	qim=""; lim=""; sfx=""
	[ "$v" = im ] && { qim="--imatrix $K/$name.imatrix"; lim="--imatrix $K/$name.imatrix"; sfx="+im"; }
	for t in $TYPES; do
		ours=$K/$name-qtk-$t.gguf; theirs=$K/$name-lq-$t.gguf
		s=0 ok=1 note="" acc=""
		while [ "$s" -le "$seeds" ]; do
			src=$f16
			if [ "$s" -gt 0 ]; then
				src=$K/$name-copy.gguf
				"$B/samples/gen" --perturb "$s" "$f16" "$src" >/dev/null || { ok=0; break; }
			fi
			pure=--pure
			is_mix "$t" && pure=""
			# shellcheck disable=SC2086
			bin/qconvert -q --threads "$TH" $qim "$src" "$ours" --to "$t" $pure >/dev/null 2>"$K/err" &&
				"$LQ" $lim $pure "$src" "$theirs" "$(lq_name "$t")" "$TH" >/dev/null 2>&1 ||
				{ echo "kld: $name $t$sfx: a quantization failed"; cat "$K/err"; ok=0; break; }
			if [ "$s" -eq 0 ]; then
				[ "$(layouts "$ours")" = "$(layouts "$theirs")" ] || note=" (tensor types differ)"
				rr=$(rmse_ratio "$f16" "$ours" "$theirs")
			fi
			acc="$acc $(kld_of "$ours" "$base") $(kld_of "$theirs" "$base")"
			s=$((s + 1))
		done
		[ "$ok" = 1 ] || continue
		# acc: per copy "kld_qtk top_qtk kld_llama top_llama"
		set -- $(echo "$acc" | awk '{ n = NF / 4; lo = 1e30; hi = -1
			for (i = 0; i < n; i++) { a = $(4*i+1); p = $(4*i+2); b = $(4*i+3); q = $(4*i+4)
				ka += a; kb += b; pa += p; pb += q; if (b > 0) { r = a / b; if (r < lo) lo = r; if (r > hi) hi = r } }
			printf "%.6f %.3f %.6f %.3f %s %s %d\n", ka / n, pa / n, kb / n, pb / n,
				(hi < 0 ? "nan" : sprintf("%.3f", lo)), (hi < 0 ? "nan" : sprintf("%.3f", hi)), n }') $rr
		kq=$1 tq=$2 kl=$3 tl=$4 lo=$5 hi=$6 nc=$7 rm=$8 rx=$9 rle=${10} rn=${11}
		ratio=$(awk -v a="$kq" -v b="$kl" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "nan" }')
		printf '| %-9s | %-9s | %10s | %10s | %6s | %5s-%5s (%d) | %6s%% | %6s%% | %5s/%5s |%s\n' "$name" "$t$sfx" "$kq" "$kl" "$ratio" "$lo" "$hi" "$nc" "$tq" "$tl" "$rm" "$rx" "$note"
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$t$sfx" "$kq" "$kl" "$ratio" "$tq" "$tl" "$rm" "$rx" "$rle" "$rn" "${note:+differ}" "$lo" "$hi" "$nc" >>"$D/kld.tsv"
		rm -f "$ours" "$theirs" "$K/$name-copy.gguf"
	done
	done
done
echo "(KLD: mean over the text's tokens against the F16 model, averaged over the model and its perturbed"
echo " copies; per copy: the lowest and highest ratio of one copy's pair, and the number of copies;"
echo " top: the share of tokens whose most likely next token is the F16 model's; RMSE ratio: qtk /"
echo " llama-quantize per tensor on the model itself, mean/max; +im rows: both with the same importance"
echo " matrix, whose objective is the importance-weighted error, not this unweighted RMSE)"
