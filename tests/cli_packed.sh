#!/bin/sh
# cli_packed.sh - packed parts without the quantization config that explains them (docs/cli.md,
# "Input formats"): qconvert refuses (exit 3) naming the scheme the tensors look like and the
# config to supply, and writes nothing; qinspect shows the file with a warning. Samples made by
# qconvert itself; the real checkpoints of ../shared/fixtures when present.
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
T=$(mktemp -d /tmp/qtk-packed-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
FX=${QTK_FIXTURES:-../shared/fixtures}
[ -f "$FX/README.md" ] || FX=""

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

S=$T/samples
"$B/samples/gen" "$S" >/dev/null || bad "sample generator"
H=$S/tiny-llama

# bare NAME FILE LOOKS PARTS HINT: FILE alone (no config.json beside it) is refused by qconvert
# and flagged by qinspect
bare() {
	bn=$1; src=$2; looks=$3; parts=$4; hint=$5
	mkdir -p "$T/bare/$bn" && cp "$src" "$T/bare/$bn/model.safetensors"
	f=$T/bare/$bn/model.safetensors
	for out in o.gguf o.safetensors o/; do
		run "$bn -> $out" 3 "$BIN/qconvert" "$f" "$T/bare/$bn/$out" --names keep
		err_has "$bn -> $out" "look.* like $looks ($parts) but no quantization config explains"
		no_file "$bn -> $out" "$T/bare/$bn/$out"
	done
	err_has "$bn: names the tensor" "error: tensor '"
	err_has "$bn: the config to supply" "$hint"
	err_has "$bn: where the config goes" "directory of its config.json"
	run "$bn --to f32" 3 "$BIN/qconvert" "$f" "$T/bare/$bn/f.gguf" --to f32 --names keep
	run "$bn --dry-run" 3 "$BIN/qconvert" --dry-run "$f" "$T/bare/$bn/f.gguf" --names keep
	run "$bn qinspect" 0 "$BIN/qinspect" --summary "$f"
	err_has "$bn qinspect" "qinspect: .*: warning: tensor '.*look.* like $looks"
	run "$bn qinspect --json" 0 "$BIN/qinspect" --json "$f"
	err_has "$bn qinspect --json" "warning: "
}

for to in awq gptq mlx ct-int; do
	run "make $to" 0 "$BIN/qconvert" -q "$H" "$T/$to/" --to $to
done
bare awq "$T/awq/model.safetensors" "awq (gemm) or gptq" "qweight, qzeros, scales" '"quant_method": "awq"'
err_has "awq: both schemes' configs" '"quant_method": "gptq"'
bare gptq "$T/gptq/model.safetensors" "awq (gemm) or gptq" "qweight, qzeros, scales" '"quant_method": "gptq"'
bare mlx "$T/mlx/model.safetensors" "mlx affine" "weight, scales, biases" '"quantization": {"group_size"'
bare ct-int "$T/ct-int/model.safetensors" "compressed-tensors int" "weight_packed, weight_scale" 'compressed-tensors'

# with its config beside it, the same file folds and converts
run "awq with config" 0 "$BIN/qconvert" -q "$T/awq/model.safetensors" "$T/awq-f16.gguf" --to f16 --names keep
# a .safetensors qtk wrote carries its config in __metadata__: not flagged
run "awq bare file by qtk" 0 "$BIN/qconvert" -q "$H" "$T/own.safetensors" --to awq
run "awq bare file by qtk reads back" 0 "$BIN/qconvert" -q "$T/own.safetensors" "$T/own.gguf" --to f16 --names keep
run "plain model not flagged" 0 "$BIN/qinspect" --summary "$H"
if [ -s "$T/err" ]; then bad "plain model not flagged: $(head -c 200 "$T/err")"; else ok; fi

# packed layers with GGUF names (Q/K rows in llama.cpp's order) kept into a Hugging Face directory:
# rows of every part move where the parts are rows of output features (MLX, FP8), AWQ's and
# GPTQ's integer groups move with the rows (they pack output features across a word), exactly,
# and back; a layout neither way (asymmetric ct-int: zero points packed across outputs) is
# refused plainly
G=$S/tiny-llama-f32.gguf
for to in awq gptq mlx ct-fp8; do
	run "$to with gguf names" 0 "$BIN/qconvert" -q "$G" "$T/gn-$to.qpk" --to $to
	run "$to with gguf names -> hf (keep)" 0 "$BIN/qconvert" -v "$T/gn-$to.qpk" "$T/gn-$to/"
	err_has "$to q_proj kept exact" "q_proj.weight .* exact"
	run "$to hf against its gguf-named source" 0 "$BIN/qinspect" --diff "$T/gn-$to.qpk" "$T/gn-$to/"
	out_has "$to hf against its gguf-named source" "with Q/K rows un-permuted), [0-9]* exact$"
	run "$to hf -> gguf names" 0 "$BIN/qconvert" -q "$T/gn-$to/" "$T/gn-$to-back.qpk" --names gguf
	run "$to gguf names round trip" 0 "$BIN/qinspect" --diff "$T/gn-$to.qpk" "$T/gn-$to-back.qpk"
	out_has "$to gguf names round trip" "0 with Q/K rows un-permuted), [0-9]* exact$"
done
run "ct-int with gguf names" 0 "$BIN/qconvert" -q "$G" "$T/gn-ct.qpk" --to ct-int
run "ct-int with gguf names -> hf (keep)" 2 "$BIN/qconvert" -q "$T/gn-ct.qpk" "$T/gn-ct/"
err_has "ct-int q/k rows refused" "Q/K rows of ct-int.* layers cannot be moved to Hugging Face's order"
no_file "ct-int q/k rows refused: nothing written" "$T/gn-ct"

# act-order sources (a g_idx that is not i / group) repacked exactly a window of output features
# at a time, AWQ-like column bands through a scratch file: the same directory as the whole-tensor
# path (QTK_REPACK=windows), exact against the source
if [ -n "$FX" ] && [ -d "$FX/hf/tiny-llama/gptq-4-128-1" ]; then
	for src in "$FX/hf/tiny-llama/gptq-4-128-1:gptq-v1" "$FX/hf/ct/ct-w4a16-g128-actorder:ct-int" "$FX/hf/ct/ct-w4a16-g128-actorder:gptq-v1"; do
		d=${src%%:*}; to=${src##*:}; sn=$(basename "$d")-$to
		run "$sn streamed" 0 env SOURCE_DATE_EPOCH=1 "$BIN/qconvert" -v "$d" "$T/ao-st-$sn/" --to $to
		err_has "$sn streamed" "window by window"
		run "$sn whole" 0 env SOURCE_DATE_EPOCH=1 QTK_REPACK=windows "$BIN/qconvert" -q "$d" "$T/ao-wi-$sn/" --to $to
		if diff -r "$T/ao-st-$sn" "$T/ao-wi-$sn" >/dev/null; then ok; else bad "$sn: streamed and whole directories differ"; fi
		run "$sn exact" 0 "$BIN/qinspect" --diff "$d" "$T/ao-st-$sn/"
		out_has "$sn exact" " exact$"
	done
	# act-order integers a target cannot store (v1 zero points of 16 into ct-int) cannot be
	# re-fitted either (the fit groups consecutive inputs): said plainly, exit 3, nothing written,
	# on either path
	for mode in stream windows; do
		run "act-order misfit ($mode)" 3 env QTK_REPACK=$mode "$BIN/qconvert" -q "$FX/hf/tiny-llama/gptq-4-128-1" "$T/ao-mis-$mode/" --to ct-int
		err_has "act-order misfit ($mode)" "act-order integers do not fit ct-int as they are"
		no_file "act-order misfit ($mode): nothing written" "$T/ao-mis-$mode"
	done
	# a kept act-order layout whose Q/K rows move (HF -> GGUF names): the rows of every per-row
	# part move, the g_idx (one entry per input; q_proj is square, so it is as long as the rows)
	# stays as it is; verified against the source, and back
	AO=$FX/hf/ct/ct-w4a16-g128-actorder
	run "act-order ct-int -> gguf names" 0 "$BIN/qconvert" -q "$AO" "$T/ao-gn.qpk" --names gguf
	run "act-order ct-int gguf names against the source" 0 "$BIN/qverify" "$T/ao-gn.qpk" --against "$AO"
	out_has "act-order ct-int gguf names against the source" "against: ok: .* exact, 0 lossy"
	run "act-order ct-int gguf names -> hf" 0 "$BIN/qconvert" -q "$T/ao-gn.qpk" "$T/ao-back/"
	run "act-order ct-int round trip" 0 "$BIN/qinspect" --diff "$AO" "$T/ao-back/"
	out_has "act-order ct-int round trip" " exact$"
else
	echo "skipped: fixtures absent (act-order repacks a window at a time)"
fi

# MXFP4 GGUF -> HF directory keeps compressed-tensors' mxfp4-pack-quantized layout (a byte
# shuffle), exact, and goes back to the same GGUF bytes; the bare packed file is flagged
run "mxfp4 gguf" 0 "$BIN/qconvert" -q "$H" "$T/mx.gguf" --to mxfp4 --pure
run "mxfp4 gguf -> hf" 0 "$BIN/qconvert" "$T/mx.gguf" "$T/mxhf/" --exact
out_has "mxfp4 gguf -> hf" " 0 requantized"
if grep -q '"format":[[:space:]]*"mxfp4-pack-quantized"' "$T/mxhf/config.json"; then ok; else bad "mxfp4 hf: config format"; fi
run "mxfp4 hf inspect" 0 "$BIN/qinspect" "$T/mxhf"
out_has "mxfp4 hf inspect" "self_attn.q_proj.weight .* mxfp4 .* 4 .* 32"
run "mxfp4 hf verify" 0 "$BIN/qverify" "$T/mxhf" --against "$T/mx.gguf"
out_has "mxfp4 hf verify" "against: ok: .* exact, 0 lossy"
run "mxfp4 hf -> gguf" 0 "$BIN/qconvert" -q "$T/mxhf" "$T/mx2.gguf" --to mxfp4 --pure --exact
run "mxfp4 round trip" 0 "$BIN/qinspect" --diff "$T/mx.gguf" "$T/mx2.gguf"
out_has "mxfp4 round trip" "exact$"
run "mxfp4 hf -> qpk" 0 "$BIN/qconvert" -q "$T/mxhf" "$T/mx.qpk"
run "mxfp4 qpk -> hf" 0 "$BIN/qconvert" -q "$T/mx.qpk" "$T/mxhf2/"
if cmp -s "$T/mxhf/model.safetensors" "$T/mxhf2/model.safetensors"; then ok; else bad "mxfp4 hf -> qpk -> hf: safetensors differ"; fi
bare ct-mxfp4 "$T/mxhf/model.safetensors" "mxfp4" "weight_packed, weight_scale" 'mxfp4-pack-quantized'

# the real checkpoints of the other schemes
if [ -n "$FX" ]; then
	bare bnb4 "$FX/hf/more/bnb-nf4-dq/model.safetensors" "bitsandbytes 4-bit" "weight, weight.absmax, weight.quant_map" '"load_in_4bit": true'
	bare fp8-ct "$FX/hf/ct/ct-fp8-block/model.safetensors" "fp8 e4m3" "weight, weight_scale" '"quant_method": "fp8"'
	bare fp8-ds "$FX/hf/ct/ds-fp8-block/model.safetensors" "fp8 e4m3" "weight, weight_scale_inv" '"weight_block_size"'
	bare nvfp4-ct "$FX/hf/ct/ct-nvfp4/model.safetensors" "nvfp4" "weight_packed, weight_scale, weight_global_scale" 'NVFP4'
	bare nvfp4-mo "$FX/hf/ct/modelopt-nvfp4/model.safetensors" "nvfp4" "weight, weight_scale, weight_scale_2" '"quant_method": "modelopt"'
	bare int8-ct "$FX/hf/ct/ct-w8a8-int8-channel/model.safetensors" "compressed-tensors int" "weight, weight_scale" 'compressed-tensors'
	bare mxfp4 "$FX/hf/more/gptoss-mxfp4/model.safetensors" "mxfp4" "_blocks, _scales" '"quant_method": "mxfp4"'
else
	echo "skipped: fixture checkpoints (bitsandbytes, FP8, NVFP4, MXFP4): no fixtures"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
