#!/bin/sh
# qinspect's text modes and --memory as users of llama.cpp's tools expect them: typed metadata,
# file-type names, the Hugging Face header, names from directory paths, the terminal width,
# "did you mean", --json with every mode; context lists, every KV type, the compute buffer,
# --gpu-layers, and the values refused.
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
T=$(mktemp -d /tmp/qtk-cli-inspect-XXXXXX)
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
out_has() { if grep -q -- "$2" "$T/out"; then ok; else bad "$1: stdout lacks '$2'"; head -20 "$T/out"; fi; }
out_lacks() { if grep -q -- "$2" "$T/out"; then bad "$1: stdout has '$2'"; else ok; fi; }
err_has() { if grep -q -- "$2" "$T/err"; then ok; else bad "$1: stderr lacks '$2'"; head -5 "$T/err"; fi; }
json_ok() { if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/out" 2>/dev/null; then ok; else bad "$1: not JSON"; fi; }
# jq-like check without jq: python3 expression over the document d must be true
json_is() { if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$T/out" "$2" 2>/dev/null; then ok; else bad "$1: $2"; fi; }

S=$T/samples
"$B/samples/gen" "$S" >/dev/null || bad "sample generator"
G=$S/tiny-llama-f32.gguf
H=$S/tiny-llama

# ---- item 8: text modes ------------------------------------------------------------------

# a metadata listing with types; arrays as type[count] and their first items
run "metadata" 0 "$BIN/qinspect" --metadata "$G"
out_has "metadata" "general.architecture  *string  *llama"
out_has "metadata" "general.file_type  *u32  *0 (F32)"
out_has "metadata" "llama.block_count  *u32  *2"
run "metadata hf" 0 "$BIN/qinspect" --metadata "$H"
out_has "metadata hf: config.json keys" "num_key_value_heads  *number  *2"
out_has "metadata hf: arrays" 'architectures  *array\[1\]  *\["LlamaForCausalLM"\]'
run "metadata json" 0 "$BIN/qinspect" --metadata --json "$G"; json_ok "metadata json"
json_is "metadata json: typed keys" '[k for k in d["keys"] if k["key"] == "general.file_type"][0]["file_type_name"] == "F32"'
json_is "metadata json: types" 'all("type" in k and "value" in k for k in d["keys"])'
if [ -n "$FX" ]; then
	run "metadata q4_k_m" 0 "$BIN/qinspect" --metadata "$FX/gguf/tiny-Q4_K_M.gguf"
	out_has "metadata q4_k_m: file type name" "15 (Q4_K_M)"
	out_has "metadata q4_k_m: array summary" 'tokenizer.ggml.tokens  *string\[512\]  *\["<unk>", "<s>", "</s>"'
	out_has "metadata q4_k_m: numeric array" 'tokenizer.ggml.token_type  *i32\[512\]  *\[2, 3, 3, '
	run "summary q4_k_m" 0 "$BIN/qinspect" --summary "$FX/gguf/tiny-Q4_K_M.gguf"
	out_has "summary q4_k_m" "file type: Q4_K_M (general.file_type 15)"
	run "summary ct" 0 "$BIN/qinspect" --summary "$FX/hf/ct/ct-w4a16-g128-sym/"
	out_has "summary ct: architecture" "architecture: LlamaForCausalLM (llama)"
	out_has "summary ct: quantization" "quantization: compressed-tensors, format pack-quantized.*4-bit, group 128"
	out_has "summary ct: name with a trailing slash" "name: ct-w4a16-g128-sym"
	run "summary bnb" 0 "$BIN/qinspect" --summary "$FX/hf/more/bnb-nf4-dq"
	out_has "summary bnb" "quantization: bitsandbytes, bnb_4bit_quant_type nf4, 4-bit"
	run "summary mlx" 0 "$BIN/qinspect" --summary "$FX/hf/more/mlx-4bit-g64"
	out_has "summary mlx" "quantization: mlx, 4-bit, group 64"
else
	echo "skipped: fixtures absent (file types and quantization headers of real files)"
fi
run "summary gguf" 0 "$BIN/qinspect" --summary "$G"; out_has "summary gguf" "file type: F32 (general.file_type 0)"
run "summary hf" 0 "$BIN/qinspect" --summary "$H/"
out_has "summary hf: architecture" "architecture: LlamaForCausalLM (llama)"
out_has "summary hf: no quantization" "quantization: none declared in config.json"
out_has "summary hf: name from the directory" "^name: tiny-llama$"
run "markdown trailing slash" 0 "$BIN/qinspect" --markdown "$H/"
out_has "markdown trailing slash" '^## Model file: `tiny-llama`$'
run "markdown trailing slashes" 0 "$BIN/qinspect" --markdown "$H//"
out_has "markdown trailing slashes" '^## Model file: `tiny-llama`$'

# the width: fixed when stdout is no terminal (COLUMNS ignored), the terminal's otherwise
COLUMNS=60 "$BIN/qinspect" --summary "$G" >"$T/out" 2>&1
out_has "width: not a tty" "^blk.0.attn_norm.weight  "
if command -v script >/dev/null 2>&1 && script -qc true /dev/null >/dev/null 2>&1; then
	COLUMNS=100 script -qc "'$BIN/qinspect' --summary '$G'" /dev/null | tr -d '\r' >"$T/out"
	out_has "width: COLUMNS on a tty" "^blk.0.attn_norm.weig  "
	script -qc "stty cols 200 rows 50; '$BIN/qinspect' --summary '$G'" /dev/null | tr -d '\r' >"$T/out"
	out_has "width: the terminal's size" "^blk.0.attn_norm.weight  "
	COLUMNS=90 script -qc "'$BIN/qinspect' --metadata '$S/tiny-llama'" /dev/null | tr -d '\r' >"$T/out"
	if awk 'length > 90 { bad = 1 } END { exit bad }' "$T/out"; then ok; else bad "width: metadata lines longer than COLUMNS"; fi
else
	echo "skipped: no script(1) for a pseudo-terminal (terminal width)"
fi

# "did you mean": nearest names, and the same tensor under the other naming
run "tensor typo" 2 "$BIN/qinspect" --tensor blk.0.attn_q.weigth "$G"
err_has "tensor typo" "no such tensor; did you mean 'blk.0.attn_q.weight'"
run "tensor hf name on gguf" 2 "$BIN/qinspect" --tensor model.layers.1.mlp.down_proj.weight "$G"
err_has "tensor hf name on gguf" "did you mean 'blk.1.ffn_down.weight'?"
run "tensor gguf name on hf" 2 "$BIN/qinspect" --tensor blk.1.ffn_down.weight "$H"
err_has "tensor gguf name on hf" "did you mean 'model.layers.1.mlp.down_proj.weight'?"
run "tensor nothing near" 2 "$BIN/qinspect" --tensor zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz "$G"
err_has "tensor nothing near" "no such tensor$"

long=$(printf 'blk.0.attn_q.weight%0600d' 0)
run "tensor name too long to compare" 2 "$BIN/qinspect" --tensor "$long" "$G"
err_has "tensor name too long to compare" "no such tensor$"

# --tensor and --diff with --json (the man page's synopsis)
run "tensor json" 0 "$BIN/qinspect" --tensor blk.0.attn_q.weight --json "$G"; json_ok "tensor json"
json_is "tensor json: shape" 'd["tensor"]["name"] == "blk.0.attn_q.weight" and d["tensor"]["shape"] == [256, 256]'
json_is "tensor json: stats" 'd["tensor"]["stats"]["n"] == 65536 and len(d["tensor"]["stats"]["histogram"]["counts"]) == 64'
json_is "tensor json: parts" 'd["tensor"]["parts"][0]["n_bytes"] == 262144'
run "tensor json first" 0 "$BIN/qinspect" --json --tensor blk.0.attn_q.weight "$G"; json_ok "tensor json first"
run "diff json" 0 "$BIN/qinspect" --diff "$H" --json "$G"; json_ok "diff json"
json_is "diff json: summary" 'd["summary"]["matched"] == 21 and d["summary"]["qk_unpermuted"] == 4'
json_is "diff json: rows" 'len(d["tensors"]) == 21 and all(t["status"] in ("exact", "lossy") for t in d["tensors"])'
json_is "diff json: names" 'd["tensors"][0]["reference_name"] == "model.embed_tokens.weight" and d["only_in_file"] == []'
# rows of other statuses (written aside an entry at a time, put in the list's place)
"$B/samples/gen" --bench 1 "$T/wide.gguf" 128 512 >/dev/null 2>&1
run "diff json, other shapes" 0 "$BIN/qinspect" --diff "$T/wide.gguf" --json "$B/samples/tiny-llama-f32.gguf"
json_ok "diff json, other shapes"
json_is "diff json, other shapes: rows" 'len(d["tensors"]) == 12 and all(t["status"] == "shape differs" for t in d["tensors"])'
run "json with summary" 2 "$BIN/qinspect" --json --summary "$G"
run "json with markdown" 2 "$BIN/qinspect" --markdown --json "$G"
run "stats with tensor" 2 "$BIN/qinspect" --stats --json --tensor blk.0.attn_q.weight "$G"
run "two modes" 2 "$BIN/qinspect" --metadata --tensor blk.0.attn_q.weight "$G"
# --json --stats writes its document aside first: the whole document, or nothing when a tensor
# cannot be read (a QPK chunk altered in the middle of the file)
run "stats to qpk" 0 "$BIN/qconvert" -q "$G" "$T/st.qpk"
run "stats whole" 0 "$BIN/qinspect" --json --stats "$T/st.qpk"
json_is "stats whole" 'len(d["tensors"]) == 21 and all("stats" in t for t in d["tensors"])'
python3 -c 'import sys; d = bytearray(open(sys.argv[1], "rb").read()); i = len(d) // 2; d[i] ^= 0xff; d[i + 1] ^= 0xff; open(sys.argv[2], "wb").write(d)' "$T/st.qpk" "$T/stbad.qpk"
run "stats unreadable tensor" 3 "$BIN/qinspect" --json --stats "$T/stbad.qpk"
err_has "stats unreadable tensor" "digest mismatch"
if [ -s "$T/out" ]; then bad "stats unreadable tensor: printed a partial document"; else ok; fi

# untrusted text in the new outputs never reaches the terminal raw: metadata keys and values,
# suggested names
inert() {
	for f in "$T/out" "$T/err"; do
		if [ "$(tr -d '\033\015\007\233' <"$f" | wc -c)" -eq "$(wc -c <"$f")" ]; then ok; else bad "$1: raw control bytes in ${f##*/}"; fi
	done
}
h='{"__metadata__":{"k\u001b[31m":"v\u001b[2Jx\r"},"\u001b[31mRED":{"dtype":"F32","shape":[2,32],"data_offsets":[0,256]}}'
n=$(printf '%s' "$h" | wc -c)
{ printf "\\$(printf %03o "$n")\\000\\000\\000\\000\\000\\000\\000"; printf '%s' "$h"; head -c 256 /dev/zero | tr '\000' '\077'; } >"$T/esc.safetensors"
run "escaped metadata" 0 "$BIN/qinspect" --metadata "$T/esc.safetensors"; inert "escaped metadata"
out_has "escaped metadata: shown" 'k\\x1b\[31m  *string  *v\\x1b\[2Jx\\r$'
run "escaped suggestion" 2 "$BIN/qinspect" --tensor "$(printf '\033[31mREX')" "$T/esc.safetensors"; inert "escaped suggestion"
err_has "escaped suggestion: shown" "did you mean '\\\\x1b\[31mRED'?"

# ---- item 9: --memory --------------------------------------------------------------------

run "ctx list" 0 "$BIN/qinspect" --memory --ctx 4k,32k,128K,131072 "$G"
out_has "ctx list: 4k" "^    4096\* .*<- --ctx"
out_has "ctx list: 128K" "^  131072\* .*<- --ctx"
out_has "ctx list: compute column" "compute  *total"
run "ctx-size alias" 0 "$BIN/qinspect" --memory --ctx-size=8k "$G"; out_has "ctx-size alias" "^    8192\* .*<- --ctx"
run "ctx json" 0 "$BIN/qinspect" --memory --json --ctx 4k,1000 "$G"; json_ok "ctx json"
json_is "ctx json: sweep" '[c["ctx"] for c in d["contexts"]] == [256, 1000, 2048, 4096, 8192, 16384, 32768]'
# compute at 2048 (micro-batch 512, 256 wide, 4 heads of 64, FFN 768, 512 tokens of vocabulary):
# inputs 4*512*(3+256) + 4*2048*512 = 4724736; KQ 4*512*2*256 + 4*2048*512*4 = 17825792 (largest)
json_is "compute estimate" '[c["compute_bytes"] for c in d["contexts"] if c["ctx"] == 2048] == [22550528]'
json_is "estimate = weights + KV + compute" 'all(c["estimate_bytes"] == c["total_bytes"] + c["compute_bytes"] for c in d["contexts"])'
run "largest ctx" 0 "$BIN/qinspect" --memory --ctx 4294967296 "$G"
for v in 0 4294967297 4194305k 4k,,8k k -5 1.5k 32m 4k,0; do
	run "bad ctx $v" 2 "$BIN/qinspect" --memory --ctx "$v" "$G"; err_has "bad ctx $v" "bad --ctx value"
done
run "bad ctx names the value" 2 "$BIN/qinspect" --memory --ctx 4k,0 "$G"; err_has "bad ctx names the value" "'0' in '4k,0'"
for t in f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1; do
	run "kv type $t" 0 "$BIN/qinspect" --memory --kv-type $t --json "$G"
	json_is "kv type $t" "d['kv_type'] == '$t' and d['kv_type_k'] == '$t' and d['kv_type_v'] == '$t'"
done
# bytes per element: q5_1 24/32, iq4_nl 18/32; per token 2 layers x 2 KV heads x (64 + 64)
run "kv q5_1 text" 0 "$BIN/qinspect" --memory --kv-type q5_1 "$G"; out_has "kv q5_1 text" "KV q5_1"
"$BIN/qinspect" --memory --json --kv-type q5_1 "$G" >"$T/out"; json_is "kv q5_1 bytes" 'd["kv_bytes_per_token"] == 384'
"$BIN/qinspect" --memory --json --kv-type IQ4_NL "$G" >"$T/out"; json_is "kv iq4_nl bytes" 'd["kv_bytes_per_token"] == 288'
run "kv K and V apart" 0 "$BIN/qinspect" --memory --json -ctk q8_0 -ctv f16 "$G"
json_is "kv K and V apart" 'd["kv_type"] == "q8_0/f16" and d["kv_bytes_per_token"] == 4 * (64 * 34 / 32 + 64 * 2)'
run "kv quantized V: flash attention" 0 "$BIN/qinspect" --memory --json --cache-type-v q4_0 "$G"
json_is "kv quantized V: flash attention" 'd["compute"]["flash_attn"] == True'
run "bad kv type" 2 "$BIN/qinspect" --memory --kv-type q3_k "$G"
err_has "bad kv type" "bad --kv-type 'q3_k' (one of f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)"
run "bad cache-type-k" 2 "$BIN/qinspect" --memory -ctk f8 "$G"; err_has "bad cache-type-k" "'f8'"

# --gpu-layers: the last N repeating layers (weights and KV), the output layer when N > n_layer
run "gpu 1" 0 "$BIN/qinspect" --memory --json --gpu-layers 1 --ctx 256 "$G"; json_ok "gpu 1"
# one block: q, o 256x256, k, v 128x256, three FFN 768x256 (F32), two norms = 3147776 bytes
json_is "gpu 1: weights" 'd["gpu"]["layers_offloaded"] == 1 and d["gpu"]["weights_vram_bytes"] == 3147776 and not d["gpu"]["output_offloaded"]'
# KV of layer 1 at 256 tokens: 2 heads x 256 x (64 + 64) x 2 B = 131072; both sides keep a compute buffer
json_is "gpu 1: KV split" '[(c["vram_bytes"] - 3147776 - c["compute_bytes"], c["ram_bytes"] - (7345152 - 3147776) - c["compute_bytes"]) for c in d["contexts"] if c["ctx"] == 256] == [(131072, 131072)]'
run "gpu all" 0 "$BIN/qinspect" --memory --json -ngl 999 "$G"
json_is "gpu all: output offloaded" 'd["gpu"]["output_offloaded"] and d["gpu"]["weights_ram_bytes"] == 524288'
json_is "gpu all: compute on the GPU" 'all(c["ram_bytes"] == 524288 for c in d["contexts"])'
run "gpu 0" 0 "$BIN/qinspect" --memory --json --gpu-layers 0 "$G"
json_is "gpu 0: nothing on the GPU" 'all(c["vram_bytes"] == 0 for c in d["contexts"])'
run "gpu text" 0 "$BIN/qinspect" --memory --gpu-layers 1 "$G"
out_has "gpu text: columns" "total  *RAM  *VRAM"; out_has "gpu text: layers" "1 of 2 repeating layers offloaded (layer 1"
run "gpu hf" 0 "$BIN/qinspect" --memory --json --gpu-layers 1 "$H"
json_is "gpu hf: model.layers.1" 'd["gpu"]["layers_offloaded"] == 1 and d["gpu"]["weights_vram_bytes"] * 2 == 3147776'
for v in -1 -ngl x 1e3 2147483648; do
	run "bad gpu-layers $v" 2 "$BIN/qinspect" --memory --gpu-layers "$v" "$G"; err_has "bad gpu-layers $v" "bad --gpu-layers value '$v'"
done
run "memory options need --memory" 2 "$BIN/qinspect" --gpu-layers 3 "$G"
run "memory options need --memory (ctx)" 2 "$BIN/qinspect" --summary --ctx 4k "$G"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
