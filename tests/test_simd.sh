#!/bin/sh
# test_simd.sh - the encoders give the same bytes whatever lanes they run on: qconvert as
# built (the AVX2 k-quant search when the CPU has it, SSE2 elsewhere on x86), the same with
# QTK_SIMD=generic, and $QTK_BUILD/plain/qconvert (quant.c and quant_k.c on plain-C lanes,
# QTK_QV_PLAIN), for every type qconvert encodes, on the project's own tiny sample.
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
pass=0; fail=0
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export SOURCE_DATE_EPOCH=1700000000
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }

if [ ! -x "$B/plain/qconvert" ]; then
	bad "$B/plain/qconvert is not built (make $B/plain/qconvert)"
	echo "$pass passed, $fail failed"
	exit 1
fi
"$B/samples/gen" "$T/s" >/dev/null || { bad "sample generator"; echo "$pass passed, $fail failed"; exit 1; }
src=$T/s/tiny-llama-f32.gguf
for ty in q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs Q4_K_M; do
	"$BIN/qconvert" -q "$src" "$T/a.gguf" --to $ty >/dev/null 2>&1 &&
		QTK_SIMD=generic "$BIN/qconvert" -q "$src" "$T/b.gguf" --to $ty >/dev/null 2>&1 &&
		"$B/plain/qconvert" -q "$src" "$T/c.gguf" --to $ty >/dev/null 2>&1
	if [ $? -ne 0 ]; then
		bad "$ty: a conversion failed"
		continue
	fi
	if cmp -s "$T/a.gguf" "$T/b.gguf"; then ok "$ty: default build = QTK_SIMD=generic"; else bad "$ty: default build and QTK_SIMD=generic differ"; fi
	if cmp -s "$T/a.gguf" "$T/c.gguf"; then ok "$ty: default build = plain-C lanes"; else bad "$ty: default build and plain-C lanes differ"; fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
