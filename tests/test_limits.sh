#!/bin/sh
# Resource limits (docs/security.md): work grows with the names an input holds, not with their
# square; absurd sizes are refused or reported, not converted. Each large case runs under a
# generous timeout: the quadratic paths these guard took minutes.
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
T=$(mktemp -d /tmp/qtk-limits-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
run() {
	name=$1; want=$2; shift 2
	"$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" -eq "$want" ]; then ok; else bad "$name: exit $got, expected $want"; sed 's/^/  stderr: /' "$T/err" | head -5; fi
}
out_has() { if grep -q -- "$2" "$T/out"; then ok; else bad "$1: stdout lacks '$2'"; head -5 "$T/out"; fi; }
out_lacks() { if grep -q -- "$2" "$T/out"; then bad "$1: stdout has '$2'"; else ok; fi; }
err_has() { if grep -q -- "$2" "$T/err"; then ok; else bad "$1: stderr lacks '$2'"; head -5 "$T/err"; fi; }
no_file() { if [ -e "$2" ]; then bad "$1: '$2' was written"; else ok; fi; }

# st FILE: a safetensors file from the JSON header in FILE.json (padded to 8 bytes) and
# DATA zero bytes of tensor data
st() {
	n=$(wc -c <"$1.json")
	pad=$(( (8 - n % 8) % 8 )); n=$((n + pad))
	{
		i=0; v=$n
		while [ $i -lt 8 ]; do printf "\\$(printf %03o $((v % 256)))"; v=$((v / 256)); i=$((i + 1)); done
		cat "$1.json"
		printf '%*s' "$pad" ''
		head -c "$2" /dev/zero
	} >"$1"
}

# tensors FILE N NAME: a safetensors file of N one-value F32 tensors named NAME with %d the index
tensors() {
	awk -v n="$2" -v f="$3" 'BEGIN { printf "{"; for (i = 0; i < n; i++) {
		printf "%s\"", i ? "," : ""; printf f, i;
		printf "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%d,%d]}", 4 * i, 4 * i + 4 }
		printf "}" }' >"$1.json"
	st "$1" $(($2 * 4))
}

# --- 200,000 __metadata__ keys: read back in seconds (a scan per key took minutes)
awk 'BEGIN { printf "{\"__metadata__\":{"; for (i = 0; i < 200000; i++) printf "%s\"key.%d\":\"%d\"", i ? "," : "", i, i;
	printf "},\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}" }' >"$T/meta.safetensors.json"
st "$T/meta.safetensors" 4
run "200k metadata keys" 0 timeout 20 "$BIN/qinspect" --json "$T/meta.safetensors"
out_has "200k metadata keys" '"key.199999"'
run "200k metadata keys to GGUF" 0 timeout 20 "$BIN/qconvert" "$T/meta.safetensors" "$T/meta.gguf"
run "200k metadata keys back" 0 timeout 20 "$BIN/qconvert" "$T/meta.gguf" "$T/meta2.safetensors"

# --- 20,000 tensors: qverify against the embedded record, and --diff pairing, in seconds
tensors "$T/many.safetensors" 20000 "model.layers.%d.w.weight"
run "20k tensors convert" 0 timeout 60 "$BIN/qconvert" "$T/many.safetensors" "$T/many.gguf"
run "20k tensors verify" 0 timeout 20 "$BIN/qverify" "$T/many.gguf"
run "20k tensors diff" 0 timeout 20 "$BIN/qinspect" --diff "$T/many.safetensors" "$T/many.gguf"
# the chained record (several MiB) placed into GGUF and QPK a megabyte at a time as it is made
run "20k tensors GGUF copy" 0 timeout 60 "$BIN/qconvert" -q "$T/many.gguf" "$T/many2.gguf"
run "20k tensors GGUF copy verify" 0 timeout 20 "$BIN/qverify" "$T/many2.gguf"
out_has "20k tensors GGUF copy verify" "20000 tensors match"
run "20k tensors to QPK" 0 timeout 60 "$BIN/qconvert" -q "$T/many.gguf" "$T/many.qpk"
run "20k tensors QPK verify" 0 timeout 20 "$BIN/qverify" "$T/many.qpk"
out_has "20k tensors QPK verify" "20000 tensors match"
run "20k tensors to a directory" 0 timeout 60 "$BIN/qconvert" -q "$T/many.gguf" "$T/manyd/"
run "20k tensors directory verify" 0 timeout 20 "$BIN/qverify" "$T/manyd/"
out_has "20k tensors directory verify" "20000 tensors match"
rm -rf "$T/many2.gguf" "$T/many.qpk" "$T/manyd"

