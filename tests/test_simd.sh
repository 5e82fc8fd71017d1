#!/bin/sh
# test_simd.sh - the encoders give the same bytes whatever lanes they run on: qconvert as
# built (the AVX2 k-quant search when the CPU has it, SSE2 elsewhere on x86), the same with
# QTK_SIMD=generic, and $QTK_BUILD/plain/qconvert (quant.c and quant_k.c on plain-C lanes,
# QTK_QV_PLAIN, and quant_awq.c), for every type qconvert encodes and the AWQ/GPTQ re-fits, on
# the project's own tiny sample.
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
# same_three TYPE EXT [ARGS...]: the conversion to TYPE (a .EXT output) from the three builds
same_three() {
	ty=$1 ext=$2
	shift 2
	"$BIN/qconvert" -q "$src" "$T/a.$ext" --to "$ty" "$@" >/dev/null 2>&1 &&
		QTK_SIMD=generic "$BIN/qconvert" -q "$src" "$T/b.$ext" --to "$ty" "$@" >/dev/null 2>&1 &&
		"$B/plain/qconvert" -q "$src" "$T/c.$ext" --to "$ty" "$@" >/dev/null 2>&1
	if [ $? -ne 0 ]; then
		bad "$ty: a conversion failed"
		return
	fi
	if cmp -s "$T/a.$ext" "$T/b.$ext"; then ok "$ty: default build = QTK_SIMD=generic"; else bad "$ty: default build and QTK_SIMD=generic differ"; fi
	if cmp -s "$T/a.$ext" "$T/c.$ext"; then ok "$ty: default build = plain-C lanes"; else bad "$ty: default build and plain-C lanes differ"; fi
}
for ty in q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs Q4_K_M; do
	same_three $ty gguf
done
# AWQ and GPTQ re-fits (the group search has an AVX2 build), into QPK files
for ty in awq gptq; do
	same_three $ty qpk --group-size 32
done

# The encoders alone (tests/simd_digest.c: every type, with and without an importance matrix):
# the library as built, QTK_SIMD=generic, the sources on the compiler's lanes, plain C.
D=$B/tests
if [ -x "$D/simd_digest" ] && [ -x "$D/simd_digest_src" ] && [ -x "$D/simd_digest_plain" ]; then
	"$D/simd_digest" >"$T/d.lib" 2>&1 || bad "simd_digest failed: $(tail -n 1 "$T/d.lib")"
	QTK_SIMD=generic "$D/simd_digest" >"$T/d.gen" 2>&1
	"$D/simd_digest_src" >"$T/d.src" 2>&1
	"$D/simd_digest_plain" >"$T/d.plain" 2>&1
	n=$(grep -c 'imatrix=' "$T/d.lib")
	[ "$n" -eq 24 ] && ok "simd_digest: 12 types x 2 ($n lines)" || bad "simd_digest printed $n digest lines"
	n=$(grep -c '^group fit' "$T/d.lib")
	[ "$n" -eq 4 ] && ok "simd_digest: 4 group-fit lines" || bad "simd_digest printed $n group-fit lines"
	for v in gen src plain; do
		if cmp -s "$T/d.lib" "$T/d.$v"; then ok "encoder digests: library = $v"; else bad "encoder digests: library and $v differ"; diff "$T/d.lib" "$T/d.$v" | head -5; fi
	done
else
	bad "the simd_digest programs are not built"
fi

# No encoder reads memory it has not written: the same programs under valgrind's memcheck, which
# reports a branch on an uninitialised value (q3_k's refinement once summed sub-block errors it
# had not computed yet, and its output then depended on the stack's old contents). CI installs it.
if command -v valgrind >/dev/null 2>&1; then
	for v in "" generic; do
		if QTK_SIMD=$v valgrind -q --error-exitcode=9 "$D/simd_digest" >/dev/null 2>"$T/vg.err"; then
			ok "encoders read no uninitialised memory (valgrind${v:+, QTK_SIMD=$v})"
		else
			bad "valgrind${v:+ (QTK_SIMD=$v)}: $(grep -m1 -A3 'uninit\|Invalid' "$T/vg.err")"
		fi
	done
	if valgrind -q --error-exitcode=9 "$D/simd_digest_plain" >/dev/null 2>"$T/vg.err"; then
		ok "encoders read no uninitialised memory (valgrind, plain-C lanes)"
	else
		bad "valgrind (plain-C lanes): $(grep -m1 -A3 'uninit\|Invalid' "$T/vg.err")"
	fi
else
	echo "skipped: valgrind memcheck of the encoders (needs valgrind)"
fi

# AArch64 NEON, cross-built and run under qemu, when the tools are installed (CI installs them)
if command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && command -v qemu-aarch64 >/dev/null 2>&1 &&
	[ -d /usr/aarch64-linux-gnu ]; then
	XB=$B-aarch64
	if ${MAKE:-make} -s B="$XB" CC=aarch64-linux-gnu-gcc SAN= PKG_CFLAGS= "$XB/tests/simd_digest_src" \
		"$XB/tests/simd_digest_plain" >"$T/x.log" 2>&1; then
		for v in src plain; do
			qemu-aarch64 -L /usr/aarch64-linux-gnu "$XB/tests/simd_digest_$v" >"$T/a.$v" 2>&1
			if cmp -s "$T/d.lib" "$T/a.$v"; then ok "encoder digests: aarch64 $v (qemu) = this machine"; else bad "encoder digests: aarch64 $v differs from this machine"; diff "$T/d.lib" "$T/a.$v" | head -5; fi
		done
	else
		bad "cannot cross-build for aarch64: $(tail -n 3 "$T/x.log")"
	fi
else
	echo "skipped: AArch64 NEON check (needs aarch64-linux-gnu-gcc, libc6-dev-arm64-cross, qemu-user)"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
