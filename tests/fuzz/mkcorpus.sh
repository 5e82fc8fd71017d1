#!/bin/sh
# mkcorpus.sh - generate the fuzz seed corpora ($QTK_BUILD/fuzz/corpus/<target>/) from tiny
# models written by tests/fuzz/mkseed and converted by the project's own qconvert.
# Run from the repository root after `make all build/fuzz/mkseed` (`make fuzz-corpus`);
# QTK_BIN names the directory of the programs (default bin).
# Multi-file seeds use the framing of tests/fuzz/fuzz.h: "\n#QF#name\n" starts a file.
set -eu
B=${QTK_BUILD:-build}
Q="${QTK_BIN:-bin}/qconvert -q"
SEED=$B/fuzz/mkseed
C=${FUZZ_CORPUS:-$B/fuzz/corpus}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT INT TERM

# frame OUT FIRST [NAME FILE]...: FIRST's bytes, then each FILE behind a "#QF#NAME" line
frame() {
	out=$1; first=$2; shift 2
	cat "$first" >"$out"
	while [ $# -ge 2 ]; do
		printf '\n#QF#%s\n' "$1" >>"$out"
		cat "$2" >>"$out"
		shift 2
	done
}
# frame_dir OUT DIR FIRSTNAME: every file of DIR, FIRSTNAME first (sorted otherwise)
frame_dir() {
	out=$1; dir=$2; firstname=$3
	set -- "$out" "$dir/$firstname"
	for f in $(ls "$dir" | sort); do
		[ "$f" = "$firstname" ] && continue
		set -- "$@" "$f" "$dir/$f"
	done
	frame "$@"
}

rm -rf "$C"
for t in gguf safetensors st_index hfdir qpk archive zst spm imatrix prov hfmap ct mlx bnb mxfp4; do mkdir -p "$C/$t"; done
mkdir -p "$C/sigbundle"

$SEED tiny "$W/tiny.gguf"
$SEED kq "$W/kq.gguf"
$SEED imatrix "$C/imatrix/legacy.dat"

# GGUF: float and block types, k-quants, iq4, a split set
for t in f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0; do $Q "$W/tiny.gguf" "$C/gguf/tiny-$t.gguf" --to $t; done
for t in q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs; do $Q "$W/kq.gguf" "$C/gguf/kq-$t.gguf" --to $t; done
cp "$W/kq.gguf" "$C/gguf/kq-f32.gguf"
$Q "$W/tiny.gguf" "$W/sp.gguf" --to q4_0 --split-max-size 3K
set --
first=
for f in $(ls "$W" | grep '^sp-.*\.gguf$' | sort); do
	if [ -z "$first" ]; then first=$f; else set -- "$@" "$f" "$W/$f"; fi
done
printf '#QF#%s\n' "$first" >"$W/hdr"
cat "$W/hdr" "$W/$first" >"$W/first"
frame "$C/gguf/split-q4_0" "$W/first" "$@"

# safetensors: float, AWQ and GPTQ layers in one file
$Q "$W/tiny.gguf" "$C/safetensors/tiny-f16.safetensors" --to f16
$Q "$W/tiny.gguf" "$C/safetensors/tiny-bf16.safetensors" --to bf16
$Q "$W/tiny.gguf" "$C/safetensors/tiny-awq.safetensors" --to awq --group-size 32
$Q "$W/tiny.gguf" "$C/safetensors/tiny-gptq.safetensors" --to gptq --group-size 32
$Q "$W/tiny.gguf" "$C/safetensors/tiny-mlx.safetensors" --to mlx --group-size 32
$Q "$W/kq.gguf" "$C/safetensors/kq-f32.safetensors" --to f32

# HF directories: plain, AWQ, GPTQ v1/v2, 8-bit, symmetric; sharded with an index
for v in "f16 --to f16" "awq --to awq --group-size 32" "gptq --to gptq --group-size 32" \
	"gptq-v2 --to gptq-v2 --group-size 32" "gptq8 --to gptq --bits 8 --group-size 32" \
	"gptq-sym --to gptq --sym --group-size 32" "mlx --to mlx --group-size 32" "mlx3 --to mlx --bits 3 --group-size 32" \
	"ct-int --to ct-int --group-size 32" "ct-int-sym --to ct-int --sym --group-size 32"; do
	set -- $v; name=$1; shift
	$Q "$W/tiny.gguf" "$W/hf-$name/" "$@"
	frame_dir "$C/hfdir/hf-$name" "$W/hf-$name" config.json
done
$Q "$W/tiny.gguf" "$W/hf-split/" --to q4_0 --split-max-size 4K 2>/dev/null || $Q "$W/tiny.gguf" "$W/hf-split/" --to f16 --split-max-size 4K
frame_dir "$C/hfdir/hf-split" "$W/hf-split" config.json
$Q "$W/tiny.gguf" "$W/hf-split-awq/" --to awq --group-size 32 --split-max-size 4K
# st_index: the index first, then the shards
for d in hf-split hf-split-awq; do
	set -- "$C/st_index/$d" "$W/$d/model.safetensors.index.json"
	for f in $(ls "$W/$d" | grep '^model-.*\.safetensors$' | sort); do set -- "$@" "$f" "$W/$d/$f"; done
	frame "$@"
done

# QPK: plain, awq, gptq, k-quant, mlx; compressed-tensors int layers kept as they are (layout
# kind 3 with its Layout_Params and weight_shape / zero parts: a version 1.2 file)
$Q "$W/tiny.gguf" "$C/qpk/tiny-f16.qpk" --to f16
$Q "$W/tiny.gguf" "$C/qpk/tiny-q4_0.qpk" --to q4_0
$Q "$W/tiny.gguf" "$C/qpk/tiny.awq" --group-size 32
$Q "$W/tiny.gguf" "$C/qpk/tiny.gptq" --group-size 32
$Q "$W/kq.gguf" "$C/qpk/kq-q4_k.qpk" --to q4_k
$Q "$W/tiny.gguf" "$C/qpk/tiny-mlx.qpk" --to mlx --group-size 32
$Q "$W/hf-ct-int/" "$C/qpk/tiny-ct-int.qpk"
$Q "$W/hf-ct-int-sym/" "$C/qpk/tiny-ct-int-sym.qpk"

# archives: deployment bundles, and tar/tar.gz/zip made with the system tools
$Q "$W/tiny.gguf" "$C/archive/bundle-q4_0.tar" --to q4_0
$Q "$W/tiny.gguf" "$C/archive/bundle-q4_0.tar.zst" --to q4_0
$Q "$W/tiny.gguf" "$C/archive/bundle-awq.zip" --to awq --group-size 32
$Q "$W/kq.gguf" "$W/kq-q8.gguf" --to q8_0
(cd "$W" && tar --format=ustar --owner=0 --group=0 --mtime=@0 -cf kq.tar kq-q8.gguf && gzip -9n <kq.tar >kq.tar.gz)
cp "$W/kq.tar.gz" "$C/archive/kq-q8.tar.gz"
(cd "$W/hf-gptq" && tar --format=ustar --owner=0 --group=0 --mtime=@0 -cf "$W/hf.tar" --sort=name .)
cp "$W/hf.tar" "$C/archive/hf-gptq.tar"

# zst: single compressed model files
zstd -q -19 --no-progress -c "$C/gguf/tiny-q4_0.gguf" >"$C/zst/tiny-q4_0.gguf.zst"
zstd -q -19 --no-progress -c "$C/safetensors/tiny-awq.safetensors" >"$C/zst/tiny-awq.safetensors.zst"
zstd -q -3 --no-progress -c "$C/qpk/kq-q4_k.qpk" >"$C/zst/kq-q4_k.qpk.zst"

# spm: the tokenizer.model qconvert writes, plus tiny handcrafted protobufs
cp "$W/hf-f16/tokenizer.model" "$C/spm/tiny.model"
printf '' >"$C/spm/empty"
printf '\n\012\n\001a\025\000\000\200\277\030\001' >"$C/spm/one-piece"

# prov: records of the outputs above
for f in gguf/tiny-q4_0.gguf qpk/tiny.awq safetensors/tiny-gptq.safetensors; do
	n=$(basename "$f" | tr . _)
	$SEED prov "$C/$f" >"$C/prov/$n.json" || rm -f "$C/prov/$n.json"
done
[ -f "$W/hf-awq/qtk-provenance.json" ] && cp "$W/hf-awq/qtk-provenance.json" "$C/prov/hf-awq.json"
printf '{}' >"$C/prov/empty-object.json"
printf '%s' '{"output":{"container":"gguf"},"record_version":1,"tool":{"name":"qtk","version":"0.1.0"}}' \
	>"$C/prov/minimal.json"
h=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
printf '%s' '{"calibration":"none","determinism":{"threads_invariant":true},"imatrix":{"file":"imatrix.dat","sha256":"'$h'"},'\
'"output":{"container":"gguf","files":[{"path":"model.gguf","sha256":"'$h'","size":123}]},'\
'"record_version":1,"source":{"container":"hf","files":[{"path":"model.safetensors","sha256":"'$h'","size":7}],'\
'"name":"tiny","record":{"output":{"container":"hf"},"record_version":1,"tool":{"name":"qtk","version":"0"}},'\
'"record_sha256":"'$h'","revision":"main"},"time":"2026-11-30T08:00:00Z","tool":{"build":{"arch":"x86_64"},'\
'"name":"qtk","version":"0.1.0"},"transform":{"kind":"quantize","layout_ops":[{"op":"reverse_dims"}],'\
'"method":"kquant","name_map":"identity","params":{"target":"q4_k"}}}' >"$C/prov/full.json"

# jsonfmt: the records above behind a depth byte (0-3), and texts outside the subset
mkdir -p "$C/jsonfmt"
k=0
for f in "$C"/prov/*.json; do
	[ -f "$f" ] || continue
	{ printf "\\00$((k % 4))"; cat "$f"; } >"$C/jsonfmt/$(basename "$f")"
	k=$((k + 1))
done
printf '\001%s' '{"a":[1,-0,1.5e-7,"caf\u00e9 \/ \t"],"b":{},"c":[],"d":[{}],"e":null}' >"$C/jsonfmt/mixed"
printf '\002%s' '{ "x" : [ 123456789012345 , 1234567890123456 , true , false ] }  ' >"$C/jsonfmt/spaced"
printf '\003%s' '{"a":1} trailing' >"$C/jsonfmt/trailing"

# imatrix: legacy written above, and the GGUF form
$SEED imatrix-gguf "$C/imatrix/imatrix.gguf"
# hostile handcrafted inputs (docs/cli.md, "Hostile input"), a few per reader
b() { printf "\\$(printf %03o $(($1 & 255)))"; }
le32() { b $1; b $(($1 >> 8)); b $(($1 >> 16)); b $(($1 >> 24)); }
le64() { le32 $(($1 & 4294967295)); le32 $((($1 >> 32) & 4294967295)); }
gstr() { le64 ${#1}; printf '%s' "$1"; }
ghead() { printf 'GGUF'; le32 3; le64 $1; le64 $2; }
# tensor info: name ndims ne... type offset
ginfo() { n=$1; nd=$2; shift 2; gstr "$n"; le32 $nd; i=0; while [ $i -lt $nd ]; do le64 $1; shift; i=$((i + 1)); done; le32 $1; le64 $2; }
{ ghead 1 1; gstr general.alignment; le32 4; le32 0; ginfo w 2 32 2 0 0; } >"$C/gguf/hostile-align0"
{ ghead 1 0; ginfo w 2 4294967296 4294967296 0 0; } >"$C/gguf/hostile-ne-overflow"
{ ghead 1 0; ginfo w 1 0 0 0; } >"$C/gguf/hostile-ne-zero"
{ ghead 1 0; ginfo w 1 32 4 0; } >"$C/gguf/hostile-type-removed"
{ ghead 2 0; ginfo w 1 32 0 0; ginfo w 1 32 0 128; } >"$C/gguf/hostile-dup-name"
{ ghead 0 1; gstr a.b; le32 9; le32 9; le64 1; } >"$C/gguf/hostile-nested-array"
{ ghead 0 1; gstr a.b; le32 8; le64 18446744073709551615; } >"$C/gguf/hostile-strlen"
{ ghead 0 1; gstr a.b; le32 9; le32 0; le64 4611686018427387904; } >"$C/gguf/hostile-array-len"
{ ghead 1 2; gstr split.count; le32 2; printf '\002\000'; gstr split.no; le32 2; printf '\001\000'; ginfo w 1 32 0 0; } \
	>"$C/gguf/hostile-split-no"
stj() { le64 ${#1}; printf '%s' "$1"; }
stj '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' \
	>"$C/safetensors/hostile-dup-key"; printf '12345678' >>"$C/safetensors/hostile-dup-key"
stj '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' \
	>"$C/safetensors/hostile-overlap"; printf '12345678' >>"$C/safetensors/hostile-overlap"
stj '{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}' >"$C/safetensors/hostile-shape"
stj '{"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]},"__metadata__":{"k":1}}' >"$C/safetensors/hostile-number"
stj '{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}}' >"$C/safetensors/hostile-subbyte"; printf 'x' >>"$C/safetensors/hostile-subbyte"
le64 18446744073709551615 >"$C/safetensors/hostile-header-len"
{ printf '%s' '{"metadata":{"total_size":8},"weight_map":{"w":"../model-00001-of-00001.safetensors"}}'; } >"$C/st_index/hostile-path"
{ printf '%s' '{"weight_map":{"w":"model-00001-of-00002.safetensors","v":"model-00002-of-00002.safetensors"}}'
  printf '\n#QF#model-00001-of-00002.safetensors\n'
  stj '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"v":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}'
  printf '1234567812345678'
  printf '\n#QF#model-00002-of-00002.safetensors\n'
  stj '{"v":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'; printf '12345678'; } >"$C/st_index/hostile-two-shards"
{ printf '%s' '{"model_type":"llama","quantization_config":{"quant_method":"awq","bits":4,"group_size":0}}'
  printf '\n#QF#model.safetensors\n'
  stj '{"l.qweight":{"dtype":"I32","shape":[32,1],"data_offsets":[0,128]}}'; head -c 128 /dev/zero; } >"$C/hfdir/hostile-group0"
{ printf '%s' '{"model_type":"llama"}'; printf '\n#QF#model.bin\n'; printf 'PK'; } >"$C/hfdir/hostile-pickle"
{ printf '%s' '{"model_type":"llama","quantization":{"group_size":32,"bits":3}}'
  printf '\n#QF#model.safetensors\n'
  stj '{"l.biases":{"dtype":"F16","shape":[4,2],"data_offsets":[0,16]},"l.scales":{"dtype":"F16","shape":[4,2],"data_offsets":[16,32]},"l.weight":{"dtype":"U32","shape":[4,7],"data_offsets":[32,144]}}'
  head -c 144 /dev/zero; } >"$C/hfdir/hostile-mlx-words"
# bitsandbytes NF4: one module [2, 64] in blocks of 64, and its quant_state lying about the shape
BNB='{"model_type":"llama","quantization_config":{"quant_method":"bitsandbytes","load_in_4bit":true,"bnb_4bit_quant_type":"nf4"}}'
nf4map() { for v in 3212836864 3207739825 3204868912 3200922272 3197215309 3191682367 3183114353 0 \
	1034091263 1042598627 1048315101 1051525946 1054975160 1058015147 1060705203 1065353216; do le32 $v; done; }
for bq in "2, 64:bnb-nf4" "4, 64:hostile-bnb-shape"; do
	QS='{"quant_type": "nf4", "blocksize": 64, "dtype": "float16", "shape": ['"${bq%%:*}"']}'
	{ printf '%s' "$BNB"; printf '\n#QF#model.safetensors\n'
	  stj '{"l.weight":{"dtype":"U8","shape":[64,1],"data_offsets":[0,64]},"l.weight.absmax":{"dtype":"F32","shape":[2],"data_offsets":[64,72]},"l.weight.quant_map":{"dtype":"F32","shape":[16],"data_offsets":[72,136]},"l.weight.quant_state.bitsandbytes__nf4":{"dtype":"U8","shape":['${#QS}'],"data_offsets":[136,'$((136 + ${#QS}))']}}'
	  head -c 64 /dev/urandom; le32 1065353216; le32 1056964608; nf4map; printf '%s' "$QS"; } >"$C/hfdir/${bq#*:}"
done
# bitsandbytes LLM.int8: one module [2, 32] with its SCB and weight_format, and one whose SCB has 3 rows
B8='{"model_type":"llama","quantization_config":{"quant_method":"bitsandbytes","load_in_8bit":true,"llm_int8_threshold":6.0}}'
for rq in "2:bnb8" "3:hostile-bnb8-scb"; do
	r=${rq%%:*}; e=$((64 + 4 * r))
	{ printf '%s' "$B8"; printf '\n#QF#model.safetensors\n'
	  stj '{"l.weight":{"dtype":"I8","shape":[2,32],"data_offsets":[0,64]},"l.SCB":{"dtype":"F32","shape":['$r'],"data_offsets":[64,'$e']},"l.weight_format":{"dtype":"U8","shape":[],"data_offsets":['$e','$((e + 1))']}}'
	  head -c 64 /dev/urandom; i=0; while [ $i -lt $r ]; do le32 1056964608; i=$((i + 1)); done; printf '\0'; } >"$C/hfdir/${rq#*:}"
done
# compressed-tensors: FP8 per channel, NVFP4, and a weight_shape that lies
CT='{"model_type":"llama","quantization_config":{"quant_method":"compressed-tensors","ignore":["lm_head"],"config_groups":{"g":{"targets":["re:.*proj$"],"format":'
{ printf '%s' "$CT"'"float-quantized","weights":{"num_bits":8,"type":"float","strategy":"channel"}}}}}'
  printf '\n#QF#model.safetensors\n'
  stj '{"m.q_proj.weight":{"dtype":"F8_E4M3","shape":[8,32],"data_offsets":[0,256]},"m.q_proj.weight_scale":{"dtype":"F16","shape":[8,1],"data_offsets":[256,272]}}'
  head -c 256 /dev/urandom | tr '\177\377' '\1\2'; head -c 16 /dev/zero | tr '\0' '\74'; } >"$C/hfdir/ct-fp8"
{ printf '%s' "$CT"'"nvfp4-pack-quantized","weights":{"num_bits":4,"type":"float","strategy":"tensor_group","group_size":16}}}}}'
  printf '\n#QF#model.safetensors\n'
  stj '{"m.q_proj.weight_packed":{"dtype":"U8","shape":[8,16],"data_offsets":[0,128]},"m.q_proj.weight_scale":{"dtype":"F8_E4M3","shape":[8,2],"data_offsets":[128,144]},"m.q_proj.weight_global_scale":{"dtype":"F32","shape":[1],"data_offsets":[144,148]}}'
  head -c 144 /dev/urandom | tr '\177\377' '\1\2'; printf '\0\0\200\77'; } >"$C/hfdir/ct-nvfp4"
{ printf '%s' "$CT"'"pack-quantized","weights":{"num_bits":4,"type":"int","strategy":"group","group_size":32,"actorder":"group"}}}}}'
  printf '\n#QF#model.safetensors\n'
  stj '{"m.q_proj.weight_packed":{"dtype":"I32","shape":[8,4],"data_offsets":[0,128]},"m.q_proj.weight_scale":{"dtype":"F16","shape":[8,1],"data_offsets":[128,144]},"m.q_proj.weight_shape":{"dtype":"I64","shape":[2],"data_offsets":[144,160]},"m.q_proj.weight_g_idx":{"dtype":"I32","shape":[32],"data_offsets":[160,288]}}'
  head -c 144 /dev/zero; le64 8; le64 40; head -c 128 /dev/zero | tr '\0' '\7'; } >"$C/hfdir/hostile-ct-shape"
# gpt-oss MXFP4 experts (2 experts, 2 outputs, 32 inputs), and scales that disagree with the blocks
OSS='{"architectures":["GptOssForCausalLM"],"quantization_config":{"quant_method":"mxfp4","modules_to_not_convert":["model.layers.*.mlp.router"]}}'
{ printf '%s' "$OSS"; printf '\n#QF#model.safetensors\n'
  stj '{"m.experts.down_proj_blocks":{"dtype":"U8","shape":[2,2,1,16],"data_offsets":[0,64]},"m.experts.down_proj_scales":{"dtype":"U8","shape":[2,2,1],"data_offsets":[64,68]}}'
  head -c 64 /dev/urandom; printf '\177\200\176\201'; } >"$C/hfdir/gptoss-mxfp4"
{ printf '%s' "$OSS"; printf '\n#QF#model.safetensors\n'
  stj '{"m.experts.down_proj_blocks":{"dtype":"U8","shape":[2,2,1,16],"data_offsets":[0,64]},"m.experts.down_proj_scales":{"dtype":"U8","shape":[2,3,1],"data_offsets":[64,70]}}'
  head -c 70 /dev/zero; } >"$C/hfdir/hostile-mxfp4-scales"
(cd "$W" && mkdir -p evil && printf 'x' >evil/f && ln -sf /etc/passwd evil/link &&
	tar --format=ustar --owner=0 --group=0 --mtime=@0 -cf sym.tar -C evil link f &&
	tar --format=gnu --owner=0 --group=0 --mtime=@0 -cf dotdot.tar --transform 's,^f,../f,' -C evil f) &&
	cp "$W/sym.tar" "$C/archive/hostile-symlink.tar" && cp "$W/dotdot.tar" "$C/archive/hostile-dotdot.tar"
{ le32 407710288; le32 4; printf 'abcd'; } >"$C/zst/hostile-skippable"
head -c 64 "$C/zst/tiny-q4_0.gguf.zst" >"$C/zst/hostile-truncated"
{ cat "$C/zst/kq-q4_k.qpk.zst"; printf 'trailing'; } >"$C/zst/hostile-trailing"
{ le32 1; le32 2147483647; printf 'x'; } >"$C/imatrix/hostile-namelen"
{ le32 1; le32 1; printf 'w'; le32 1; le32 1073741824; } >"$C/imatrix/hostile-nval"
printf '\n\377\377\377\377\017' >"$C/spm/hostile-len"
printf '%s' '{"record_version":1,"record_version":1}' >"$C/prov/hostile-dup"
printf '%s' '{"record_version":1e400}' >"$C/prov/hostile-number"
printf '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[' >"$C/prov/hostile-deep"

# hfmap: config.json of each family with a matching tensor list (names and shapes only)
hfm() { # hfm NAME CONFIG TENSOR-LINES...
	n=$1; cfg=$2; shift 2
	{ printf '%s' "$cfg"; printf '\n#QF#tensors\n'; for l in "$@"; do printf '%s\n' "$l"; done; } >"$C/hfmap/$n"
}
L=model.layers.0
BASE='"hidden_size": 64, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 16, "rms_norm_eps": 1e-05'
ATT="$L.self_attn.q_proj.weight 64 64|$L.self_attn.k_proj.weight 32 64|$L.self_attn.v_proj.weight 32 64|$L.self_attn.o_proj.weight 64 64"
NORMS="$L.input_layernorm.weight 64|$L.post_attention_layernorm.weight 64|model.norm.weight 64|model.embed_tokens.weight 16 64"
MLP="$L.mlp.gate_proj.weight 32 64|$L.mlp.up_proj.weight 32 64|$L.mlp.down_proj.weight 64 32"
split() { echo "$1" | tr '|' '\n'; }
IFS_OLD=$IFS; IFS='
'
hfm llama3 "{\"architectures\": [\"LlamaForCausalLM\"], $BASE, \"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}}" $(split "$ATT|$NORMS|$MLP")
MOE=""
for e in 0 1 2 3; do MOE="$MOE|$L.block_sparse_moe.experts.$e.w1.weight 32 64|$L.block_sparse_moe.experts.$e.w2.weight 64 32|$L.block_sparse_moe.experts.$e.w3.weight 32 64"; done
hfm mixtral "{\"architectures\": [\"MixtralForCausalLM\"], $BASE, \"num_local_experts\": 4, \"num_experts_per_tok\": 2}" $(split "$ATT|$NORMS|$L.block_sparse_moe.gate.weight 4 64$MOE")
QMOE=""
for e in 0 1 2 3; do QMOE="$QMOE|$L.mlp.experts.$e.gate_proj.weight 16 64|$L.mlp.experts.$e.up_proj.weight 16 64|$L.mlp.experts.$e.down_proj.weight 64 16"; done
hfm qwen2moe "{\"architectures\": [\"Qwen2MoeForCausalLM\"], $BASE, \"num_experts\": 4, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 16, \"shared_expert_intermediate_size\": 32}" $(split "$ATT|$NORMS|$L.mlp.gate.weight 4 64|$L.mlp.shared_expert.gate_proj.weight 32 64|$L.mlp.shared_expert.up_proj.weight 32 64|$L.mlp.shared_expert.down_proj.weight 64 32|$L.mlp.shared_expert_gate.weight 1 64$QMOE")
hfm gemma2 "{\"architectures\": [\"Gemma2ForCausalLM\"], $BASE, \"head_dim\": 16, \"attn_logit_softcapping\": 50.0, \"final_logit_softcapping\": 30.0, \"sliding_window\": 4096, \"query_pre_attn_scalar\": 16}" $(split "$ATT|$NORMS|$L.pre_feedforward_layernorm.weight 64|$L.post_feedforward_layernorm.weight 64|$MLP")
hfm phi3 "{\"architectures\": [\"Phi3ForCausalLM\"], $BASE, \"max_position_embeddings\": 4096, \"original_max_position_embeddings\": 4096, \"sliding_window\": 2047}" $(split "$NORMS|$L.self_attn.qkv_proj.weight 128 64|$L.self_attn.o_proj.weight 64 64|$L.mlp.gate_up_proj.weight 64 64|$L.mlp.down_proj.weight 64 32")
IFS=$IFS_OLD
printf '%s' '{"architectures": ["MixtralForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_local_experts": 65536, "num_experts_per_tok": 65536}' >"$C/hfmap/hostile-experts"

# ---- scheme targets (ct, mlx, bnb, mxfp4): structured inputs (tests/fuzz/fuzz.h, "Scheme targets"):
# config.json, then "#QF#header" (a safetensors header as JSON, data_offsets filled in by the
# harness), then "#QF#data" (bytes that fill the tensors); "fz" fills one tensor with values
# sc OUT CONFIG HEADER [DATA-BYTES-FILE] [NAME FILE]...
sc() {
	o=$1; { printf '%s' "$2"; printf '\n#QF#header\n%s' "$3"; } >"$o"
	if [ $# -ge 4 ] && [ -n "$4" ]; then printf '\n#QF#data\n' >>"$o"; cat "$4" >>"$o"; fi
	[ $# -ge 4 ] && shift 4 || shift $#
	while [ $# -ge 2 ]; do printf '\n#QF#%s\n' "$1" >>"$o"; cat "$2" >>"$o"; shift 2; done
}
# sc_split OUT DIR: a one-file HF directory written by qconvert in that form (data_offsets
# dropped: qconvert writes the data in header order, so the harness gives the same offsets)
sc_split() {
	st=$2/model.safetensors
	hl=$(od -An -tu8 -N8 "$st" | tr -d ' ')
	{ cat "$2/config.json"; printf '\n#QF#header\n'
	  tail -c +9 "$st" | head -c "$hl" | sed -E 's/,"data_offsets":\[[0-9]+,[0-9]+\]//g; s/"data_offsets":\[[0-9]+,[0-9]+\],//g; s/ +$//'
	  printf '\n#QF#data\n'; tail -c +$((9 + hl)) "$st"; } >"$1"
}
head -c 4096 /dev/urandom | tr '\177\377' '\1\2' >"$W/rnd"
for n in ct-int ct-int-sym; do sc_split "$C/ct/hf-$n" "$W/hf-$n"; done
$Q "$W/tiny.gguf" "$W/hf-ct8/" --to ct-int --bits 8 --group-size 32 2>/dev/null && sc_split "$C/ct/hf-ct-int8" "$W/hf-ct8"
LL='"model_type":"llama","architectures":["LlamaForCausalLM"]'
ctc() { printf '%s' "{$LL,\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"$1\",\"quantization_status\":\"compressed\",\"ignore\":[\"lm_head\",\"re:.*gate$\"],\"config_groups\":{\"group_0\":{\"targets\":[\"Linear\"],\"weights\":$2${3:-}}}}}"; }
HEAD='"lm_head.weight":{"dtype":"F16","shape":[16,32]}'
# FP8: per channel, per tensor, per group, per block; activations quantized too (input_scale)
sc "$C/ct/fp8-channel" "$(ctc float-quantized '{"num_bits":8,"type":"float","symmetric":true,"strategy":"channel","dynamic":false}' ',"input_activations":{"num_bits":8,"type":"float","strategy":"tensor","dynamic":false}')" \
	'{"m.q_proj.weight":{"dtype":"F8_E4M3","shape":[8,32]},"m.q_proj.weight_scale":{"dtype":"F16","shape":[8,1],"fz":[0.01,0.5,2]},"m.q_proj.input_scale":{"dtype":"F32","shape":[1],"fz":[0.25]},'"$HEAD"'}' "$W/rnd"
sc "$C/ct/fp8-tensor" "$(ctc float-quantized '{"num_bits":8,"type":"float","strategy":"tensor"}')" \
	'{"m.k_proj.weight":{"dtype":"F8_E4M3","shape":[4,32]},"m.k_proj.weight_scale":{"dtype":"F32","shape":[1],"fz":[0.125]}}' "$W/rnd"
sc "$C/ct/fp8-group" "$(ctc float-quantized '{"num_bits":8,"type":"float","strategy":"group","group_size":16}')" \
	'{"m.v_proj.weight":{"dtype":"F8_E4M3","shape":[4,32]},"m.v_proj.weight_scale":{"dtype":"BF16","shape":[4,2],"fz":[0.5,1]}}' "$W/rnd"
sc "$C/ct/fp8-block" "$(ctc float-quantized '{"num_bits":8,"type":"float","strategy":"block","block_structure":[16,16]}')" \
	'{"m.o_proj.weight":{"dtype":"F8_E4M3","shape":[20,32]},"m.o_proj.weight_scale":{"dtype":"F32","shape":[2,2],"fz":[0.5,1,2,4]}}' "$W/rnd"
# NVFP4 (compressed-tensors): codes, E4M3 block scales, the global scale that divides them
sc "$C/ct/nvfp4" "$(ctc nvfp4-pack-quantized '{"num_bits":4,"type":"float","symmetric":true,"strategy":"tensor_group","group_size":16}' ',"input_activations":{"num_bits":4,"type":"float","strategy":"tensor_group","group_size":16,"dynamic":"local"}')" \
	'{"m.q_proj.weight_packed":{"dtype":"U8","shape":[8,16]},"m.q_proj.weight_scale":{"dtype":"F8_E4M3","shape":[8,2],"fz":[56,64,72,48]},"m.q_proj.weight_global_scale":{"dtype":"F32","shape":[1],"fz":[2688]},"m.q_proj.input_global_scale":{"dtype":"F32","shape":[1],"fz":[100]}}' "$W/rnd"
# MXFP4 (compressed-tensors): codes and E8M0 scales, no global scale
sc "$C/ct/mxfp4" "$(ctc mxfp4-pack-quantized '{"num_bits":4,"type":"float","symmetric":true,"strategy":"group","group_size":32,"scale_dtype":"torch.uint8"}')" \
	'{"m.q_proj.weight_packed":{"dtype":"U8","shape":[8,32]},"m.q_proj.weight_scale":{"dtype":"U8","shape":[8,2],"fz":[127,126,200,0]},'"$HEAD"'}' "$W/rnd"
# int-quantized (I8), and pack-quantized asymmetric with act-order (zero points, g_idx)
sc "$C/ct/int8" "$(ctc int-quantized '{"num_bits":8,"type":"int","symmetric":true,"strategy":"channel"}')" \
	'{"m.up_proj.weight":{"dtype":"I8","shape":[8,32]},"m.up_proj.weight_scale":{"dtype":"F16","shape":[8,1],"fz":[0.01]}}' "$W/rnd"
sc "$C/ct/pack-asym-actorder" "$(ctc pack-quantized '{"num_bits":4,"type":"int","symmetric":false,"strategy":"group","group_size":16,"actorder":"group"}')" \
	'{"m.down_proj.weight_g_idx":{"dtype":"I32","shape":[32],"fz":[1,0]},"m.down_proj.weight_packed":{"dtype":"I32","shape":[8,4]},"m.down_proj.weight_scale":{"dtype":"F16","shape":[8,2],"fz":[0.1,0.2]},"m.down_proj.weight_shape":{"dtype":"I64","shape":[2],"fz":[8,32]},"m.down_proj.weight_zero_point":{"dtype":"I32","shape":[1,2],"fz":[1985229328]}}' "$W/rnd"
sc "$C/ct/pack2-tensor" "$(ctc pack-quantized '{"num_bits":2,"type":"int","strategy":"tensor"}')" \
	'{"m.gate_up.weight_packed":{"dtype":"I32","shape":[4,2]},"m.gate_up.weight_scale":{"dtype":"F32","shape":[1],"fz":[0.5]},"m.gate_up.weight_shape":{"dtype":"I64","shape":[2],"fz":[4,32]}}' "$W/rnd"
# two config groups (FP8 and pack-quantized) targeting modules by regex and by name
sc "$C/ct/two-groups" "{$LL,\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"mixed-precision\",\"ignore\":[\"lm_head\"],\"config_groups\":{\"a\":{\"format\":\"float-quantized\",\"targets\":[\"re:.*self_attn\\\\.(q|k)_proj\$\"],\"weights\":{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"channel\"}},\"b\":{\"format\":\"pack-quantized\",\"targets\":[\"model.layers.0.mlp.down_proj\"],\"weights\":{\"num_bits\":8,\"type\":\"int\",\"strategy\":\"group\",\"group_size\":32}},\"c\":{\"targets\":[\"Linear\"],\"input_activations\":{\"num_bits\":8,\"type\":\"int\",\"strategy\":\"token\",\"dynamic\":true}}}}}" \
	'{"model.layers.0.self_attn.q_proj.weight":{"dtype":"F8_E4M3","shape":[4,32]},"model.layers.0.self_attn.q_proj.weight_scale":{"dtype":"F16","shape":[4,1],"fz":[0.03]},"model.layers.0.self_attn.k_proj.weight":{"dtype":"F8_E4M3","shape":[4,32]},"model.layers.0.self_attn.k_proj.weight_scale":{"dtype":"F16","shape":[4,1],"fz":[0.02]},"model.layers.0.mlp.down_proj.weight_packed":{"dtype":"I32","shape":[4,8]},"model.layers.0.mlp.down_proj.weight_scale":{"dtype":"F16","shape":[4,1],"fz":[0.01]},"model.layers.0.mlp.down_proj.weight_shape":{"dtype":"I64","shape":[2],"fz":[4,32]},'"$HEAD"'}' "$W/rnd"
# DeepSeek block FP8 (weight_scale_inv per 16x16 tile, a partial last row of tiles)
sc "$C/ct/deepseek-fp8" "{$LL,\"quantization_config\":{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\",\"activation_scheme\":\"dynamic\",\"weight_block_size\":[16,16]}}" \
	'{"model.layers.0.mlp.gate_proj.weight":{"dtype":"F8_E4M3","shape":[20,32]},"model.layers.0.mlp.gate_proj.weight_scale_inv":{"dtype":"F32","shape":[2,2],"fz":[0.001,0.002,0.5,1]},"model.norm.weight":{"dtype":"BF16","shape":[32],"fz":[1]}}' "$W/rnd"
# ModelOpt NVFP4 (weight_scale_2 multiplies; input_scale stays plain), with hf_quant_config.json
printf '%s' '{"producer":{"name":"modelopt","version":"0.29.0"},"quantization":{"quant_algo":"NVFP4","kv_cache_quant_algo":null,"group_size":16,"exclude_modules":["lm_head"]}}' >"$W/hfq.json"
sc "$C/ct/modelopt-nvfp4" "{$LL,\"quantization_config\":{\"quant_method\":\"modelopt\",\"quant_algo\":\"NVFP4\",\"kv_cache_scheme\":null,\"group_size\":16,\"ignore\":[\"lm_head\",\"model.layers.*.mlp.gate\"]}}" \
	'{"model.layers.0.self_attn.o_proj.weight":{"dtype":"U8","shape":[8,16]},"model.layers.0.self_attn.o_proj.weight_scale":{"dtype":"F8_E4M3","shape":[8,2],"fz":[56,64,200,48]},"model.layers.0.self_attn.o_proj.weight_scale_2":{"dtype":"F32","shape":[],"fz":[0.0003]},"model.layers.0.self_attn.o_proj.input_scale":{"dtype":"F32","shape":[],"fz":[0.01]},'"$HEAD"'}' "$W/rnd" hf_quant_config.json "$W/hfq.json"

# MLX: qconvert's 4-, 3-, 2- and 8-bit directories, and per-module overrides by hand
for n in mlx mlx3; do sc_split "$C/mlx/hf-$n" "$W/hf-$n"; done
for v in "mlx2 --bits 2 --group-size 32" "mlx8 --bits 8 --group-size 32" "mlx6 --bits 6 --group-size 32"; do
	set -- $v; n=$1; shift
	$Q "$W/tiny.gguf" "$W/hf-$n/" --to mlx "$@" 2>/dev/null && sc_split "$C/mlx/hf-$n" "$W/hf-$n"
done
sc "$C/mlx/override" "{$LL,\"quantization\":{\"group_size\":64,\"bits\":4,\"model.layers.0.mlp.down_proj\":{\"group_size\":32,\"bits\":8}},\"quantization_config\":{\"group_size\":64,\"bits\":4,\"model.layers.0.mlp.down_proj\":{\"group_size\":32,\"bits\":8}}}" \
	'{"model.layers.0.mlp.down_proj.biases":{"dtype":"F16","shape":[4,2],"fz":[-0.5]},"model.layers.0.mlp.down_proj.scales":{"dtype":"F16","shape":[4,2],"fz":[0.01]},"model.layers.0.mlp.down_proj.weight":{"dtype":"U32","shape":[4,16]},"model.layers.0.mlp.up_proj.biases":{"dtype":"BF16","shape":[4,2],"fz":[-1]},"model.layers.0.mlp.up_proj.scales":{"dtype":"BF16","shape":[4,2],"fz":[0.1]},"model.layers.0.mlp.up_proj.weight":{"dtype":"U32","shape":[4,16]},"model.norm.weight":{"dtype":"BF16","shape":[128],"fz":[1]}}' "$W/rnd"
sc "$C/mlx/f32-scales" "{$LL,\"quantization\":{\"group_size\":32,\"bits\":3}}" \
	'{"l.biases":{"dtype":"F32","shape":[2,2],"fz":[0.5]},"l.scales":{"dtype":"F32","shape":[2,2],"fz":[0.25]},"l.weight":{"dtype":"U32","shape":[2,6]}}' "$W/rnd"

# bitsandbytes 4-bit: NF4 and FP4, float16 / bfloat16 / float32 quant states, double quant
NF4M='[-1,-0.6961928,-0.52507305,-0.3949175,-0.28444138,-0.18477343,-0.091050036,0,0.0795803,0.1609302,0.2461123,0.33791524,0.44070983,0.562617,0.72295684,1]'
FP4M='[0,0.0052083335,0.6666667,1,0.33333334,0.5,0.16666667,0.25,0,-0.0052083335,-0.6666667,-1,-0.33333334,-0.5,-0.16666667,-0.25]'
bnbc() { printf '%s' "{$LL,\"quantization_config\":{\"quant_method\":\"bitsandbytes\",\"_load_in_4bit\":true,\"load_in_4bit\":true,\"bnb_4bit_quant_type\":\"$1\",\"bnb_4bit_compute_dtype\":\"bfloat16\",\"bnb_4bit_use_double_quant\":$2,\"llm_int8_skip_modules\":null}}"; }
for v in "nf4:float16:$NF4M" "fp4:bfloat16:$FP4M" "nf4:float32:$NF4M"; do
	qt=${v%%:*}; r=${v#*:}; dt=${r%%:*}; map=${r#*:}
	sc "$C/bnb/bnb4-$qt-$dt" "$(bnbc $qt false)" \
		'{"m.q_proj.weight":{"dtype":"U8","shape":[64,1]},"m.q_proj.weight.absmax":{"dtype":"F32","shape":[2],"fz":[1,0.5]},"m.q_proj.weight.quant_map":{"dtype":"F32","shape":[16],"fz":'"$map"'},"m.q_proj.weight.quant_state.bitsandbytes__'$qt'":{"fz":"{\"quant_type\": \"'$qt'\", \"blocksize\": 64, \"dtype\": \"'$dt'\", \"shape\": [2, 64]}"},"m.norm.weight":{"dtype":"F16","shape":[64],"fz":[1]}}' "$W/rnd"
done
# double quant: U8 absmax codes, nested absmax per 256 blocks, the 256-entry signed map
NQM=$(awk 'BEGIN { printf "["; for (i = 0; i < 256; i++) printf "%s%.6f", i ? "," : "", (i - 127.5) / 128; printf "]" }')
sc "$C/bnb/bnb4-nested" "$(bnbc nf4 true)" \
	'{"m.v_proj.weight":{"dtype":"U8","shape":[128,1]},"m.v_proj.weight.absmax":{"dtype":"U8","shape":[4],"fz":[0,100,200,255]},"m.v_proj.weight.nested_absmax":{"dtype":"F32","shape":[1],"fz":[0.01]},"m.v_proj.weight.nested_quant_map":{"dtype":"F32","shape":[256],"fz":'"$NQM"'},"m.v_proj.weight.quant_map":{"dtype":"F32","shape":[16],"fz":'"$NF4M"'},"m.v_proj.weight.quant_state.bitsandbytes__nf4":{"fz":"{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"bfloat16\", \"shape\": [4, 64], \"nested_blocksize\": 256, \"nested_dtype\": \"float32\", \"nested_offset\": 0.031}"}}' "$W/rnd"
# LLM.int8: I8 weight, F32 SCB per row, weight_format 0 (and a module left in float)
sc "$C/bnb/bnb8" "{$LL,\"quantization_config\":{\"quant_method\":\"bitsandbytes\",\"load_in_8bit\":true,\"llm_int8_threshold\":6.0,\"llm_int8_skip_modules\":[\"lm_head\"]}}" \
	'{"m.o_proj.SCB":{"dtype":"F32","shape":[4],"fz":[127,63.5,1,0]},"m.o_proj.weight":{"dtype":"I8","shape":[4,32]},"m.o_proj.weight_format":{"dtype":"U8","shape":[],"fz":[0]},'"$HEAD"'}' "$W/rnd"
for f in bnb-nf4 bnb8; do cp "$C/hfdir/$f" "$C/bnb/raw-$f"; done # as whole files

# gpt-oss MXFP4: stacked experts [E, out, in/32, 16] and a 2-D linear, a bias and a router left plain
OSSC="{\"architectures\":[\"GptOssForCausalLM\"],\"model_type\":\"gpt_oss\",\"quantization_config\":{\"quant_method\":\"mxfp4\",\"modules_to_not_convert\":[\"model.layers.*.self_attn\",\"model.layers.*.mlp.router\",\"model.embed_tokens\",\"lm_head\"]}}"
sc "$C/mxfp4/experts" "$OSSC" \
	'{"model.layers.0.mlp.experts.down_proj_bias":{"dtype":"BF16","shape":[2,4],"fz":[0.5]},"model.layers.0.mlp.experts.down_proj_blocks":{"dtype":"U8","shape":[2,4,2,16]},"model.layers.0.mlp.experts.down_proj_scales":{"dtype":"U8","shape":[2,4,2],"fz":[127,128,120,130]},"model.layers.0.mlp.experts.gate_up_proj_blocks":{"dtype":"U8","shape":[2,8,1,16]},"model.layers.0.mlp.experts.gate_up_proj_scales":{"dtype":"U8","shape":[2,8,1],"fz":[126,127]},"model.layers.0.mlp.router.weight":{"dtype":"BF16","shape":[2,32],"fz":[0.1]}}' "$W/rnd"
sc "$C/mxfp4/linear-2d" "$OSSC" \
	'{"m.proj_blocks":{"dtype":"U8","shape":[4,1,16]},"m.proj_scales":{"dtype":"U8","shape":[4,1],"fz":[0,127,254,255]}}' "$W/rnd"
cp "$C/hfdir/gptoss-mxfp4" "$C/mxfp4/raw-gptoss-mxfp4"

# sigbundle: model_signing's own key-signed bundle, a qtk-signed one (Ed25519, when openssl is
# installed), and bare statements
cp tests/data/oms-v1.1.0-key/model.sig "$C/sigbundle/oms-v1.1.0-key.sig"
if command -v openssl >/dev/null 2>&1 && [ -x bin/qverify ] &&
	openssl genpkey -algorithm ed25519 -out "$W/seed-ed.pem" 2>/dev/null; then
	bin/qverify -q --sign "$W/seed-ed.pem" --signature "$C/sigbundle/tiny-ed25519.sig" "$W/tiny.gguf" || true
fi
printf '%s' '{"_type":"https://in-toto.io/Statement/v1","predicate":{"resources":[],"serialization":{"allow_symlinks":false,"hash_type":"sha256","method":"files"}},"predicateType":"https://model_signing/signature/v1.0","subject":[{"digest":{"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},"name":"m"}]}' >"$C/sigbundle/statement-empty.json"

du -sh "$C"/* | sort -k2
