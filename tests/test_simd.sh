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
# AWQ and GPTQ re-fits (the group search has AVX2 and AVX-512 builds), into QPK files; and the
# same with QTK_SIMD=avx2 (the AVX2 kernels where the AVX-512 ones would run)
for ty in awq gptq; do
	same_three $ty qpk --group-size 32
	if QTK_SIMD=avx2 "$BIN/qconvert" -q "$src" "$T/d.qpk" --to $ty --group-size 32 >/dev/null 2>&1 &&
		cmp -s "$T/a.qpk" "$T/d.qpk"; then
		ok "$ty: default build = QTK_SIMD=avx2"
	else
		bad "$ty: default build and QTK_SIMD=avx2 differ"
	fi
done

# The conversion report's error figures (qconvert's check sums them in AVX lanes when it can):
# the same numbers with QTK_SIMD=generic, from a source whose matrix holds a NaN and infinities
# at places that stop the vector loop (mid-row, a group's last element, a row's first).
python3 - "$T/s/tiny-llama/model.safetensors" "$T/nf.safetensors" <<'PY' || bad "cannot write the source with non-finite values"
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
t = h["model.layers.0.self_attn.q_proj.weight"]
base = 8 + n + t["data_offsets"][0]
for i, v in ((5, 0x7E00), (259, 0x7C00), (512, 0xFC00)):
    b[base + 2 * i:base + 2 * i + 2] = struct.pack("<H", v)
open(sys.argv[2], "wb").write(b)
PY
for ty in q8_0 q4_k; do
	"$BIN/qconvert" -q "$T/nf.safetensors" "$T/r1.gguf" --to "$ty" --report "$T/r1.json" >/dev/null 2>&1 &&
		QTK_SIMD=generic "$BIN/qconvert" -q "$T/nf.safetensors" "$T/r2.gguf" --to "$ty" --report "$T/r2.json" >/dev/null 2>&1
	if [ $? -ne 0 ]; then
		bad "$ty from a source with non-finite values: conversion failed"
		continue
	fi
	# reports equal but for their output names and timings
	v=$(python3 - "$T/r1.json" "$T/r2.json" <<'PY'
import json, math, sys
def load(p):
    d = json.load(open(p))
    return {t["name"]: {k: t[k] for k in ("rmse", "max_abs_err", "sqnr_db", "cosine", "bias", "exact")}
            for t in d["tensors"]}
a, b = load(sys.argv[1]), load(sys.argv[2])
q = a.get("model.layers.0.self_attn.q_proj.weight", {})
fin = isinstance(q.get("rmse"), float) and math.isfinite(q["rmse"]) and not q.get("exact", True)
# an infinite largest error is written as null
print("same" if a == b else "differ", "finite" if fin else "nonfinite:%r" % q.get("rmse"),
      "inf" if "max_abs_err" in q and q["max_abs_err"] is None else "max:%r" % q.get("max_abs_err"))
PY
)
	case $v in
	"same finite inf") ok "$ty report with NaN/Inf in the source: AVX lanes = generic ($v)" ;;
	*) bad "$ty report with NaN/Inf in the source: $v" ;;
	esac
done

