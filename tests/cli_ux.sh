#!/bin/sh
# CLI tests of a new user's first hour: llama-quantize's names, no dead ends on the README's
# examples, options that cannot be honoured, --exact decided early, qverify --against's default bar.
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
T=$(mktemp -d /tmp/qtk-ux-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
SOURCE_DATE_EPOCH=1700000000; export SOURCE_DATE_EPOCH

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
run() {
	name=$1; want=$2; shift 2
	"$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" -eq "$want" ]; then ok; else bad "$name: exit $got, expected $want"; sed 's/^/  stderr: /' "$T/err" | head -5; fi
}
out_has() { if grep -q -- "$2" "$T/out"; then ok; else bad "$1: stdout lacks '$2'"; head -5 "$T/out"; fi; }
err_has() { if grep -q -- "$2" "$T/err"; then ok; else bad "$1: stderr lacks '$2'"; head -5 "$T/err"; fi; }
no_file() { if [ ! -e "$2" ]; then ok; else bad "$1: '$2' exists"; fi; }
# same NAME A B: the same tensors, layouts and values (the provenance record names the --to value)
same() {
	"$BIN/qinspect" --json "$2" | sed -e '/"provenance":/,$d' | grep -v '"file":' >"$T/ja"
	"$BIN/qinspect" --json "$3" | sed -e '/"provenance":/,$d' | grep -v '"file":' >"$T/jb"
	if cmp -s "$T/ja" "$T/jb" && "$BIN/qverify" --against "$2" "$3" | grep -q "against: ok: 21 exact, 0 lossy"; then
		ok
	else
		bad "$1: $2 and $3 differ"
	fi
}
# types NAME FILE: the distinct layouts of FILE's tensors, sorted, one line
types() { "$BIN/qinspect" --json "$1" | sed -n 's/.*"layout":[[:space:]]*"\([^"]*\)".*/\1/p' | sort -u | tr '\n' ' '; }

S=$T/samples
"$B/samples/gen" "$S" >/dev/null || bad "sample generator"
G=$S/tiny-llama-f32.gguf

# --- llama-quantize's names: any case, its aliases, --pure for one type
for n in Q4_K_M q4_k_m q4_K_M Q4_K q4_k; do
	run "--to $n" 0 "$BIN/qconvert" -q "$G" "$T/m-$n.gguf" --to "$n"
done
same "q4_k_m = Q4_K_M" "$T/m-Q4_K_M.gguf" "$T/m-q4_k_m.gguf"
same "q4_K_M = Q4_K_M" "$T/m-Q4_K_M.gguf" "$T/m-q4_K_M.gguf"
same "Q4_K means Q4_K_M" "$T/m-Q4_K_M.gguf" "$T/m-Q4_K.gguf"
same "q4_k means Q4_K_M" "$T/m-Q4_K_M.gguf" "$T/m-q4_k.gguf"
case "$(types "$T/m-q4_k.gguf")" in *q6_k*) ok ;; *) bad "Q4_K_M mix has no q6_k tensor" ;; esac
run "--to q4_k --pure" 0 "$BIN/qconvert" -q "$G" "$T/pure.gguf" --to q4_k --pure
if [ "$(types "$T/pure.gguf")" = "f32 ggml:q4_k " ]; then ok; else bad "--pure: $(types "$T/pure.gguf")"; fi
run "--pure with awq" 2 "$BIN/qconvert" "$S/tiny-llama/" "$T/a/" --to awq --pure
err_has "--pure with awq" "--pure applies to llama.cpp's types"
run "unknown name" 2 "$BIN/qconvert" "$G" "$T/x.gguf" --to q4_km
err_has "unknown name" "did you mean 'Q4_K_M'"
err_has "unknown name lists" "IQ4_XS"
run "far name" 2 "$BIN/qconvert" "$G" "$T/x.gguf" --to zzzzzz
err_has "far name" "known:"
run "decode-only type" 2 "$BIN/qconvert" "$G" "$T/x.gguf" --to IQ2_XS
err_has "decode-only type" "can read IQ2_XS but not write it (yet)"
no_file "nothing written" "$T/x.gguf"

"$BIN/qconvert" -q "$S/tiny-llama/" "$T/awq/" --to awq

