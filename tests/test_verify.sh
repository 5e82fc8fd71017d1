#!/bin/sh
# CLI tests for qverify: records, embedded provenance, tampering, re-containering, --against,
# exit statuses. Prints "N passed, N failed" (and "skipped: ..." for absent fixtures).
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
V=$BIN/qverify
Q=$BIN/qconvert
T=$(mktemp -d /tmp/qtk-verify-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
FX=${QTK_FIXTURES:-../shared/fixtures}
[ -f "$FX/README.md" ] || FX=""
SOURCE_DATE_EPOCH=1700000000; export SOURCE_DATE_EPOCH

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# run NAME EXPECTED_STATUS CMD...: stdout in $T/out, stderr in $T/err
run() {
	name=$1; want=$2; shift 2
	"$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" -eq "$want" ]; then ok; else bad "$name: exit $got, expected $want"; sed 's/^/  stdout: /' "$T/out" | head -5; sed 's/^/  stderr: /' "$T/err" | head -5; fi
}
out_has() { if grep -q -- "$2" "$T/out"; then ok; else bad "$1: stdout lacks '$2'"; head -5 "$T/out"; fi; }
out_lacks() { if grep -q -- "$2" "$T/out"; then bad "$1: stdout has '$2'"; else ok; fi; }
err_has() { if grep -q -- "$2" "$T/err"; then ok; else bad "$1: stderr lacks '$2'"; head -5 "$T/err"; fi; }
out_empty() { if [ -s "$T/out" ]; then bad "$1: stdout not empty"; else ok; fi; }

