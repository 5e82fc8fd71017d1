#!/bin/sh
# make bench: reproducible benchmarks on a generated llama-shaped F16 model.
#   BENCH_MPARAMS  model size in millions of parameters (default 300)
#   BENCH_THREADS  threads for qconvert and llama-quantize (default: all cores)
#   BENCH_DIR      scratch directory (default build/bench)
#   LLAMA_QUANTIZE path to llama.cpp's llama-quantize, for side-by-side figures
#   BENCH_REPEAT   with LLAMA_QUANTIZE: q4_k runs of each, interleaved, for a median ratio
#                  that a busy machine disturbs less (default 3)
#   BENCH_PAIR_TYPES with LLAMA_QUANTIZE: types timed again with the record in BENCH_REPEAT
#                  interleaved pairs against llama-quantize --pure, for a median ratio (default
#                  the ones near or over the target: q4_0 q4_1 q5_0 q5_1 q8_0 q3_k); the k-quant
#                  AWQ re-fit is paired with F16 -> q4_k the same way
#   BENCH_TYPES    with LLAMA_QUANTIZE: the ggml types timed against llama-quantize --pure, with
#                  and without qtk's provenance record, and their RMSE compared tensor by tensor
#                  (default every type qtk writes: q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k
#                  q6_k iq4_nl iq4_xs)
#   LLAMA_PERPLEXITY path to llama.cpp's llama-perplexity: with LLAMA_QUANTIZE, the output
#                  divergence (KLD) table of bench/kld.sh, qtk's quantizations against
#                  llama-quantize's, type by type (KLD_TYPES, KLD_MODELS, KLD_CHUNKS, KLD_SEEDS,
#                  LLAMA_IMATRIX there)
#   BENCH_KLD_ONLY=1 only that table (no timings, no 300M model)
# Besides the table, every figure goes to $BENCH_DIR/results.json: seconds, peak RSS and, where
# it has one, the ratio to its anchor (cp + fsync for copies and repacks, llama-quantize's run
# for each type), plus the interleaved pairs.
set -u
B=${QTK_BUILD:-build}
MP=${BENCH_MPARAMS:-300}
TH=${BENCH_THREADS:-$(nproc)}
D=${BENCH_DIR:-$B/bench}
LQ=${LLAMA_QUANTIZE:-}
LP=${LLAMA_PERPLEXITY:-}
mkdir -p "$D"
# kld_json: the rows of bench/kld.sh as a JSON array
kld_json() {
	printf '['
	[ -s "$D/kld.tsv" ] && awk -F '\t' 'function num(x) { return (x ~ /^[0-9.e+-]+$/) ? x : "null" }
		{ printf "%s\n    {\"model\": \"%s\", \"type\": \"%s\", \"kld_qtk\": %s, \"kld_llama\": %s, \"kld_ratio\": %s, \"same_top_qtk\": %s, \"same_top_llama\": %s, \"rmse_ratio_mean\": %s, \"rmse_ratio_max\": %s, \"tensors_rmse_le\": %s, \"tensors\": %s, \"types_differ\": %s, \"ratio_lowest_copy\": %s, \"ratio_highest_copy\": %s, \"copies\": %s}",
		  (NR > 1 ? "," : ""), $1, $2, num($3), num($4), num($5), num($6), num($7), num($8), num($9), num($10), num($11), ($12 == "differ" ? "true" : "false"), num($13), num($14), num($15) }' "$D/kld.tsv"
	printf '\n  ]'
}
: >"$D/kld.tsv"
if [ "${BENCH_KLD_ONLY:-0}" = 1 ]; then
	QTK_BUILD=$B BENCH_DIR=$D BENCH_THREADS=$TH sh bench/kld.sh || exit 1
	printf '{\n  "kld": %s\n}\n' "$(kld_json)" >"$D/results.json"
	echo "figures: $D/results.json"
	exit 0
