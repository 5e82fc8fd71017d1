#!/bin/sh
# CLI tests for the metadata digests (qtk-meta-v1, docs/provenance.md section 2.4): a change to
# a behaviour-relevant key (rope, context, tokenizer, special tokens, chat template) fails plain
# qverify and is named; a cosmetic key (general.name) is a note; --against names the keys that
# differ from the source. Prints "N passed, N failed".
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
V=$BIN/qverify
Q=$BIN/qconvert
T=$(mktemp -d /tmp/qtk-meta-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
FX=${QTK_FIXTURES:-../shared/fixtures}
[ -f "$FX/README.md" ] || FX=""
SOURCE_DATE_EPOCH=1700000000; export SOURCE_DATE_EPOCH

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
run() {
	name=$1; want=$2; shift 2
	"$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" -eq "$want" ]; then ok; else bad "$name: exit $got, expected $want"; sed 's/^/  stdout: /' "$T/out" | head -8; sed 's/^/  stderr: /' "$T/err" | head -5; fi
}
out_has() { if grep -q -- "$2" "$T/out"; then ok; else bad "$1: stdout lacks '$2'"; head -8 "$T/out"; fi; }
err_has() { if grep -q -- "$2" "$T/err"; then ok; else bad "$1: stderr lacks '$2'"; head -5 "$T/err"; fi; }
flip_byte() {
	v=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	n=$(( (v + 1) % 256 ))
	printf "\\$(printf %03o "$n")" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
offset_of() { grep -boa -- "$2" "$1" | head -n 1 | cut -d: -f1; }

S=$T/samples
"$B/samples/gen" "$S" >/dev/null || bad "sample generator"
G=$T/m.gguf
"$Q" "$S/tiny-llama-f32.gguf" "$G" >/dev/null 2>&1 || bad "qconvert copy"

run "record has metadata" 0 "$V" "$G"
out_has "record has metadata" "metadata: ok: 10 behaviour-relevant keys"
"$V" --emit-record "$G" >"$T/rec.json"
grep -q '"metadata":{"keys":{"llama.context_length":"' "$T/rec.json" && ok || bad "deployment record lacks metadata.keys"
grep -q '"scheme":"qtk-meta-v1"' "$T/rec.json" && ok || bad "deployment record lacks the metadata scheme"

# a rope key: the f32 value after "llama.rope.freq_base" (key, u32 type, value)
cp "$G" "$T/rope.gguf"
o=$(offset_of "$T/rope.gguf" "llama.rope.freq_base"); flip_byte "$T/rope.gguf" $((o + 20 + 4 + 3))
run "rope key changed" 1 "$V" "$T/rope.gguf"
out_has "rope key changed" "metadata: failed: 1 behaviour-relevant key changed since the embedded record: 'llama.rope.freq_base' differs"
out_has "rope key changed" "tensors: ok"
run "rope key changed, --record" 1 "$V" --record "$T/rec.json" "$T/rope.gguf"
out_has "rope key changed, --record" "'llama.rope.freq_base' differs"
run "rope key changed, --against" 1 "$V" --against "$G" "$T/rope.gguf"
out_has "rope key changed, --against" "metadata: failed: 1 behaviour-relevant key differs from the source: 'llama.rope.freq_base' differs"
# a vocabulary entry: the first token string (after the array header)
cp "$G" "$T/tok.gguf"
o=$(offset_of "$T/tok.gguf" "tokenizer.ggml.tokens"); flip_byte "$T/tok.gguf" $((o + 21 + 4 + 4 + 8 + 8))
run "vocabulary changed" 1 "$V" "$T/tok.gguf"
out_has "vocabulary changed" "'tokenizer.ggml.tokens' differs"
# a cosmetic key: a note, exit 0
cp "$G" "$T/name.gguf"
o=$(offset_of "$T/name.gguf" "general.name"); flip_byte "$T/name.gguf" $((o + 12 + 4 + 8))
run "cosmetic key changed" 0 "$V" "$T/name.gguf"
out_has "cosmetic key changed" "metadata_other: note: 1 other key changed (not behaviour-relevant): 'general.name' differs"
out_has "cosmetic key changed" "metadata: ok"

# a Hugging Face directory: chat template, special tokens, rope_scaling in its side files
H=$T/hf-src; cp -r "$S/tiny-llama" "$H"
printf '{"bos_token": "<s>", "eos_token": "</s>", "chat_template": "{%% for m in messages %%}{{ m.content }}{%% endfor %%}"}' >"$H/tokenizer_config.json"
printf '{"bos_token": "<s>", "eos_token": "</s>"}' >"$H/special_tokens_map.json"
printf '{{ messages }}' >"$H/chat_template.jinja"
"$Q" "$H" "$T/hf/" >/dev/null 2>&1 || bad "qconvert hf -> hf"
run "hf record" 0 "$V" "$T/hf"
out_has "hf record" "metadata: ok"
sed 's/m.content/m.role/' "$T/hf/tokenizer_config.json" >"$T/x" && mv "$T/x" "$T/hf/tokenizer_config.json"
run "hf chat template changed" 1 "$V" "$T/hf"
out_has "hf chat template changed" "'tokenizer_config.json:chat_template' differs"
cp "$H/tokenizer_config.json" "$T/hf/tokenizer_config.json"
printf '{{ messages|reverse }}' >"$T/hf/chat_template.jinja"
printf '{"bos_token": "<s>", "eos_token": "<pad>"}' >"$T/hf/special_tokens_map.json"
run "hf template file and special tokens changed" 1 "$V" "$T/hf"
out_has "hf template file and special tokens changed" "'chat_template.jinja' differs, 'special_tokens_map.json' differs"
cp "$H/chat_template.jinja" "$H/special_tokens_map.json" "$T/hf/"
sed 's/"rope_theta": *[0-9.]*/"rope_theta": 500000.0, "rope_scaling": {"type": "linear", "factor": 2.0}/' "$T/hf/config.json" >"$T/x" && mv "$T/x" "$T/hf/config.json"
run "hf rope changed" 1 "$V" "$T/hf"
out_has "hf rope changed" "'config.json:rope_theta' differs, 'config.json:rope_scaling' added"

# hostile metadata sections in a record: exit 3 naming the field
sed 's/"scheme":"qtk-meta-v1"/"scheme":"qtk-meta-v9"/' "$T/rec.json" >"$T/bad1.json"
run "unknown metadata scheme" 3 "$V" --record "$T/bad1.json" "$G"
err_has "unknown metadata scheme" "output.metadata.scheme"
sed 's/"llama.context_length":"[0-9a-f]*"/"llama.context_length":"xyz"/' "$T/rec.json" >"$T/bad2.json"
run "bad metadata digest" 3 "$V" --record "$T/bad2.json" "$G"
err_has "bad metadata digest" "output.metadata.keys.llama.context_length"

# against the real converter: llama.cpp's GGUF and the HF checkpoint it came from
if [ -n "$FX" ] && [ -d "$FX/hf/tiny-llama/fp16" ]; then
	run "fixture against" 0 "$V" --against "$FX/hf/tiny-llama/fp16" "$FX/hf/tiny-llama/ref/llamacpp-from-hf-f16.gguf"
	out_has "fixture against" "metadata: ok: 10 behaviour-relevant keys"
else
	echo "skipped: fixtures absent (QTK_FIXTURES)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