# flip_byte FILE OFFSET: change one byte in place
flip_byte() {
	v=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	n=$(( (v + 1) % 256 ))
	printf "\\$(printf %03o "$n")" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
size_of() { wc -c <"$1" | tr -d ' '; }

S=$T/samples
"$B/samples/gen" "$S" >/dev/null || bad "sample generator"
G=$S/tiny-llama-f32.gguf
H=$S/tiny-llama

# --- usage errors: 2
run "no file" 2 "$V"
run "two modes" 2 "$V" --emit-record --record x.json "$G"; err_has "two modes" "exclude each other"
run "max-error without against" 2 "$V" --max-error 20 "$G"; err_has "max-error without against" "needs --against"
run "files without record" 2 "$V" --files "$G"; err_has "files without record" "needs --record"
run "bad max-error" 2 "$V" --against "$G" --max-error abc "$G"
run "bad threads" 2 "$V" --threads 0 "$G"

# --- missing inputs: 4; the message names the file
run "missing file" 4 "$V" "$T/nope.gguf"; err_has "missing file" "qverify: $T/nope.gguf"
run "missing record" 4 "$V" --record "$T/nope.json" "$G"; err_has "missing record" "nope.json"
run "missing source" 4 "$V" --against "$T/nope.gguf" "$G"

# --- plain file: structure, no record
run "no record" 0 "$V" "$G"; out_has "no record" "ok: gguf, 21 tensors"; out_has "no record" "no embedded provenance record"
run "quiet" 0 "$V" -q "$G"; out_empty "quiet"

# --- emit-record, then --record passes; deterministic under SOURCE_DATE_EPOCH and any thread count
run "emit" 0 "$V" --emit-record "$G"; cp "$T/out" "$T/rec.json"
out_has "emit" '"record_version":1'; out_has "emit" '"scheme":"qtk-digest-v4"'
out_has "emit" '"name":"model.layers.0.self_attn.q_proj.weight"'; out_has "emit" '"permute_qk":4'
out_has "emit" '"time":"2023-11-14T22:13:20Z"'
run "emit 1 thread" 0 "$V" --threads 1 --emit-record "$G"
if cmp -s "$T/out" "$T/rec.json"; then ok; else bad "emit-record depends on the thread count"; fi
# the record and the AI-BOM are printed as they are made: a full standard output is an I/O error
if [ -w /dev/full ]; then
	"$V" --emit-record "$G" >/dev/full 2>"$T/err"; st=$?
	if [ $st -eq 4 ] && grep -q "cannot write the record" "$T/err"; then ok; else bad "emit-record to a full stdout: exit $st"; fi
	"$V" --emit-bom spdx "$G" >/dev/full 2>"$T/err"; st=$?
	if [ $st -eq 4 ] && grep -q "cannot write the AI-BOM" "$T/err"; then ok; else bad "emit-bom to a full stdout: exit $st"; fi
else
	echo "skipped: /dev/full is not writable (full standard output)"
fi
run "record passes" 0 "$V" --record "$T/rec.json" "$G"
out_has "record passes" "tensors: ok: 21 tensors match"; out_has "record passes" "files: ok"
run "record --files passes" 0 "$V" --record "$T/rec.json" --files "$G"
run "record json" 0 "$V" --json --record "$T/rec.json" "$G"; out_has "record json" '"ok":	true'

# --- records of the previous digest scheme (qtk-digest-v1) are still checked in that scheme:
# tests/data/v1-*.json were written by qverify --emit-record before version 2, from this sample
# directory (F16) and from its AWQ conversion (--group-size 64)
D1=tests/data
run "v1 record" 0 "$V" --record "$D1/v1-hf.json" "$H"
out_has "v1 record" "tensors: ok: 21 tensors match"; out_has "v1 record" "tensor_root: ok"
run "v1 record json" 0 "$V" --json --record "$D1/v1-hf.json" "$H"; out_has "v1 record json" '"scheme":	"qtk-digest-v1"'
"$Q" -q "$H" "$T/v1-f32.gguf" --to f32 || bad "convert to f32"
run "v1 record, widened" 0 "$V" --record "$D1/v1-hf.json" "$T/v1-f32.gguf"
out_has "v1 record, widened" "tensor 'model.layers.0.self_attn.q_proj.weight' (stored as 'blk.0.attn_q.weight'): re-encoded"
cp "$T/v1-f32.gguf" "$T/v1-flip.gguf"
flip_byte "$T/v1-flip.gguf" $(( $(size_of "$T/v1-flip.gguf") - 1001 ))
run "v1 record, flipped" 1 "$V" --record "$D1/v1-hf.json" "$T/v1-flip.gguf"
out_has "v1 record, flipped" "tensor 'lm_head.weight' (stored as 'output.weight'): changed"
"$Q" -q "$H" "$T/v1-awq/" --to awq --group-size 64 && "$Q" -q "$T/v1-awq" "$T/v1-gptq/" --to gptq || bad "awq, gptq"
run "v1 record awq" 0 "$V" --record "$D1/v1-awq.json" "$T/v1-awq"
run "v1 record gptq" 0 "$V" --record "$D1/v1-awq.json" "$T/v1-gptq"
out_has "v1 record gptq" "re-encoded: same values, different bytes: awq:b4:g64:asym -> gptq-v1:b4:g64:asym"
out_has "v1 record gptq" "tensors: ok"

# --- records of qtk-digest-v2 (tests/data/v2-*.json, written by qverify --emit-record before
# version 3, SOURCE_DATE_EPOCH=1700000000): the sample directory, its AWQ conversion (--group-size
# 64) and its q4_0 GGUF. Checked in their own scheme, where an integer layout's decoded leaf is
# its F32 values: the q4_0 tensors' f32 export passes as re-encoded there.
run "v2 record" 0 "$V" --record "$D1/v2-hf.json" "$H"
out_has "v2 record" "tensors: ok: 21 tensors match"; out_has "v2 record" "tensor_root: ok"
run "v2 record awq" 0 "$V" --record "$D1/v2-awq.json" "$T/v1-awq"; out_has "v2 record awq" "tensor_root: ok"
run "v2 record gptq" 0 "$V" --record "$D1/v2-awq.json" "$T/v1-gptq"
out_has "v2 record gptq" "re-encoded: same values, different bytes: awq:b4:g64:asym -> gptq-v1:b4:g64:asym"
"$Q" -q "$H" "$T/q40.gguf" --to q4_0 && "$Q" -q "$T/q40.gguf" "$T/q40-f32.gguf" --to f32 || bad "q4_0, its f32 export"
run "v2 record q4_0" 0 "$V" --record "$D1/v2-q40.json" "$T/q40.gguf"; out_has "v2 record q4_0" "tensor_root: ok"
run "v2 record q4_0, f32" 0 "$V" --record "$D1/v2-q40.json" "$T/q40-f32.gguf"
out_has "v2 record q4_0, f32" "tensor 'model.layers.0.mlp.down_proj.weight' (stored as 'blk.0.ffn_down.weight'): re-encoded"

# --- version 3: the integer layouts' decoded leaves are their runs (scale, differences); an exact
# transcode among them keeps the leaf (q4_0 -> AWQ, Q/K rows in Hugging Face order, -> GPTQ),
# and nothing else has it (the f32 export of the same values is "changed")
run "v3 emit q4_0" 0 "$V" --emit-record "$T/q40.gguf"; cp "$T/out" "$T/rec-q40.json"
out_has "v3 emit q4_0" '"scheme":"qtk-digest-v4"'
"$Q" -q "$T/q40.gguf" "$T/q40-awq/" --to awq --group-size 32 && "$Q" -q --exact "$T/q40-awq/" "$T/q40-gptq/" --to gptq ||
	bad "q4_0 -> awq -> gptq"
for d in q40-awq q40-gptq; do
	run "v3 record q4_0 on $d" 1 "$V" --record "$T/rec-q40.json" "$T/$d/" # the embedding and lm_head are F16 there
	out_has "v3 record q4_0 on $d" "tensor 'model.layers.0.self_attn.q_proj.weight': re-encoded: same values, Q/K rows in Hugging Face order"
	out_has "v3 record q4_0 on $d" "tensor 'model.layers.1.mlp.down_proj.weight': re-encoded"
	out_has "v3 record q4_0 on $d" "tensors: failed: 2 of 21 tensors differ"
done
run "v3 record q4_0, f32" 1 "$V" --record "$T/rec-q40.json" "$T/q40-f32.gguf"
out_has "v3 record q4_0, f32" "tensor 'model.layers.0.mlp.down_proj.weight' (stored as 'blk.0.ffn_down.weight'): changed"
out_has "v3 record q4_0, f32" "(ggml:q4_0), file [0-9a-f]*... (f32); digest v4 keeps integer and affine (k-quant) layouts apart, qverify --against compares values"

# --- records of qtk-digest-v3 (tests/data/v3-*.json, written by qverify --emit-record before
# version 4, SOURCE_DATE_EPOCH=1700000000): the sample's Q4_K_M and q4_1 GGUFs. Checked in their
# own scheme, where k-quants' decoded leaves are their F32 values: the f32 export passes as
# re-encoded there, and is "changed" in version 4, where k-quants hash their sub-blocks (A, M,
# codes). q4_1 stays values in version 4: its exact MLX form keeps the leaf.
"$Q" -q "$H" "$T/q4km.gguf" --to Q4_K_M && "$Q" -q "$H" "$T/q41.gguf" --to q4_1 &&
	"$Q" -q "$T/q4km.gguf" "$T/q4km-f32.gguf" --to f32 || bad "Q4_K_M, q4_1, the f32 export"
run "v3 record Q4_K_M" 0 "$V" --record "$D1/v3-q4km.json" "$T/q4km.gguf"; out_has "v3 record Q4_K_M" "tensor_root: ok"
run "v3 record q4_1" 0 "$V" --record "$D1/v3-q41.json" "$T/q41.gguf"; out_has "v3 record q4_1" "tensor_root: ok"
run "v3 record Q4_K_M, f32" 0 "$V" --record "$D1/v3-q4km.json" "$T/q4km-f32.gguf"
out_has "v3 record Q4_K_M, f32" "tensor 'model.layers.0.mlp.down_proj.weight' (stored as 'blk.0.ffn_down.weight'): re-encoded"
run "v4 emit Q4_K_M" 0 "$V" --emit-record "$T/q4km.gguf"; cp "$T/out" "$T/rec-q4km.json"
out_has "v4 emit Q4_K_M" '"scheme":"qtk-digest-v4"'
run "v4 record Q4_K_M" 0 "$V" --record "$T/rec-q4km.json" "$T/q4km.gguf"; out_has "v4 record Q4_K_M" "tensor_root: ok"
run "v4 record Q4_K_M, f32" 1 "$V" --record "$T/rec-q4km.json" "$T/q4km-f32.gguf"
out_has "v4 record Q4_K_M, f32" "(ggml:q[46]_k), file [0-9a-f]*... (f32); digest v4 keeps integer and affine (k-quant) layouts apart"
run "v4 emit q4_1" 0 "$V" --emit-record "$T/q41.gguf"; cp "$T/out" "$T/rec-q41.json"
"$Q" -q "$T/q41.gguf" "$T/q41-mlx/" --to mlx || bad "q4_1 -> mlx"
run "v4 record q4_1 on its MLX form" 1 "$V" --record "$T/rec-q41.json" "$T/q41-mlx/" # lm_head: q6_k, re-fitted
out_has "v4 record q4_1 on its MLX form" "tensor 'model.layers.1.mlp.down_proj.weight': re-encoded: same values"
out_has "v4 record q4_1 on its MLX form" "tensors: failed: 1 of 21 tensors differ"
run "v4 emit MLX" 0 "$V" --emit-record "$T/q41-mlx/"; cp "$T/out" "$T/rec-mlx.json"
"$Q" -q "$T/q41-mlx/" "$T/q41-mlx-f32.gguf" --to f32 || bad "mlx -> f32"
run "v4 record MLX, f32" 1 "$V" --record "$T/rec-mlx.json" "$T/q41-mlx-f32.gguf"
out_has "v4 record MLX, f32" "(mlx:[^)]*), file [0-9a-f]*... (f32); digest v4 keeps integer and affine (k-quant) layouts apart"

# --- one flipped byte in one tensor: caught and named (output.weight is the last tensor)
cp "$G" "$T/flip.gguf"
flip_byte "$T/flip.gguf" $(( $(size_of "$T/flip.gguf") - 1001 ))
run "flip --record" 1 "$V" --record "$T/rec.json" "$T/flip.gguf"
out_has "flip --record" "tensor 'lm_head.weight' (stored as 'output.weight'): changed"
out_has "flip --record" "tensors: failed: 1 of 21 tensors differ"
out_lacks "flip --record" "keeps integer layouts apart" # the same encoding on both sides: no hint
out_lacks "flip --record" "tensor 'model.embed_tokens.weight'"
run "flip --record json" 1 "$V" --json --record "$T/rec.json" "$T/flip.gguf"
out_has "flip --record json" '"status":	"changed"'

# --- the embedded record: qverify FILE checks it, and names a flipped tensor
if "$Q" --set "qtk.provenance=$(cat "$T/rec.json")" "$G" "$T/emb.gguf" >/dev/null 2>"$T/err"; then
	ok
	run "embedded ok" 0 "$V" "$T/emb.gguf"
	out_has "embedded ok" "provenance: ok: record in kv qtk.provenance"; out_has "embedded ok" "tensors: ok: 21 tensors match the embedded record"
	cp "$T/emb.gguf" "$T/emb-flip.gguf"
	flip_byte "$T/emb-flip.gguf" $(( $(size_of "$T/emb-flip.gguf") - 1001 ))
	run "embedded flip" 1 "$V" "$T/emb-flip.gguf"
	out_has "embedded flip" "tensor 'lm_head.weight' (stored as 'output.weight'): changed"
	run "emit embeds the record" 0 "$V" --emit-record "$T/emb.gguf"; out_has "emit embeds the record" '"embedded":{'
	# the same record in safetensors __metadata__ and in an HF directory's qtk-provenance.json
	run "embedded safetensors" 0 "$Q" --set "qtk.provenance=$(cat "$T/rec.json")" "$G" "$T/emb.safetensors"
	run "embedded safetensors ok" 0 "$V" "$T/emb.safetensors"; out_has "embedded safetensors ok" "tensors: ok: 21 tensors match"
	run "hf for embedding" 0 "$Q" "$G" "$T/emb-hf/"
	cp "$T/rec.json" "$T/emb-hf/qtk-provenance.json"
	run "embedded hf ok" 0 "$V" "$T/emb-hf/"; out_has "embedded hf ok" "record in file qtk-provenance.json"
	out_has "embedded hf ok" "re-encoded with the same values"
	# a malformed embedded record is bad input (3), naming the record
	"$Q" --set 'qtk.provenance={"record_version":1,"record_version":1}' "$G" "$T/emb-bad.gguf" >/dev/null 2>&1
	run "embedded malformed" 3 "$V" "$T/emb-bad.gguf"; err_has "embedded malformed" "embedded record"
else
	bad "qconvert --set qtk.provenance"; sed 's/^/  /' "$T/err" | head -3
fi

# --- re-containering: content passes, "container changed"; --files then fails
run "to safetensors" 0 "$Q" "$G" "$T/a.safetensors"
run "record on safetensors" 0 "$V" --record "$T/rec.json" "$T/a.safetensors"
out_has "record on safetensors" "tensors: ok: 21 tensors match"; out_has "record on safetensors" "container changed"
run "record --files on safetensors" 1 "$V" --record "$T/rec.json" --files "$T/a.safetensors"
out_has "record --files on safetensors" "files: failed: container changed"
run "back to gguf" 0 "$Q" "$T/a.safetensors" "$T/b.gguf"
run "record on gguf -> safetensors -> gguf" 0 "$V" --record "$T/rec.json" "$T/b.gguf"
out_has "record on gguf -> safetensors -> gguf" "tensors: ok: 21 tensors match"
run "record --files on gguf -> safetensors -> gguf" 1 "$V" --record "$T/rec.json" --files "$T/b.gguf"
# GGUF -> HF directory: Q/K rows un-permuted, names mapped; the decoded tier still matches
run "to hf" 0 "$Q" "$G" "$T/hf/"
run "record on hf" 0 "$V" --record "$T/rec.json" "$T/hf/"
out_has "record on hf" "re-encoded with the same values"; out_has "record on hf" "permute_qk"
# a file renamed keeps its bytes: --files still passes
cp "$G" "$T/renamed.gguf"
run "renamed --files" 0 "$V" --record "$T/rec.json" --files "$T/renamed.gguf"

# --- QPK digests its own parts: a flipped byte is named even without a record (C.2 row 42)
run "to qpk" 0 "$Q" "$G" "$T/x.qpk"
run "qpk ok" 0 "$V" "$T/x.qpk"; out_has "qpk ok" "part_digests: ok"
run "record on qpk" 0 "$V" --record "$T/rec.json" "$T/x.qpk"
cp "$T/x.qpk" "$T/xf.qpk"
flip_byte "$T/xf.qpk" $(( $(size_of "$T/xf.qpk") / 2 ))
run "qpk flip" 1 "$V" "$T/xf.qpk"; out_has "qpk flip" "): changed: stored part digest"
run "qpk flip --record" 1 "$V" --record "$T/rec.json" "$T/xf.qpk"; out_has "qpk flip --record" "tensors: failed: 1 of 21"
run "qpk flip emit" 1 "$V" --emit-record "$T/xf.qpk"; out_lacks "qpk flip emit" "record_version"

# --- --against: exact, lossy, --max-error
run "to f16 gguf" 0 "$Q" "$H/" "$T/hf16.gguf"
run "against exact" 0 "$V" --against "$H/" "$T/hf16.gguf"; out_has "against exact" "21 exact, 0 lossy, 0 failing"
run "to q8_0" 0 "$Q" --to q8_0 --pure "$G" "$T/q8.gguf"
run "against lossy" 0 "$V" --against "$G" "$T/q8.gguf"; out_has "against lossy" "lossy: SQNR"
run "against max-error ok" 0 "$V" --against "$G" --max-error 20 "$T/q8.gguf"
run "against max-error fails" 1 "$V" --against "$G" --max-error 60 "$T/q8.gguf"
out_has "against max-error fails" "is below --max-error 60.00 dB"
run "against json" 1 "$V" --json --against "$G" --max-error 60 "$T/q8.gguf"; out_has "against json" '"sqnr_db":'
out_has "against json rmse" '"rmse":'
# bias = <file, source> / <source, source>: 1 for an exact tensor, near 1 and not 1 for a lossy one
if awk '/"status":/ { st = $2 } /"bias":/ { n++; v = $2 + 0; if (st ~ /exact/ && v != 1) bad++; if (st ~ /lossy|below/) { nl++; if (v == 1 || v < 0.99 || v > 1.01) bad++ } }
	END { exit !(n > 0 && nl > 0 && !bad) }' "$T/out"; then ok; else bad "against json bias"; fi
run "against exact json" 0 "$V" --json --against "$H/" "$T/hf16.gguf"
if grep -q '"bias":	1,\?$' "$T/out" && ! grep '"bias":' "$T/out" | grep -qv '"bias":	1,\?$'; then ok; else bad "against exact json bias"; fi
run "against lossy text" 0 "$V" -v --against "$G" "$T/q8.gguf"
if grep -q "bias 0\.99[0-9]*\|bias 1\.00[0-9]*" "$T/out" "$T/err"; then ok; else bad "against lossy text: no bias"; fi
run "against hf source max-error" 1 "$V" --against "$S/tiny-llama/" --max-error 45 "$T/q8.gguf"
out_has "against hf source max-error" "tensor 'model.layers.0.self_attn.q_proj.weight' (stored as 'blk.0.attn_q.weight'): below"

# --- malformed records: 3, naming the field
printf '{"record_version":1,"record_version":1}' >"$T/dup.json"
run "record duplicate keys" 3 "$V" --record "$T/dup.json" "$G"; err_has "record duplicate keys" "duplicate"
sed 's/"record_version":1/"record_version":2/' "$T/rec.json" >"$T/v2.json"
run "record version 2" 3 "$V" --record "$T/v2.json" "$G"; err_has "record version 2" "record_version"
sed 's/"container":"gguf"/"container":7/' "$T/rec.json" >"$T/type.json"
run "record wrong type" 3 "$V" --record "$T/type.json" "$G"; err_has "record wrong type" "output.container"
sed 's/"size":[0-9]*/"size":1e400/' "$T/rec.json" >"$T/huge.json"
run "record huge number" 3 "$V" --record "$T/huge.json" "$G"
printf 'not json' >"$T/junk.json"
run "record junk" 3 "$V" --record "$T/junk.json" "$G"
# a record whose root does not match its own tensor list is inconsistent (C.2 row 56)
root=$(sed -n 's/.*"tensor_root":{"count":21,"decoded":"[0-9a-f]*","encoded":"\([0-9a-f]\{64\}\)".*/\1/p' "$T/rec.json")
if [ -n "$root" ]; then
	first=$(printf %s "$root" | cut -c1)
	if [ "$first" = "0" ]; then repl=1; else repl=0; fi
	sed "s/\"encoded\":\"$root\"/\"encoded\":\"$repl$(printf %s "$root" | cut -c2-)\"/" "$T/rec.json" >"$T/incons.json"
	run "record inconsistent root" 3 "$V" --record "$T/incons.json" "$G"; err_has "record inconsistent root" "output.tensor_root.encoded"
else
	bad "could not find the tensor root in the record"
fi

# --- fixtures: llama.cpp's own HF -> GGUF conversion matches its source value for value
if [ -n "$FX" ]; then
	run "llama.cpp conversion against its source" 0 "$V" --against "$FX/hf/tiny-llama/fp16" "$FX/hf/tiny-llama/ref/llamacpp-from-hf-f16.gguf"
	out_has "llama.cpp conversion against its source" "21 exact, 0 lossy, 0 failing of 21 tensors"
	run "fixture split emit" 0 "$V" --emit-record "$FX/gguf/split-q4km/tiny-Q4_K_M-00001-of-00003.gguf"
	out_has "fixture split emit" "tiny-Q4_K_M-00003-of-00003.gguf"
	run "awq record" 0 "$V" --emit-record "$FX/hf/tiny-llama/awq-g128"; cp "$T/out" "$T/awq.json"
	if "$Q" --to gptq-v2 "$FX/hf/tiny-llama/awq-g128" "$T/gptq/" >/dev/null 2>&1; then
		run "awq -> gptq-v2 keeps the decoded tier" 0 "$V" --record "$T/awq.json" "$T/gptq/"
		out_has "awq -> gptq-v2 keeps the decoded tier" "re-encoded with the same values"
	else
		bad "qconvert awq -> gptq-v2"
	fi
else
	echo "skipped: fixtures absent (set QTK_FIXTURES or provide ../shared/fixtures)"
fi

# Copies hash the bytes they copy once, for the output and the source: the record's source
# roots and the output's leaves must still be the source's, as qverify computes them from the
# source itself (GGUF -> GGUF, GGUF -> QPK, safetensors -> GGUF: tensors copied verbatim).
if command -v python3 >/dev/null 2>&1; then
	"$Q" -q "$G" "$T/shared.gguf" >/dev/null 2>&1 || bad "copy for the shared-digest check"
	"$Q" -q "$G" "$T/shared.qpk" >/dev/null 2>&1 || bad "QPK for the shared-digest check"
	"$Q" -q "$T/shared.gguf" "$T/shared.safetensors" >/dev/null 2>&1 || bad "safetensors for the shared-digest check"
	"$Q" -q "$T/shared.safetensors" "$T/shared2.gguf" >/dev/null 2>&1 || bad "safetensors -> GGUF for the shared-digest check"
	for pair in "$G:$T/shared.gguf" "$G:$T/shared.qpk" "$T/shared.gguf:$T/shared.safetensors" "$T/shared.safetensors:$T/shared2.gguf"; do
		src=${pair%%:*}; dst=${pair#*:}
		"$V" --emit-record "$src" >"$T/src-rec.json" 2>/dev/null
		"$V" --emit-record "$dst" >"$T/dst-rec.json" 2>/dev/null
		if python3 - "$T/src-rec.json" "$T/dst-rec.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["output"]
d = json.load(open(sys.argv[2]))
rec = d["embedded"]
sr, rr = s["tensor_root"], rec["source"]["tensor_root"]
assert (sr["encoded"], sr["decoded"], sr["count"]) == (rr["encoded"], rr["decoded"], rr["count"]), "source roots"
st = {t["name"]: (t["encoded"], t["decoded"]) for t in s["tensors"]}
ot = {t["name"]: (t["encoded"], t["decoded"]) for t in rec["output"]["tensors"]}
got = {t["name"]: (t["encoded"], t["decoded"]) for t in d["output"]["tensors"]}
assert ot == got, "the record's output leaves are the file's"
same = [n for n in ot if st.get(n) == ot[n]]
assert same, "no tensor kept its leaves"
PY
		then ok; else bad "shared digests of $(basename "$src") -> $(basename "$dst") differ from the source's own"; fi
		run "qverify $(basename "$dst")" 0 "$V" "$dst"
	done
else
	echo "skipped: shared-digest checks (no python3)"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
