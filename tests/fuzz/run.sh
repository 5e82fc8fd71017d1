#!/bin/sh
# run.sh - run the libFuzzer binaries (make fuzz-build) over copies of the seed corpora.
#   FUZZ_TIME   seconds of wall time per target (default 60)
#   FUZZ_PAR    targets run at the same time (default 1)
#   FUZZ_TARGETS space-separated targets (default: all)
#   FUZZ_B      build directory of the libFuzzer binaries (default build-fuzz)
#   FUZZ_MALLOC_MB  largest single allocation in MiB (default 64): more is reported as
#               out-of-memory, since no input of at most 64 KiB justifies it (docs/cli.md, "Hostile input")
# Runs in libFuzzer's fork mode (-fork=1) and keeps going after crashes, timeouts and
# out-of-memory inputs; artifacts go to $FUZZ_B/artifacts/<target>/, logs to $FUZZ_B/logs/,
# the grown corpus to $FUZZ_B/corpus/<target>/. Prints CPU seconds per target.
set -u
FB=${FUZZ_B:-build-fuzz}
T=${FUZZ_TIME:-60}
PAR=${FUZZ_PAR:-1}
TARGETS=${FUZZ_TARGETS:-gguf safetensors st_index hfdir qpk archive zst spm imatrix prov hfmap ct mlx bnb mxfp4 jsonfmt}
[ -n "$FUZZ_TARGETS" ] || TARGETS="$TARGETS sigbundle"
mkdir -p "$FB/logs" "$FB/tmp"

dict_for() {
	case $1 in
	hfdir | st_index | safetensors | prov | hfmap | jsonfmt) echo "-dict=tests/fuzz/json.dict" ;;
	sigbundle) echo "-dict=tests/fuzz/json.dict" ;;
	gguf | imatrix | archive | zst) echo "-dict=tests/fuzz/gguf.dict" ;;
	ct | mlx | bnb | mxfp4) echo "-dict=tests/fuzz/scheme.dict" ;;
	*) echo "" ;;
	esac
}

# run_one TARGET: fuzz in-process until FUZZ_TIME seconds have passed; after a crash, timeout or
# out-of-memory input (saved under artifacts/) start again with the time left. Each segment's
# CPU time goes to $FB/ledger.txt: target, start, user and system seconds, wall seconds, status.
run_one() {
	t=$1
	mkdir -p "$FB/corpus/$t" "$FB/artifacts/$t"
	stop=$(($(date +%s) + T))
	while :; do
		left=$((stop - $(date +%s)))
		[ "$left" -ge 5 ] || break
		tmp=$(mktemp -d "$FB/tmp/$t.XXXXXX")
		start=$(date -u +%H:%M:%S)
		TMPDIR=$tmp /usr/bin/time -f "%U %S %e" -o "$FB/logs/$t.seg" \
			nice -n 19 "$FB/fuzz/fuzz_$t" -max_total_time="$left" -timeout=20 -rss_limit_mb=2048 \
			-malloc_limit_mb="${FUZZ_MALLOC_MB:-64}" \
			-max_len=65536 -print_final_stats=1 -artifact_prefix="$FB/artifacts/$t/" $(dict_for "$t") \
			"$FB/corpus/$t" "${QTK_BUILD:-build}/fuzz/corpus/$t" >>"$FB/logs/$t.log" 2>&1
		rc=$?
		rm -rf "$tmp"
		echo "$t $start $(tail -n 1 "$FB/logs/$t.seg") $rc" >>"$FB/ledger.txt"
		[ "$rc" -eq 0 ] && break
	done
	awk -v t="$t" '$1 == t { u += $3; s += $4; w += $5; n++ }
		END { printf "%s: %.0f CPU seconds (user %.0f, sys %.0f), %.0f s wall, %d segments\n", t, u + s, u, s, w, n }' \
		"$FB/ledger.txt"
	echo "  corpus $(ls "$FB/corpus/$t" | wc -l), artifacts $(ls "$FB/artifacts/$t" | wc -l)"
}

n=0
for t in $TARGETS; do
	run_one "$t" &
	n=$((n + 1))
	if [ "$n" -ge "$PAR" ]; then
		wait
		n=0
	fi
done
wait