fi
M=$D/model-f16.gguf
[ -f "$M.$MP" ] && [ -f "$M" ] || { "$B/samples/gen" --bench "$MP" "$M" >/dev/null && touch "$M.$MP"; } || exit 1
BYTES=$(wc -c <"$M")

# llama-quantize's name of a mix whose base type is $1 (with --pure: every tensor that type)
lq_name() {
	case $1 in
	q3_k) echo Q3_K_S ;; q4_k) echo Q4_K_M ;; q5_k) echo Q5_K_M ;;
	*) echo "$1" | tr a-z A-Z ;;
	esac
}
TYPES=${BENCH_TYPES:-q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs}

# measure LABEL CMD...: prints seconds and peak RSS (MiB)
measure() {
	label=$1; shift
	sync
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -f "%e %M" -o "$D/time" "$@" >/dev/null 2>"$D/err" || { echo "failed: $label"; cat "$D/err"; return 1; }
		set -- $(tail -n 1 "$D/time")
		secs=$1; rss=$(( $2 / 1024 ))
	else
		t0=$(date +%s.%N); "$@" >/dev/null 2>"$D/err" || return 1; t1=$(date +%s.%N)
		secs=$(echo "$t1 - $t0" | bc); rss="?"
	fi
	printf '| %-44s | %8.2f | %8s |\n' "$label" "$secs" "$rss"
	echo "$label $secs $rss" >>"$D/results"
}
# secs_of LABEL: the seconds of the run with exactly that label (the last one)
secs_of() { awk -v l="$1" '{ s = $(NF - 1); NF -= 2; if ($0 == l) v = s } END { print v }' "$D/results"; }