# --- a record of several MiB with multi-byte names, placed into a safetensors header escaped a
# piece at a time: the file reads back and its record checks
tensors "$T/utf.safetensors" 20000 "$(printf 'model.layers.%%d.w\303\251\342\200\224.weight')"
run "multi-byte names convert" 0 timeout 60 "$BIN/qconvert" "$T/utf.safetensors" "$T/utf2.safetensors"
run "multi-byte names verify" 0 timeout 20 "$BIN/qverify" "$T/utf2.safetensors"
out_has "multi-byte names verify" "20000 tensors match"
# again, chaining that record: the reserved record (over 4 MiB) is generated into the header, its
# pieces escaped as they come (a piece may end inside a character)
run "multi-byte names chained" 0 timeout 60 "$BIN/qconvert" -q "$T/utf2.safetensors" "$T/utf3.safetensors"
run "multi-byte names chained verify" 0 timeout 20 "$BIN/qverify" "$T/utf3.safetensors"
out_has "multi-byte names chained verify" "20000 tensors match"
rm -f "$T/utf3.safetensors"

# --- a record that cannot fit (the source's own record, chained whole, and an entry for each
# of 150,000 tensors) is refused before the conversion's work, naming the limit
tensors "$T/big.safetensors" 150000 "t.%d"
run "150k tensors with a record" 0 timeout 120 "$BIN/qconvert" -q "$T/big.safetensors" "$T/big.gguf"
run "a record over its limit" 3 timeout 60 "$BIN/qconvert" -q "$T/big.gguf" "$T/big2.gguf"
err_has "a record over its limit" "chained into it"
no_file "a record over its limit" "$T/big2.gguf"
rm -f "$T/big.safetensors" "$T/big.safetensors.json" "$T/big.gguf"

# --- two tensors with one canonical name: --diff refuses as qverify and qconvert do
printf '{"model.norm.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"output_norm.weight":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}' >"$T/coll.safetensors.json"
st "$T/coll.safetensors" 8
printf '{"model.norm.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}' >"$T/ref.safetensors.json"
st "$T/ref.safetensors" 4
run "diff collision" 3 "$BIN/qinspect" --diff "$T/ref.safetensors" "$T/coll.safetensors"
err_has "diff collision" "two tensors have this canonical name"
run "verify collision" 3 "$BIN/qverify" --emit-record "$T/coll.safetensors"
err_has "verify collision" "two tensors have this canonical name"
run "convert collision" 3 "$BIN/qconvert" "$T/coll.safetensors" "$T/coll.gguf"

# --- an absurd KV cache: reported as out of range, never "0 B per token"
"$B/samples/gen" "$T/s" >/dev/null || bad "sample generator"
sed -e 's/"num_key_value_heads": 2/"num_key_value_heads": 4000000000000, "head_dim": 4000000/' \
	-e 's/"num_attention_heads": 4,/"num_attention_heads": 4000000000000,/' "$T/s/tiny-llama/config.json" >"$T/cfg"
cp "$T/cfg" "$T/s/tiny-llama/config.json"
run "memory absurd heads" 0 "$BIN/qinspect" --memory "$T/s/tiny-llama"
out_has "memory absurd heads" "KV cache    unknown: .* out of range"
out_lacks "memory absurd heads" " 0 B per token"
run "memory absurd heads json" 0 "$BIN/qinspect" --memory --json "$T/s/tiny-llama"
out_has "memory absurd heads json" '"kv_unknown":.*out of range'