# The encoders alone (tests/simd_digest.c: every type, with and without an importance matrix):
# the library as built, QTK_SIMD=generic, QTK_SIMD=avx2 (no AVX-512 kernels), the sources on the
# compiler's lanes, plain C.
D=$B/tests
if [ -x "$D/simd_digest" ] && [ -x "$D/simd_digest_src" ] && [ -x "$D/simd_digest_plain" ]; then
	"$D/simd_digest" >"$T/d.lib" 2>&1 || bad "simd_digest failed: $(tail -n 1 "$T/d.lib")"
	QTK_SIMD=generic "$D/simd_digest" >"$T/d.gen" 2>&1
	QTK_SIMD=avx2 "$D/simd_digest" >"$T/d.avx2" 2>&1
	"$D/simd_digest_src" >"$T/d.src" 2>&1
	"$D/simd_digest_plain" >"$T/d.plain" 2>&1
	n=$(grep -c 'imatrix=' "$T/d.lib")
	[ "$n" -eq 24 ] && ok "simd_digest: 12 types x 2 ($n lines)" || bad "simd_digest printed $n digest lines"
	n=$(grep -c '^group fit' "$T/d.lib")
	[ "$n" -eq 4 ] && ok "simd_digest: 4 group-fit lines" || bad "simd_digest printed $n group-fit lines"
	n=$(grep -c '^odd rows' "$T/d.lib")
	[ "$n" -eq 10 ] && ok "simd_digest: 10 lines of seven-block rows" || bad "simd_digest printed $n seven-block lines"
	n=$(grep -c '^mixed sub-blocks' "$T/d.lib")
	[ "$n" -eq 5 ] && ok "simd_digest: 5 lines of mixed sub-blocks" || bad "simd_digest printed $n mixed sub-block lines"
	n=$(grep -c '^mixed blocks' "$T/d.lib")
	[ "$n" -eq 3 ] && ok "simd_digest: 3 lines of mixed legacy blocks" || bad "simd_digest printed $n mixed legacy-block lines"
	# the bytes themselves, pinned: a change of any encoder's output shows here. When it is on
	# purpose (a better search), check the quality figures (docs/benchmarks.md) and replace
	# tests/data/simd_digest.expected with the new lines.
	if cmp -s "$T/d.lib" tests/data/simd_digest.expected; then
		ok "encoder digests: as pinned in tests/data/simd_digest.expected"
	else
		bad "encoder digests differ from tests/data/simd_digest.expected (an encoder's output changed)"
		diff tests/data/simd_digest.expected "$T/d.lib" | head -8
	fi
	for v in gen avx2 src plain; do
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
# An x86-64 CPU without AVX, AVX2 or F16C (qemu's qemu64 model): the builds chosen at run time
# must not be taken, and the bytes must be the same. Catches a dispatch that asks the wrong
# question (an illegal instruction) as well as a fallback that differs.
case $(uname -m) in
x86_64)
	if command -v qemu-x86_64 >/dev/null 2>&1; then
		qemu-x86_64 -cpu qemu64 "$D/simd_digest" >"$T/q.lib" 2>&1
		if cmp -s "$T/d.lib" "$T/q.lib"; then ok "encoder digests: x86-64 without AVX (qemu64) = this machine"; else bad "encoder digests without AVX (qemu64) differ: $(tail -n 2 "$T/q.lib")"; fi
		if [ -x "$B/tests/test_dequant" ] && qemu-x86_64 -cpu qemu64 "$B/tests/test_dequant" >"$T/q.dq" 2>&1; then
			ok "decoders on x86-64 without AVX/F16C (qemu64): $(tail -n 1 "$T/q.dq")"
		else
			bad "test_dequant without AVX/F16C (qemu64): $(grep -m3 '^FAIL' "$T/q.dq"; tail -n 1 "$T/q.dq")"
		fi
		# an F16 source (the F16 decoder's path) into q5_0 and q4_k, against this machine's bytes
		f16=$T/s/tiny-llama-f16.gguf
		if "$BIN/qconvert" -q "$src" "$f16" --to f16 >/dev/null 2>&1; then
			for ty in q5_0 q4_k; do
				"$BIN/qconvert" -q "$f16" "$T/n.$ty.gguf" --to "$ty" >/dev/null 2>&1
				qemu-x86_64 -cpu qemu64 "$BIN/qconvert" -q "$f16" "$T/q.$ty.gguf" --to "$ty" >/dev/null 2>&1
				if cmp -s "$T/n.$ty.gguf" "$T/q.$ty.gguf"; then ok "F16 -> $ty without AVX/F16C (qemu64) = this machine"; else bad "F16 -> $ty without AVX/F16C (qemu64) differs"; fi
			done
		else
			bad "cannot make the F16 sample"
		fi
	else
		echo "skipped: x86-64 without AVX (needs qemu-x86_64, package qemu-user)"
	fi
	;;
esac
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