: >"$D/results"
: >"$D/pairs"
: >"$D/tpairs"
echo "model: $M, $(( BYTES / 1048576 )) MiB, ~${MP}M parameters, $TH threads; $(nproc) cores, $(uname -m)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo
printf '| %-44s | %8s | %8s |\n' "operation" "seconds" "RSS MiB"
printf '|%s|%s|%s|\n' "----------------------------------------------" "----------" "----------"
measure "cp (same bytes)" cp "$M" "$D/copy.gguf"
measure "cp + fsync (same bytes, durable)" sh -c "cp '$M' '$D/copy2.gguf' && sync '$D/copy2.gguf'"
measure "qinspect --json (header only)" bin/qinspect --json "$M"
measure "qconvert F16 -> q4_k" bin/qconvert -q --threads "$TH" "$M" "$D/q4k.gguf" --to q4_k --pure
measure "qconvert F16 -> Q4_K_M" bin/qconvert -q --threads "$TH" "$M" "$D/q4km.gguf" --to Q4_K_M
measure "qconvert F16 -> q8_0" bin/qconvert -q --threads "$TH" "$M" "$D/q8.gguf" --to q8_0 --pure
measure "qconvert F16 -> q4_0" bin/qconvert -q --threads "$TH" "$M" "$D/q40.gguf" --to q4_0 --pure
measure "qconvert q4_k -> f32 (dequantize)" bin/qconvert -q --threads "$TH" "$D/q4k.gguf" "$D/f32.gguf" --to f32
NOREC="--set qtk.provenance=none"
measure "qconvert GGUF -> GGUF (copy, keep)" bin/qconvert -q "$M" "$D/keep.gguf"
measure "qconvert GGUF -> GGUF (copy, keep, no record)" bin/qconvert -q $NOREC "$M" "$D/keep.gguf"
measure "qconvert GGUF -> QPK (repack)" bin/qconvert -q "$M" "$D/m.qpk"
measure "qconvert GGUF -> QPK (repack, no record)" bin/qconvert -q $NOREC "$M" "$D/m2.qpk"
measure "qconvert QPK -> GGUF (repack)" bin/qconvert -q "$D/m.qpk" "$D/back.gguf"
measure "qconvert QPK -> GGUF (repack, no record)" bin/qconvert -q $NOREC "$D/m.qpk" "$D/back.gguf"
measure "qconvert GGUF -> safetensors (repack)" bin/qconvert -q "$M" "$D/m.safetensors"
measure "qconvert GGUF -> safetensors (repack, no record)" bin/qconvert -q $NOREC "$M" "$D/m2.safetensors"
measure "qconvert safetensors -> GGUF (repack)" bin/qconvert -q "$D/m.safetensors" "$D/back.gguf"
measure "qconvert safetensors -> GGUF (repack, no record)" bin/qconvert -q $NOREC "$D/m.safetensors" "$D/back.gguf"
rm -rf "$D/awq" "$D/gptq" "$D/awq-fit" "$D/gptq-fit" "$D/awq-k" "$D/awq-copy"
bin/qconvert -q --threads "$TH" "$D/q40.gguf" "$D/awq/" --to awq >/dev/null 2>&1
# the exact repack's anchor: a copy of its own source's bytes (the AWQ directory)
measure "cp -r + fsync (the AWQ directory, durable)" sh -c "cp -r '$D/awq' '$D/awq-copy' && sync '$D/awq-copy'/*"
measure "qconvert AWQ -> GPTQ (exact repack)" bin/qconvert -q --exact "$D/awq/" "$D/gptq/" --to gptq
measure "qconvert AWQ -> GPTQ (exact repack, no record)" bin/qconvert -q $NOREC --exact "$D/awq/" "$D/gptq/" --to gptq
measure "qconvert F16 -> AWQ (re-fit, 4-bit g128)" bin/qconvert -q --threads "$TH" "$M" "$D/awq-fit/" --to awq
measure "qconvert F16 -> GPTQ (re-fit, 4-bit g128)" bin/qconvert -q --threads "$TH" "$M" "$D/gptq-fit/" --to gptq
measure "qconvert q4_k -> AWQ (re-fit, 4-bit g32)" bin/qconvert -q --threads "$TH" "$D/q4k.gguf" "$D/awq-k/" --to awq
measure "qconvert AWQ -> q4_k (decode, encode)" bin/qconvert -q --threads "$TH" "$D/awq-fit/" "$D/x.gguf" --to q4_k --pure
if [ -n "$LQ" ] && [ -x "$LQ" ]; then
	measure "llama-quantize F16 -> q4_k (--pure)" "$LQ" --pure "$M" "$D/lq-q4k.gguf" Q4_K_M "$TH"
	measure "llama-quantize F16 -> Q4_K_M" "$LQ" "$M" "$D/lq-q4km.gguf" Q4_K_M "$TH"
	measure "llama-quantize F16 -> q8_0 (--pure)" "$LQ" --pure "$M" "$D/lq-q8.gguf" Q8_0 "$TH"
	measure "llama-quantize F16 -> q4_0 (--pure)" "$LQ" --pure "$M" "$D/lq-q40.gguf" Q4_0 "$TH"
	# every type, each qtk run (with and without the record) beside llama-quantize's
	for t in $TYPES; do
		case $t in q4_k | q8_0 | q4_0) ;; *)
			measure "qconvert F16 -> $t" bin/qconvert -q --threads "$TH" "$M" "$D/t-$t.gguf" --to "$t" --pure ;;
		esac
		measure "qconvert F16 -> $t (no record)" bin/qconvert -q --threads "$TH" "$M" "$D/n-$t.gguf" --to "$t" --pure --set qtk.provenance=none
		case $t in q4_k | q8_0 | q4_0) ;; *)
			measure "llama-quantize F16 -> $t (--pure)" "$LQ" --pure "$M" "$D/l-$t.gguf" "$(lq_name "$t")" "$TH" ;;
		esac
	done
	# q4_k again, qtk and llama-quantize taking turns: the median ratio of the pairs
	: >"$D/pairs"
	i=0
	while [ "$i" -lt "${BENCH_REPEAT:-3}" ]; do
		i=$((i + 1))
		/usr/bin/time -f "%e" -o "$D/t1" bin/qconvert -q --threads "$TH" "$M" "$D/q4k.gguf" --to q4_k --pure >/dev/null 2>&1
		/usr/bin/time -f "%e" -o "$D/t2" "$LQ" --pure "$M" "$D/lq-q4k.gguf" Q4_K_M "$TH" >/dev/null 2>&1
		echo "$(tail -n 1 "$D/t1") $(tail -n 1 "$D/t2")" >>"$D/pairs"
	done
	# the types near the line, with the record, taking turns with llama-quantize
	: >"$D/tpairs"
	for t in ${BENCH_PAIR_TYPES:-q4_0 q4_1 q5_0 q5_1 q8_0 q3_k}; do
		i=0
		while [ "$i" -lt "${BENCH_REPEAT:-3}" ]; do
			i=$((i + 1))
			/usr/bin/time -f "%e" -o "$D/t1" bin/qconvert -q --threads "$TH" "$M" "$D/p-$t.gguf" --to "$t" --pure >/dev/null 2>&1
			/usr/bin/time -f "%e" -o "$D/t2" "$LQ" --pure "$M" "$D/lp-$t.gguf" "$(lq_name "$t")" "$TH" >/dev/null 2>&1
			echo "$t $(tail -n 1 "$D/t1") $(tail -n 1 "$D/t2")" >>"$D/tpairs"
		done
		rm -f "$D/p-$t.gguf" "$D/lp-$t.gguf"
	done