# --- vocab_size past the embedding rows: refused before a single padding token is made (a
# 2^24 vocab_size with a one-token tokenizer wrote a ~400 MB GGUF of [PAD] tokens)
"$B/samples/gen" "$T/v" >/dev/null || bad "sample generator"
V=$T/v/tiny-llama
mkdir "$T/vbig" "$T/vtok" "$T/vq"
for f in config.json model.safetensors; do cp "$V/$f" "$T/vtok/"; cp "$V/$f" "$T/vq/"; done
cp "$V"/* "$T/vbig/"
sed 's/"vocab_size": 512/"vocab_size": 16777216/' "$V/config.json" >"$T/vbig/config.json"
run "vocab_size past embedding (spm)" 3 timeout 20 "$BIN/qconvert" "$T/vbig" "$T/vbig.gguf"
err_has "vocab_size past embedding (spm)" "vbig/config.json: error: vocab_size: .* 512 rows"
no_file "vocab_size past embedding (spm)" "$T/vbig.gguf"
cat >"$T/vtok/tokenizer.json" <<'TOK'
{"version": "1.0", "normalizer": null,
 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
 "added_tokens": [], "model": {"type": "BPE", "byte_fallback": false, "vocab": {"a": 0}, "merges": []}}
TOK
run "one token padded to the embedding rows" 0 "$BIN/qconvert" -q "$T/vtok" "$T/vtok.gguf"
run "one token padded: read back" 0 "$BIN/qinspect" --json "$T/vtok.gguf"
grep -A3 '"tokenizer.ggml.tokens"' "$T/out" >"$T/tk"; cp "$T/tk" "$T/out"
out_has "one token padded: 512 tokens" '"count":	512$'
cp "$T/vbig/config.json" "$T/vtok/config.json"
run "vocab_size past embedding (bpe)" 3 timeout 20 "$BIN/qconvert" "$T/vtok" "$T/vtok2.gguf"
err_has "vocab_size past embedding (bpe)" "config.json: error: vocab_size: 'vocab_size' is 16777216 but the embedding table has 512 rows"
no_file "vocab_size past embedding (bpe)" "$T/vtok2.gguf"
# a family without vocab_size (Qwen2): the tokenizer's own ids past the embedding rows
sed -e 's/LlamaForCausalLM/Qwen2ForCausalLM/' -e 's/"llama"/"qwen2"/' -e '/vocab_size/d' "$V/config.json" >"$T/vq/config.json"
sed 's/"added_tokens": \[\]/"added_tokens": [{"id": 600, "content": "<|endoftext|>", "special": true}]/' \
	"$T/vtok/tokenizer.json" >"$T/vq/tokenizer.json"
run "tokens past embedding" 3 "$BIN/qconvert" "$T/vq" "$T/vq.gguf"
err_has "tokens past embedding" "tokenizer.json: error: vocab_size: tokenizer.json has 601 tokens but the embedding table has 512 rows"
no_file "tokens past embedding" "$T/vq.gguf"

# --- the safetensors and directory writers replay the reader's rules: a __metadata__ key over
# the reader's key cap (65,535 bytes) is not written (it was, and then could not be read)
LK=$(head -c 70000 /dev/zero | tr '\0' k)
run "long metadata key: safetensors" 3 "$BIN/qconvert" -q "$T/v/tiny-llama-f32.gguf" "$T/lk.safetensors" --set "$LK=v"
err_has "long metadata key: safetensors" "lk.safetensors: error: not written, as qtk would refuse to read it: __metadata__ key too long"
no_file "long metadata key: safetensors" "$T/lk.safetensors"
run "long metadata key: directory" 3 "$BIN/qconvert" -q "$T/v/tiny-llama-f32.gguf" "$T/lkdir/" --set "$LK=v"
err_has "long metadata key: directory" "lkdir/model.safetensors: error: not written"
no_file "long metadata key: directory" "$T/lkdir"
n=$(find "$T" -name '.*.qtk-*' | wc -l)
if [ "$n" -eq 0 ]; then ok; else bad "long metadata key: $n temporaries left"; fi

# --- archives: memory held for decompressed members is capped (QTK_ARCHIVE_MAX_MEM); what the
# members declare is checked before anything is decompressed
"$BIN/qconvert" -q "$T/v/tiny-llama-f32.gguf" "$T/b.zip" || bad "zip bundle"
tar -C "$T/v" -czf "$T/b.tar.gz" tiny-llama-f32.gguf
run "zip over the memory cap" 3 env QTK_ARCHIVE_MAX_MEM=100000 "$BIN/qinspect" "$T/b.zip"
err_has "zip over the memory cap" "declare more than 100000 bytes in all.*QTK_ARCHIVE_MAX_MEM"
run "tar.gz over the memory cap" 3 env QTK_ARCHIVE_MAX_MEM=100000 "$BIN/qinspect" "$T/b.tar.gz"
err_has "tar.gz over the memory cap" "gzip trailer declares .* more than the limit of 100000"
run "zip within the cap" 0 env QTK_ARCHIVE_MAX_MEM=100000000 "$BIN/qinspect" "$T/b.zip"
# a tar member whose header declares 8 GiB: refused at once, nothing allocated for it
tar -C "$T/v" -cf "$T/huge.tar" tiny-llama-f32.gguf
printf '77777777777\0' | dd of="$T/huge.tar" bs=1 seek=124 conv=notrunc 2>/dev/null
printf '        ' | dd of="$T/huge.tar" bs=1 seek=148 conv=notrunc 2>/dev/null
sum=$(head -c 512 "$T/huge.tar" | od -An -v -tu1 | awk '{ for (i = 1; i <= NF; i++) s += $i } END { print s }')
printf '%06o\0 ' "$sum" | dd of="$T/huge.tar" bs=1 seek=148 conv=notrunc 2>/dev/null
run "tar member declaring 8 GiB" 3 timeout 20 "$BIN/qinspect" "$T/huge.tar"
err_has "tar member declaring 8 GiB" "declares 8589934591 bytes"
gzip -c "$T/huge.tar" >"$T/huge.tar.gz"
run "tar.gz member declaring 8 GiB" 3 timeout 20 "$BIN/qinspect" "$T/huge.tar.gz"
err_has "tar.gz member declaring 8 GiB" "declares 8589934591 bytes"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
