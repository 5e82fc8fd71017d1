#!/bin/sh
# Run every unit test binary and the CLI tests; print the grand total.
B=${QTK_BUILD:-build}
pass=0; fail=0; skipped=0
out=$(mktemp)
# the project's own samples, which some tests read, and the quick start's conversions of them
[ -f "$B/samples/tiny-llama-f32.gguf" ] || "$B/samples/gen" "$B/samples" >/dev/null 2>&1
BIN=${QTK_BIN:-bin}
[ -f "$B/samples/tiny-llama-Q4_K_M.gguf" ] || "$BIN/qconvert" -q "$B/samples/tiny-llama/" \
	"$B/samples/tiny-llama-Q4_K_M.gguf" --to Q4_K_M >/dev/null 2>&1
[ -d "$B/samples/tiny-llama-awq" ] || "$BIN/qconvert" -q "$B/samples/tiny-llama/" "$B/samples/tiny-llama-awq/" \
	--to awq --group-size 128 >/dev/null 2>&1
for t in "$B"/tests/test_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	"$t" >"$out" 2>&1
	rc=$?
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
	p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
	f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
	s=$(grep -c '^skipped' "$out")
	[ -n "$p" ] || p=0
	[ -n "$f" ] || f=1
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	pass=$((pass + p)); fail=$((fail + f)); skipped=$((skipped + s))
	if [ "$f" -ne 0 ]; then
		echo "== $name: FAILED (exit $rc)"; grep -E '^(FAIL|skipped)' "$out" | head -50
		tail -n 5 "$out"
	else
		echo "== $name: $p passed${s:+, $s skipped}"
		grep '^skipped' "$out" | head -5
	fi
done
if [ -f tests/cli.sh ]; then
	QTK_BUILD=$B sh tests/cli.sh >"$out" 2>&1
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
	p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p'); [ -n "$p" ] || p=0
	f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p'); [ -n "$f" ] || f=1
	s=$(grep -c '^skipped' "$out")
	pass=$((pass + p)); fail=$((fail + f)); skipped=$((skipped + s))
	echo "== cli: $p passed, $f failed${s:+, $s skipped}"
	grep -E '^(FAIL|skipped)' "$out" | head -50
fi
for extra in tests/cli_*.sh tests/test_limits.sh tests/test_layers.sh tests/tui_smoke.sh tests/test_verify.sh tests/fuzz_replay.sh tests/test_faults.sh tests/test_simd.sh; do
	[ -f "$extra" ] || continue
	QTK_BUILD=$B sh "$extra" >"$out" 2>&1
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
	p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p'); [ -n "$p" ] || p=0
	f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p'); [ -n "$f" ] || f=1
	s=$(grep -c '^skipped' "$out")
	pass=$((pass + p)); fail=$((fail + f)); skipped=$((skipped + s))
	echo "== $(basename "$extra" .sh): $p passed, $f failed${s:+, $s skipped}"
	grep -E '^(FAIL|skipped)' "$out" | head -20
done
rm -f "$out"
echo "$pass passed, $fail failed, $skipped skipped"
[ "$fail" -eq 0 ]