fi
# the AWQ re-fit from q4_k at groups of 32 taking turns with F16 -> q4_k (its target: no slower)
: >"$D/fpairs"
if [ -f "$D/q4k.gguf" ]; then
	i=0
	while [ "$i" -lt "${BENCH_REPEAT:-3}" ]; do
		i=$((i + 1))
		rm -rf "$D/awq-k"
		/usr/bin/time -f "%e" -o "$D/t1" bin/qconvert -q --threads "$TH" "$D/q4k.gguf" "$D/awq-k/" --to awq >/dev/null 2>&1
		/usr/bin/time -f "%e" -o "$D/t2" bin/qconvert -q --threads "$TH" "$M" "$D/q4k-again.gguf" --to q4_k --pure >/dev/null 2>&1
		echo "$(tail -n 1 "$D/t1") $(tail -n 1 "$D/t2")" >>"$D/fpairs"
	done
	rm -f "$D/q4k-again.gguf"
	awk '{ r[NR] = $1 / $2; printf "q4_k -> AWQ g32 interleaved run %d: %.2f s, F16 -> q4_k %.2f s, ratio %.2f\n", NR, $1, $2, $1 / $2 }
	     END { n = NR; for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
	           if (n) printf "q4_k -> AWQ g32 / F16 -> q4_k, median of %d interleaved pairs: %.2fx\n", n, (n % 2) ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2 }' "$D/fpairs"
fi
# repacks again, each taking turns with cp + fsync of the same bytes: the median ratio of the
# pairs (the disk's speed moves within minutes; a pair shares it)
: >"$D/rpairs"
for op in copy qpk back st; do
	i=0
	while [ "$i" -lt "${BENCH_REPEAT:-3}" ]; do
		i=$((i + 1))
		for rec in with without; do
			x=""; [ $rec = without ] && x=$NOREC
			case $op in
			copy) src=$M; set -- bin/qconvert -q $x "$M" "$D/keep.gguf"; label="GGUF -> GGUF (copy)" ;;
			qpk) src=$M; set -- bin/qconvert -q $x "$M" "$D/m2.qpk"; label="GGUF -> QPK" ;;
			back) src=$D/m.qpk; set -- bin/qconvert -q $x "$D/m.qpk" "$D/back.gguf"; label="QPK -> GGUF" ;;
			st) src=$M; set -- bin/qconvert -q $x "$M" "$D/m2.safetensors"; label="GGUF -> safetensors" ;;
			esac
			sync
			/usr/bin/time -f "%e" -o "$D/t1" sh -c "cp '$src' '$D/copy2.gguf' && sync '$D/copy2.gguf'" >/dev/null 2>&1
			sync
			/usr/bin/time -f "%e" -o "$D/t2" "$@" >/dev/null 2>&1
			echo "$label|$rec|$(tail -n 1 "$D/t2")|$(tail -n 1 "$D/t1")" >>"$D/rpairs"
		done
	done