# --- quantized GGUF -> Hugging Face directory or .safetensors: dequantized, said in one line
"$BIN/qconvert" -q "$G" "$T/q4.gguf" --to Q4_K_M
run "Q4_K_M -> HF dir" 0 "$BIN/qconvert" "$T/q4.gguf" "$T/hf/"
err_has "Q4_K_M -> HF dir" "note: 16 ggml tensors (Q4_K, Q6_K) dequantized to F32"
run "dequantized HF is exact" 0 "$BIN/qverify" --against "$T/q4.gguf" "$T/hf/"
out_has "dequantized HF is exact" "21 exact, 0 lossy"
run "Q4_K_M -> .safetensors" 0 "$BIN/qconvert" -q "$T/q4.gguf" "$T/q4.safetensors"
if [ "$(types "$T/q4.safetensors")" = "f32 " ]; then ok; else bad "safetensors types: $(types "$T/q4.safetensors")"; fi
run "ggml type into safetensors" 2 "$BIN/qconvert" "$G" "$T/y.safetensors" --to q4_k_m
err_has "ggml type into safetensors" "write a .gguf or .qpk"
err_has "ggml type into safetensors: alternatives" "awq|gptq|ct-int|mlx"
no_file "ggml type into safetensors" "$T/y.safetensors"

run "AWQ -> GGUF with keep" 2 "$BIN/qconvert" "$T/awq/" "$T/awq.gguf"
err_has "AWQ -> GGUF with keep" "GGUF has no layout for awq layers: choose one with --to (auto-exact"
no_file "AWQ -> GGUF with keep" "$T/awq.gguf"

# --- options the run cannot honour
run "--bits 3 awq" 2 "$BIN/qconvert" "$S/tiny-llama/" "$T/b/" --to awq --bits 3
err_has "--bits 3 awq" "AWQ (GEMM) packs 4 bits only"
run "--bits with q4_0" 2 "$BIN/qconvert" "$G" "$T/b.gguf" --to q4_0 --bits 4
err_has "--bits with q4_0" "--bits applies to gptq, mlx and ct-int"
run "--group-size with q4_0" 2 "$BIN/qconvert" "$G" "$T/b.gguf" --to q4_0 --group-size 128
err_has "--group-size with q4_0" "ggml types have fixed blocks"
run "--sym with awq" 2 "$BIN/qconvert" "$S/tiny-llama/" "$T/b/" --to awq --sym
run "--sym with keep" 2 "$BIN/qconvert" "$G" "$T/b.gguf" --sym
run "--split-max-size into .safetensors" 2 "$BIN/qconvert" "$G" "$T/b.safetensors" --split-max-size 1M
run "--bits 6 gptq" 2 "$BIN/qconvert" "$S/tiny-llama/" "$T/b/" --to gptq --bits 6
no_file "nothing written" "$T/b.gguf"
no_file "nothing written (dir)" "$T/b"

# --- --exact decided early; --dry-run exits as the run would
run "--exact stops at the first lossy tensor" 1 "$BIN/qconvert" --exact "$G" "$T/e.gguf" --to q4_0
err_has "--exact stops early" "stopped at tensor 1 of 21"
no_file "--exact: nothing written" "$T/e.gguf"
run "--dry-run --exact" 1 "$BIN/qconvert" --dry-run --exact "$G" "$T/e.gguf" --to q4_0
out_has "--dry-run --exact" "the run would fail its checks"
no_file "--dry-run --exact: nothing written" "$T/e.gguf"
run "--dry-run --exact, exact" 0 "$BIN/qconvert" --dry-run --exact "$T/q4.gguf" "$T/e2/"
out_has "--dry-run --exact, exact" "21 exact, 0 requantized"
no_file "--dry-run: no directory" "$T/e2"
run "--dry-run --max-error" 1 "$BIN/qconvert" --dry-run --max-error 25 "$G" "$T/e.gguf" --to q4_0
run "--max-error stops early" 1 "$BIN/qconvert" --max-error 25 "$G" "$T/e.gguf" --to q4_0
err_has "--max-error stops early" "stopped at the first tensor below it"
n=$(find "$T" -name '.*qtk-*' | wc -l)
if [ "$n" -eq 0 ]; then ok; else bad "$n temporaries left"; fi

# --- qverify --against: a default bar a broken tensor cannot pass
"$BIN/qconvert" -q "$G" "$T/q8.gguf" --to q8_0
run "against q8_0" 0 "$BIN/qverify" --against "$G" "$T/q8.gguf"
out_has "against q8_0 says its bar" "bar: SQNR >= 6.02 dB per bit"
cp "$T/q8.gguf" "$T/broken.gguf"
sz=$(wc -c <"$T/broken.gguf")
dd if=/dev/zero of="$T/broken.gguf" bs=1 seek=$((sz - 4096)) count=4096 conv=notrunc 2>/dev/null
run "against broken" 1 "$BIN/qverify" --against "$G" "$T/broken.gguf"
out_has "against broken" "below the default bar"
run "against broken, --max-error 10" 0 "$BIN/qverify" --against "$G" --max-error 10 "$T/broken.gguf"
"$BIN/qconvert" -q "$G" "$T/q2.gguf" --to Q2_K
run "against Q2_K passes" 0 "$BIN/qverify" --against "$G" "$T/q2.gguf"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