done
echo
# the median ratio of the pairs, and the best of each side (a burst of slow page-cache writes,
# which this kind of machine has, lands on one run of a pair more often than on all of them)
awk -F '|' '{ k = $1 " " $2 " the record"; r = $3 / $4; n[k]++; v[k, n[k]] = r; if (!(k in o)) { o[k] = ++no; ord[no] = k; bq[k] = $3; bc[k] = $4 }
              if ($3 < bq[k]) bq[k] = $3; if ($4 < bc[k]) bc[k] = $4 }
     END { for (q = 1; q <= no; q++) { k = ord[q]; m = n[k]
             for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[k, j] < v[k, i]) { t = v[k, i]; v[k, i] = v[k, j]; v[k, j] = t }
             printf "%s / (cp + fsync), median of %d interleaved pairs: %.2fx; best of each: %.2f s / %.2f s = %.2fx\n", k, m,
                    (m % 2) ? v[k, (m + 1) / 2] : (v[k, m / 2] + v[k, m / 2 + 1]) / 2, bq[k], bc[k], (bc[k] > 0 ? bq[k] / bc[k] : 0) } }' "$D/rpairs"
echo
cp_s=$(secs_of "cp (same bytes)")
ratio() { a=$(secs_of "$1"); b=$(secs_of "$2"); [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" -v l="$3" 'BEGIN { if (b > 0) printf "%s: %.2fx\n", l, a / b }'; }
ratio "qconvert GGUF -> GGUF (copy, keep)" "cp (same bytes)" "container copy / cp"
ratio "qconvert GGUF -> GGUF (copy, keep)" "cp + fsync (same bytes, durable)" "container copy / (cp + fsync)"
ratio "qconvert GGUF -> QPK (repack)" "cp (same bytes)" "GGUF -> QPK / cp"
if [ -n "$LQ" ] && [ -x "$LQ" ]; then
	ratio "qconvert F16 -> q4_k" "llama-quantize F16 -> q4_k (--pure)" "q4_k time, qtk / llama-quantize"
	ratio "qconvert F16 -> Q4_K_M" "llama-quantize F16 -> Q4_K_M" "Q4_K_M time, qtk / llama-quantize"
	ratio "qconvert F16 -> q8_0" "llama-quantize F16 -> q8_0 (--pure)" "q8_0 time, qtk / llama-quantize"
	ratio "qconvert F16 -> q4_0" "llama-quantize F16 -> q4_0 (--pure)" "q4_0 time, qtk / llama-quantize"
	for t in $TYPES; do
		case $t in q4_k | q8_0 | q4_0) ;; *)
			ratio "qconvert F16 -> $t" "llama-quantize F16 -> $t (--pure)" "$t time, qtk / llama-quantize" ;;
		esac
		ratio "qconvert F16 -> $t (no record)" "llama-quantize F16 -> $t (--pure)" "$t time without the record, qtk / llama-quantize"
	done
	# the types' pairs: the median ratio of each, and the best of each side
	awk '{ k = $1; r = $2 / $3; n[k]++; v[k, n[k]] = r; if (!(k in o)) { o[k] = ++no; ord[no] = k; bq[k] = $2; bl[k] = $3 }
	       if ($2 < bq[k]) bq[k] = $2; if ($3 < bl[k]) bl[k] = $3 }
	     END { for (q = 1; q <= no; q++) { k = ord[q]; m = n[k]
	             for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[k, j] < v[k, i]) { t = v[k, i]; v[k, i] = v[k, j]; v[k, j] = t }
	             printf "%s with the record / llama-quantize, median of %d interleaved pairs: %.2fx; best of each: %.2f s / %.2f s = %.2fx\n", k, m,
	                    (m % 2) ? v[k, (m + 1) / 2] : (v[k, m / 2] + v[k, m / 2 + 1]) / 2, bq[k], bl[k], (bl[k] > 0 ? bq[k] / bl[k] : 0) } }' "$D/tpairs"
	awk '{ r[NR] = $1 / $2; printf "q4_k interleaved run %d: qtk %.2f s, llama-quantize %.2f s, ratio %.2f\n", NR, $1, $2, $1 / $2 }
	     END { n = NR; for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
	           if (n) printf "q4_k time, qtk / llama-quantize, median of %d interleaved pairs: %.2fx\n", n, (n % 2) ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2 }' "$D/pairs"
	# quality: per-tensor RMSE against the F16 source, ours / llama-quantize's
	pairs="q4km:lq-q4km"
	for t in $TYPES; do
		case $t in
		q4_k) pairs="$pairs q4k:lq-q4k" ;; q8_0) pairs="$pairs q8:lq-q8" ;; q4_0) pairs="$pairs q40:lq-q40" ;;
		*) pairs="$pairs t-$t:l-$t" ;;
		esac
	done
	for pair in $pairs; do
		ours=${pair%%:*}; theirs=${pair##*:}
		bin/qinspect --diff "$M" "$D/$ours.gguf" >"$D/d1" 2>/dev/null
		bin/qinspect --diff "$M" "$D/$theirs.gguf" >"$D/d2" 2>/dev/null
		awk 'FNR == NR && $1 != "worst:" && $4 ~ /^[0-9.e+-]+$/ { a[$1] = $4; next }
		     $1 != "worst:" && $4 ~ /^[0-9.e+-]+$/ && ($1 in a) && $4 > 0 { r = a[$1] / $4; n++; s += r; if (r > mx) mx = r; if (r <= 1) le++ }
		     END { if (n) printf "RMSE ratio qtk/llama-quantize (%s): mean %.4f, max %.4f, %d of %d tensors <= 1\n", l, s / n, mx, le, n }' \
			l="$ours" "$D/d1" "$D/d2"
	done
fi
if [ -n "$LP" ] && [ -n "$LQ" ]; then
	echo
	QTK_BUILD=$B BENCH_DIR=$D BENCH_THREADS=$TH sh bench/kld.sh
fi
# each encoder alone, one thread (bench/enc.c): nanoseconds per value and its output's digest
: >"$D/enc.jsonl"
if [ -x "$B/bench/enc" ]; then
	echo
	echo "encoders alone (1024 x 4096 F32, one thread, best of five):"
	"$B/bench/enc" >"$D/enc.jsonl" || echo "failed: encoders"
	awk -F '"' '{ printf "  %-11s %s ns/value  (output %s)\n", $4, substr($7, 3, length($7) - 4), $10 }' "$D/enc.jsonl"
fi
# results.json: every figure, with its anchor and ratio where there is one
anchor_of() {
	case $1 in
	"qconvert AWQ -> GPTQ (exact repack"*) echo "cp -r + fsync (the AWQ directory, durable)" ;;
	"qconvert GGUF -> GGUF (copy, keep"* | "qconvert GGUF -> QPK (repack"* | "qconvert QPK -> GGUF (repack"* | \
		"qconvert GGUF -> safetensors (repack"* | "qconvert safetensors -> GGUF (repack"* | "cp (same bytes)") echo "cp + fsync (same bytes, durable)" ;;
	"qconvert F16 -> q4_k") echo "llama-quantize F16 -> q4_k (--pure)" ;;
	"qconvert F16 -> Q4_K_M") echo "llama-quantize F16 -> Q4_K_M" ;;
	"qconvert F16 -> q8_0") echo "llama-quantize F16 -> q8_0 (--pure)" ;;
	"qconvert F16 -> q4_0") echo "llama-quantize F16 -> q4_0 (--pure)" ;;
	"qconvert F16 -> AWQ (re-fit, 4-bit g128)" | "qconvert F16 -> GPTQ (re-fit, 4-bit g128)" | \
		"qconvert q4_k -> AWQ (re-fit, 4-bit g32)") echo "qconvert F16 -> q4_k" ;;
	"qconvert F16 -> "*)
		t=${1#qconvert F16 -> }
		t=${t% (no record)}
		echo "llama-quantize F16 -> $t (--pure)" ;;
	esac
}
J=$D/results.json
{
	printf '{\n  "model": {"file": "%s", "bytes": %s, "mparams": %s, "threads": %s, "cores": %s, "machine": "%s"},\n' \
		"$M" "$BYTES" "$MP" "$TH" "$(nproc)" "$(uname -m)"
	printf '  "load_average": "%s",\n' "$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
	printf '  "operations": [\n'
	first=1
	set -f
	while read -r line; do
		set -- $line
		n=$#
		eval "secs=\${$((n - 1))}; rss=\${$n}"
		label=$(echo "$line" | awk '{ NF -= 2; print }')
		a=$(anchor_of "$label")
		as=""
		[ -n "$a" ] && as=$(secs_of "$a")
		[ "$rss" = "?" ] && rss=null
		[ $first -eq 1 ] || printf ',\n'
		first=0
		printf '    {"operation": "%s", "seconds": %s, "rss_mib": %s' "$label" "$secs" "$rss"
		if [ -n "$as" ]; then
			awk -v a="$a" -v s="$secs" -v b="$as" 'BEGIN { printf ", \"anchor\": \"%s\", \"anchor_seconds\": %s, \"ratio\": %s", a, b, (b > 0) ? sprintf("%.4f", s / b) : "null" }'
		fi
		printf '}'
	done <"$D/results"
	printf '\n  ],\n  "q4_k_pairs": ['
	if [ -s "$D/pairs" ]; then
		awk 'BEGIN { n = 0 } { printf "%s{\"qtk\": %s, \"llama_quantize\": %s, \"ratio\": %.4f}", (n++ ? ", " : ""), $1, $2, ($2 > 0 ? $1 / $2 : 0) }' "$D/pairs"
	fi
	printf '],\n  "repack_pairs": ['
	if [ -s "$D/rpairs" ]; then
		awk -F '|' 'BEGIN { n = 0 } { printf "%s{\"operation\": \"%s\", \"record\": %s, \"qtk\": %s, \"cp_fsync\": %s, \"ratio\": %.4f}", (n++ ? ", " : ""), $1, ($2 == "with" ? "true" : "false"), $3, $4, ($4 > 0 ? $3 / $4 : 0) }' "$D/rpairs"
	fi
	printf '],\n  "type_pairs": ['
	if [ -s "$D/tpairs" ]; then
		awk 'BEGIN { n = 0 } { printf "%s{\"type\": \"%s\", \"qtk\": %s, \"llama_quantize\": %s, \"ratio\": %.4f}", (n++ ? ", " : ""), $1, $2, $3, ($3 > 0 ? $2 / $3 : 0) }' "$D/tpairs"
	fi
	printf '],\n  "refit_pairs": ['
	if [ -s "$D/fpairs" ]; then
		awk 'BEGIN { n = 0 } { printf "%s{\"q4_k_to_awq_g32\": %s, \"f16_to_q4_k\": %s, \"ratio\": %.4f}", (n++ ? ", " : ""), $1, $2, ($2 > 0 ? $1 / $2 : 0) }' "$D/fpairs"
	fi
	printf '],\n  "encoders": ['
	awk '{ printf "%s\n    %s", (NR > 1 ? "," : ""), $0 }' "$D/enc.jsonl"
	printf '\n  ],\n  "kld": %s\n}\n' "$(kld_json)"
} >"$J"
echo "figures: $J"

rm -f "$D/m2.qpk" "$D/m.safetensors" "$D/m2.safetensors" "$D/copy2.gguf" "$D/copy.gguf" "$D/keep.gguf" "$D/f32.gguf" "$D/x.gguf" "$D/back.gguf" "$D"/t-*.gguf "$D"/n-*.gguf "$D"/l-*.gguf
rm -rf "$D/awq-fit" "$D/gptq-fit" "$D/awq-k" "$D/awq-copy"
