#!/bin/sh
# CLI tests: each case runs a command and checks its exit status, stdout and stderr.
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
T=$(mktemp -d /tmp/qtk-cli-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
FX=${QTK_FIXTURES:-../shared/fixtures}
[ -f "$FX/README.md" ] || FX=""

# outputs carry a provenance record with a time: fix it so byte comparisons hold
SOURCE_DATE_EPOCH=1700000000; export SOURCE_DATE_EPOCH

ok() { pass=$((pass + 1)); }
# same_tail A B N: the last N bytes (a container's tensor data) are identical
same_tail() { [ "$(tail -c "$3" "$1" | sha256sum)" = "$(tail -c "$3" "$2" | sha256sum)" ]; }
# json_sans_prov FILE: qinspect --json without the file name and the provenance record
json_sans_prov() { "$BIN/qinspect" --json "$1" | sed -e '/"provenance":/,$d' | grep -v -e '"file":' -e "$2"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# run NAME EXPECTED_STATUS CMD...: stdout in $T/out, stderr in $T/err
run() {
	name=$1; want=$2; shift 2
	"$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" -eq "$want" ]; then ok; else bad "$name: exit $got, expected $want"; sed 's/^/  stderr: /' "$T/err" | head -5; fi
}
out_has() { if grep -q -- "$2" "$T/out"; then ok; else bad "$1: stdout lacks '$2'"; head -5 "$T/out"; fi; }
err_has() { if grep -q -- "$2" "$T/err"; then ok; else bad "$1: stderr lacks '$2'"; head -5 "$T/err"; fi; }
no_file() { if [ ! -e "$2" ]; then ok; else bad "$1: '$2' exists"; fi; }
no_temps() { n=$(find "$2" -name '.*.qtk-*' | wc -l); if [ "$n" -eq 0 ]; then ok; else bad "$1: $n temporaries left"; fi; }

S=$T/samples
"$B/samples/gen" "$S" >/dev/null || bad "sample generator"
G=$S/tiny-llama-f32.gguf
H=$S/tiny-llama

# --- the generator is deterministic
"$B/samples/gen" "$T/again" >/dev/null
if cmp -s "$G" "$T/again/tiny-llama-f32.gguf" && cmp -s "$H/model.safetensors" "$T/again/tiny-llama/model.safetensors"; then ok; else bad "generator not deterministic"; fi

# --- common flags, for all three programs
for p in qconvert qinspect qverify; do
	run "$p --help" 0 "$BIN/$p" --help; out_has "$p --help" "usage: $p"
	run "$p --version" 0 "$BIN/$p" --version; out_has "$p --version" "(qtk)"
	run "$p unknown flag" 2 "$BIN/$p" --bogus x; err_has "$p unknown flag" "unknown option '--bogus'"
done
run "qconvert one arg" 2 "$BIN/qconvert" "$G"
run "qconvert bad layout" 2 "$BIN/qconvert" "$G" "$T/x.gguf" --to q9_9
err_has "qconvert bad layout" "unknown layout 'q9_9'"
run "qconvert bad output kind" 2 "$BIN/qconvert" "$G" "$T/x.bin"

# --- exit codes: missing file 4, bad data 3, message names file and offset
run "qinspect missing" 4 "$BIN/qinspect" "$T/nope.gguf"; err_has "qinspect missing" "qinspect: $T/nope.gguf: error: cannot open"
printf 'GGUF\003\000\000\000\377\377\377\377\377\377\377\377\000\000\000\000\000\000\000\000' >"$T/hostile.gguf"
run "qinspect hostile" 3 "$BIN/qinspect" --json "$T/hostile.gguf"
err_has "qinspect hostile" "qinspect: $T/hostile.gguf:0x8: error: tensor count"
run "qverify hostile" 3 "$BIN/qverify" "$T/hostile.gguf"
run "qconvert hostile" 3 "$BIN/qconvert" "$T/hostile.gguf" "$T/h-out.gguf"
no_file "qconvert hostile" "$T/h-out.gguf"
printf 'not a model at all' >"$T/junk.bin"
run "qinspect junk" 3 "$BIN/qinspect" "$T/junk.bin"; err_has "qinspect junk" "unknown format"
run "qinspect dir" 3 "$BIN/qinspect" "$T"

# --- qinspect reports on the samples
run "qinspect summary" 0 "$BIN/qinspect" --summary "$G"
out_has "qinspect summary" "blk.0.attn_q.weight"; out_has "qinspect summary" "total: 21 tensors, 1836288 params"
run "qinspect default (not a tty)" 0 "$BIN/qinspect" "$G"; out_has "qinspect default" "total: 21 tensors"
run "qinspect json" 0 "$BIN/qinspect" --json "$G"
out_has "qinspect json" '"schema_version":	1'; out_has "qinspect json" '"format":	"gguf"'
out_has "qinspect json" '"format_version":	3'; out_has "qinspect json" '"bits_per_weight":	32'
out_has "qinspect json" '"general.architecture":	"llama"'
cp "$T/out" "$T/j1"; "$BIN/qinspect" --json "$G" >"$T/j2"
if cmp -s "$T/j1" "$T/j2"; then ok; else bad "qinspect --json not deterministic"; fi
run "qinspect markdown" 0 "$BIN/qinspect" --markdown "$G"; out_has "qinspect markdown" "| F32 | 21 | 1836288 |"
run "qinspect hf dir" 0 "$BIN/qinspect" --json "$H"; out_has "qinspect hf" '"format":	"hf"'; out_has "qinspect hf" '"model_type":	"llama"'
run "qinspect stats without json" 2 "$BIN/qinspect" --stats "$G"
run "qverify sample" 0 "$BIN/qverify" "$G"; out_has "qverify sample" "ok: gguf, 21 tensors"

run "qinspect --tensor" 0 "$BIN/qinspect" --tensor blk.0.attn_q.weight "$G"; out_has "qinspect --tensor" "beyond 3 sigma"
run "qinspect --tensor missing" 2 "$BIN/qinspect" --tensor nope "$G"; err_has "qinspect --tensor missing" "tensor 'nope': no such tensor"
run "qinspect --json --stats" 0 "$BIN/qinspect" --json --stats "$G"; out_has "qinspect --json --stats" '"outliers_3sigma":'
run "qinspect --memory" 0 "$BIN/qinspect" --memory --ctx 8192 --kv-type q8_0 "$G"; out_has "qinspect --memory" "KV q8_0"
run "qinspect --memory --json (dense)" 0 "$BIN/qinspect" --memory --json "$G"
out_has "memory json dense: active = total" '"params_active":	1836288'; out_has "memory json dense" '"experts":	null'
run "qinspect --diff" 0 "$BIN/qinspect" --diff "$H" "$G"; out_has "qinspect --diff" "21 by GGUF<->HF name, 4 with Q/K rows un-permuted"

# --- qconvert between containers and float types
run "gguf f32 -> f16" 0 "$BIN/qconvert" "$G" "$T/f16.gguf" --to f16
out_has "gguf f32 -> f16" "sha256:"
# the summary's SHA-256 is the file's as committed (after the record's patch), for GGUF, QPK and
# an HF directory; --quiet prints no summary and skips the files' hashes, not one byte
for k in "gguf q8_0" "qpk q4_k" "awq awq"; do
	set -- $k
	o="$T/hq.$1"; [ "$1" = awq ] && o="$T/hq-awq/"
	run "summary sha256 ($1)" 0 env SOURCE_DATE_EPOCH=1700000000 "$BIN/qconvert" "$G" "$o" --to "$2"
	f="$o"; [ "$1" = awq ] && f="$o/model.safetensors"
	out_has "summary sha256 ($1) is the file's" "sha256:$(sha256sum "$f" | cut -d' ' -f1)"
	mv "$f" "$T/hq.first"
	rm -rf "$o"
	SOURCE_DATE_EPOCH=1700000000 "$BIN/qconvert" -q "$G" "$o" --to "$2" >"$T/out" 2>&1
	if cmp -s "$f" "$T/hq.first" && [ ! -s "$T/out" ]; then ok; else bad "--quiet ($1): other bytes, or output"; fi
	rm -rf "$o" "$T/hq.first"
done
"$BIN/qinspect" --json "$T/f16.gguf" >"$T/out"
out_has "f16 output: matrices f16" '"type":	"F16"'; out_has "f16 output: norms stay f32" '"layout":	"f32"'
out_has "f16 output: file_type" '"general.file_type":	1'
run "gguf f16 -> f32" 0 "$BIN/qconvert" "$T/f16.gguf" "$T/back.gguf" --to f32
out_has "f16 -> f32 exact" "21 exact, 0 requantized"
run "gguf -> gguf keep" 0 "$BIN/qconvert" -q "$G" "$T/same.gguf"
if same_tail "$G" "$T/same.gguf" 7345152 && [ "$(json_sans_prov "$G" qtk.provenance)" = "$(json_sans_prov "$T/same.gguf" qtk.provenance)" ]; then ok; else bad "gguf -> gguf changed tensors or metadata"; fi
run "gguf -> gguf has a record" 0 "$BIN/qverify" "$T/same.gguf"; out_has "record verifies" "tensors: ok: 21 tensors match"
run "gguf -> gguf exact against the source" 0 "$BIN/qverify" --against "$G" "$T/same.gguf"
run "--exact fails on a lossy conversion" 1 "$BIN/qconvert" --exact "$G" "$T/lossy.gguf" --to bf16
err_has "--exact" "the first that does not convert exactly"; err_has "--exact" "not exact: token_embd.weight"
no_file "--exact leaves no output" "$T/lossy.gguf"
run "--max-error fails" 1 "$BIN/qconvert" --max-error 200 "$G" "$T/lossy.gguf" --to f16
no_file "--max-error leaves no output" "$T/lossy.gguf"
run "--max-error passes" 0 "$BIN/qconvert" -q --max-error 30 "$G" "$T/ok16.gguf" --to f16
run "--report" 0 "$BIN/qconvert" -q --report "$T/rep.json" "$G" "$T/r16.gguf" --to f16
if grep -q '"sqnr_db":' "$T/rep.json" && grep -q '"n_requantized":' "$T/rep.json"; then ok; else bad "--report content"; fi
# bias = <out, src> / <src, src> per tensor: exactly 1 where the output is exact, below 1 (the fit
# shrinks the weights) somewhere in a 2-bit conversion, and never far from 1
# bias_check REPORT: prints "n_tensors n_bias n_exact_not_1 n_lossy min_lossy max_lossy"
bias_check() {
	awk '/"exact":/ { ex = ($2 ~ /true/) } /"rmse":/ { nt++ }
	     /"bias":/ { nb++; v = $2 + 0; if (ex && v != 1) bad1++; if (!ex) { nl++; if (nl == 1 || v < mn) mn = v; if (nl == 1 || v > mx) mx = v } }
	     END { printf "%d %d %d %d %.6f %.6f\n", nt, nb, bad1, nl, mn, mx }' "$1"
}
run "--report exact" 0 "$BIN/qconvert" -q --report "$T/rep-x.json" "$G" "$T/rx.gguf" --to f32
set -- $(bias_check "$T/rep-x.json")
if [ "$1" -eq 21 ] && [ "$2" -eq 21 ] && [ "$3" -eq 0 ] && [ "$4" -eq 0 ]; then ok; else bad "--report bias (exact): $*"; fi
run "--report lossy" 0 "$BIN/qconvert" -q --report "$T/rep-l.json" "$G" "$T/rl.gguf" --to q2_k --pure
set -- $(bias_check "$T/rep-l.json")
if [ "$1" -eq "$2" ] && [ "$3" -eq 0 ] && [ "$4" -gt 0 ] &&
	awk -v a="$5" -v b="$6" 'BEGIN { exit !(a < 1 && a > 0.8 && b < 1.2) }'; then ok; else bad "--report bias (q2_k): $*"; fi
run "summary names the bias" 0 "$BIN/qconvert" "$G" "$T/rl2.gguf" --to q2_k --pure
out_has "summary names the bias" "bias farthest from 1: 0\.[0-9]* (blk\."
run "--dry-run" 0 "$BIN/qconvert" --dry-run "$G" "$T/dry.gguf" --to f16
out_has "--dry-run plan line" "blk.0.attn_q.weight  \[256, 256\]  f32 -> f16"
out_has "--dry-run total" "plan: 21 tensors"
no_file "--dry-run writes nothing" "$T/dry.gguf"
run "--set" 0 "$BIN/qconvert" -q "$G" "$T/set.gguf" --set general.name=renamed --set llama.context_length=512 --set my.key=hello
"$BIN/qinspect" --json "$T/set.gguf" >"$T/out"
out_has "--set string" '"general.name":	"renamed"'; out_has "--set keeps u32" '"llama.context_length":	512'
out_has "--set new key" '"my.key":	"hello"'
run "--set bad int" 2 "$BIN/qconvert" "$G" "$T/bad.gguf" --set llama.context_length=abc
no_file "--set bad int" "$T/bad.gguf"
run "hf -> safetensors" 0 "$BIN/qconvert" -q "$H" "$T/one.safetensors"
run "safetensors -> gguf" 0 "$BIN/qconvert" -q "$T/one.safetensors" "$T/st.gguf" --to f32
run "gguf -> safetensors" 0 "$BIN/qconvert" -q "$T/st.gguf" "$T/back.safetensors" --to f16
# tensor data (the file's tail) must come back bit for bit; metadata gains general.file_type
if [ "$(tail -c 3672576 "$T/one.safetensors" | sha256sum)" = "$(tail -c 3672576 "$T/back.safetensors" | sha256sum)" ]; then ok; else bad "safetensors -> gguf f32 -> safetensors f16: tensor data differs"; fi
run "safetensors -> hf dir" 0 "$BIN/qconvert" -q "$T/one.safetensors" "$T/hfout/"
if [ -f "$T/hfout/model.safetensors" ]; then ok; else bad "hf dir output lacks model.safetensors"; fi
run "hf dir -> hf dir" 0 "$BIN/qconvert" -q "$H" "$T/hf2/"
if cmp -s "$H/config.json" "$T/hf2/config.json"; then ok; else bad "config.json not carried"; fi
run "unwritable output" 4 "$BIN/qconvert" "$G" "$T/no/such/dir/x.gguf"
err_has "unwritable output" "cannot create output"
no_temps "no temporaries" "$T"

# --- quantization: determinism, mixes, layouts
run "q4_k 1 thread" 0 "$BIN/qconvert" -q --threads 1 "$G" "$T/q4k-1.gguf" --to q4_k --pure
run "q4_k 2 threads" 0 "$BIN/qconvert" -q --threads 2 "$G" "$T/q4k-2.gguf" --to q4_k --pure
if cmp -s "$T/q4k-1.gguf" "$T/q4k-2.gguf"; then ok; else bad "q4_k output depends on the thread count"; fi
run "Q4_K_M 1 thread" 0 "$BIN/qconvert" -q --threads 1 "$G" "$T/m1.gguf" --to Q4_K_M
run "Q4_K_M 3 threads" 0 "$BIN/qconvert" -q --threads 3 "$G" "$T/m3.gguf" --to Q4_K_M
if cmp -s "$T/m1.gguf" "$T/m3.gguf"; then ok; else bad "Q4_K_M output depends on the thread count"; fi
"$BIN/qinspect" --json "$T/m1.gguf" >"$T/out"
out_has "Q4_K_M has q6_k output" '"layout":	"ggml:q6_k"'; out_has "Q4_K_M file_type" '"general.file_type":	15'
out_has "quantization_version" '"general.quantization_version":	2'
for ty in q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q5_k q6_k iq4_nl iq4_xs; do
	run "--to $ty" 0 "$BIN/qconvert" -q "$G" "$T/$ty.gguf" --to $ty
done
run "awq 1 thread" 0 "$BIN/qconvert" -q --threads 1 "$H" "$T/awq-t1/" --to awq
run "awq 2 threads" 0 "$BIN/qconvert" -q --threads 2 "$H" "$T/awq-t2/" --to awq
if cmp -s "$T/awq-t1/model.safetensors" "$T/awq-t2/model.safetensors"; then ok; else bad "awq output depends on the thread count"; fi
run "gptq 3-bit 1 thread" 0 "$BIN/qconvert" -q --threads 1 "$H" "$T/g3-t1.safetensors" --to gptq --bits 3
run "gptq 3-bit 3 threads" 0 "$BIN/qconvert" -q --threads 3 "$H" "$T/g3-t3.safetensors" --to gptq --bits 3
if cmp -s "$T/g3-t1.safetensors" "$T/g3-t3.safetensors"; then ok; else bad "gptq output depends on the thread count"; fi
run "Q4_K_M -> awq dir (the mission's example)" 0 "$BIN/qconvert" -q "$T/m1.gguf" "$T/awq/" --to awq
"$BIN/qinspect" --json "$T/awq" >"$T/out"
out_has "awq dir: HF names" '"name":	"model.layers.0.self_attn.q_proj.weight"'; out_has "awq dir: awq layout" '"layout":	"awq"'
if grep -q '"quant_method":[[:space:]]*"awq"' "$T/awq/config.json"; then ok; else bad "awq config.json lacks quant_method awq"; fi
run "awq -> gptq repack exact" 0 "$BIN/qconvert" -q --exact "$T/awq/" "$T/gptq/" --to gptq
run "gptq -> awq repack exact" 0 "$BIN/qconvert" -q --exact "$T/gptq/" "$T/awq2/" --to awq
if cmp -s "$T/awq/model.safetensors" "$T/awq2/model.safetensors"; then ok; else bad "awq -> gptq -> awq is not byte-identical"; fi
# the repacks above stream bands of input rows; the windowed path (QTK_REPACK=windows) writes the
# same bytes and the same record (its decoded leaves hashed from the check, not the source's)
for to in gptq gptq-v1 gptq-v2; do
	run "awq -> $to streamed" 0 env SOURCE_DATE_EPOCH=1 "$BIN/qconvert" -v --threads 2 "$T/awq/" "$T/rs-$to/" --to $to
	err_has "awq -> $to streamed in bands" "repacked awq -> gptq in bands of"
	run "awq -> $to windowed" 0 env SOURCE_DATE_EPOCH=1 QTK_REPACK=windows "$BIN/qconvert" -q --threads 2 "$T/awq/" "$T/rw-$to/" --to $to
	if cmp -s "$T/rs-$to/model.safetensors" "$T/rw-$to/model.safetensors"; then ok; else bad "awq -> $to: streamed and windowed repacks differ"; fi
	run "$to -> awq streamed" 0 env SOURCE_DATE_EPOCH=1 "$BIN/qconvert" -v "$T/rs-$to/" "$T/rb-$to/" --to awq
	err_has "$to -> awq streamed in bands" "repacked gptq -> awq in bands of"
	# v1 cannot hold this model's zeros of 0: those layers go the windowed way, wrapped (lossy)
	[ $to = gptq-v1 ] || if cmp -s "$T/awq/model.safetensors" "$T/rb-$to/model.safetensors"; then ok; else bad "awq -> $to -> awq (streamed) is not byte-identical"; fi
	run "$to record verifies" 0 "$BIN/qverify" "$T/rs-$to/"
done
run "awq -> auto-exact gguf" 0 "$BIN/qconvert" -q --exact "$T/awq/" "$T/ae.gguf" --to auto-exact
run "awq -> gguf keep refused" 2 "$BIN/qconvert" "$T/awq/" "$T/no.gguf"
err_has "awq -> gguf keep" "GGUF has no layout for awq layers"
run "gguf cannot hold awq" 2 "$BIN/qconvert" "$G" "$T/no.gguf" --to awq
run "hf -> gguf" 0 "$BIN/qconvert" -q "$H" "$T/hf.gguf"
"$BIN/qinspect" --json "$T/hf.gguf" >"$T/out"
out_has "hf -> gguf names" '"name":	"blk.0.attn_q.weight"'; out_has "hf -> gguf arch" '"general.architecture":	"llama"'
run "gguf -> hf" 0 "$BIN/qconvert" -q "$T/hf.gguf" "$T/hfback/"
if cmp -s "$H/model.safetensors" "$T/hfback/model.safetensors"; then ok; else bad "HF -> GGUF -> HF does not return the original safetensors"; fi
run "gguf q/k permutation matches the generator's" 0 "$BIN/qconvert" -q "$T/hf.gguf" "$T/hf32.gguf" --to f32
run "--names bad" 2 "$BIN/qconvert" "$G" "$T/x.gguf" --names foo

# --- archives and .zst files (formats/archive_read.c, formats/archive_write.c, formats/zst.c)
tar -C "$S" -cf "$T/bundle.tar" tiny-llama-f32.gguf
run "qinspect bundle.tar" 0 "$BIN/qinspect" --summary "$T/bundle.tar"
out_has "qinspect bundle.tar" "total: 21 tensors, 1836288 params"
run "qverify bundle.tar" 0 "$BIN/qverify" "$T/bundle.tar"
tar -C "$S" -czf "$T/hf.tar.gz" tiny-llama
run "qinspect hf tar.gz" 0 "$BIN/qinspect" --json "$T/hf.tar.gz"; out_has "qinspect hf tar.gz" '"format":	"hf"'
if command -v zstd >/dev/null 2>&1; then
	tar -C "$S" -cf - tiny-llama | zstd -q -o "$T/model.tar.zst"
	run "qconvert tar.zst" 0 "$BIN/qconvert" "$T/model.tar.zst" "$T/from-tzst.gguf"
	run "qinspect from tar.zst" 0 "$BIN/qinspect" --summary "$T/from-tzst.gguf"
	out_has "qinspect from tar.zst" "total: 21 tensors, 1836288 params"
	zstd -q -c "$G" >"$T/g.gguf.zst"
	run "qinspect .zst" 0 "$BIN/qinspect" --summary "$T/g.gguf.zst"; out_has "qinspect .zst" "total: 21 tensors"
	head -c 3000 "$T/g.gguf.zst" >"$T/cut.gguf.zst"
	run "qinspect truncated .zst" 3 "$BIN/qinspect" "$T/cut.gguf.zst"; err_has "truncated .zst" "truncated zstd stream"
else
	echo "skipped: zstd command missing (tar.zst and .zst CLI cases)"
fi
ln -s /etc/passwd "$T/evil.gguf" && tar -C "$T" -cf "$T/evil.tar" evil.gguf
run "qinspect symlink in tar" 3 "$BIN/qinspect" "$T/evil.tar"
err_has "qinspect symlink in tar" "qinspect: $T/evil.tar: error: member 'evil.gguf': symbolic link refused"
run "qconvert symlink in tar" 3 "$BIN/qconvert" "$T/evil.tar" "$T/evil-out.gguf"; no_file "qconvert symlink in tar" "$T/evil-out.gguf"
rm -f "$T/evil.gguf"
run "qconvert gguf bundle" 0 "$BIN/qconvert" "$G" "$T/bundle-out.tar"
run "qinspect gguf bundle" 0 "$BIN/qinspect" --summary "$T/bundle-out.tar"
out_has "qinspect gguf bundle" "total: 21 tensors, 1836288 params"
run "qconvert hf bundle" 0 "$BIN/qconvert" "$H" "$T/hf-bundle.zip"
run "qinspect hf bundle" 0 "$BIN/qinspect" --json "$T/hf-bundle.zip"; out_has "qinspect hf bundle" '"format":	"hf"'
run "qconvert q8_0 bundle" 0 "$BIN/qconvert" "$H" "$T/q8-bundle.tar.zst" --to q8_0 --pure
run "qverify q8_0 bundle" 0 "$BIN/qverify" "$T/q8-bundle.tar.zst"
out_has "bundle record verifies" "tensors: ok: 21 tensors match"
run "qverify gguf bundle" 0 "$BIN/qverify" "$T/bundle-out.tar"
if tar -xOf "$T/bundle-out.tar" qtk-provenance.json | grep -q '"tensor_root"' && ! tar -xOf "$T/bundle-out.tar" qtk-provenance.json | grep -q '~~~~'; then ok; else bad "bundle qtk-provenance.json is not the final record"; fi
no_temps "bundle temporaries" "$T"

# --- sharded outputs
run "gguf split" 0 "$BIN/qconvert" -q "$G" "$T/sp.gguf" --split-max-size 3M
if [ -f "$T/sp-00001-of-00003.gguf" ] && [ -f "$T/sp-00003-of-00003.gguf" ] && [ ! -e "$T/sp.gguf" ]; then ok; else bad "gguf split: expected 3 shards"; ls "$T" | grep sp; fi
run "gguf split -> whole" 0 "$BIN/qconvert" -q "$T/sp-00002-of-00003.gguf" "$T/sp-whole.gguf"
if same_tail "$G" "$T/sp-whole.gguf" 7345152; then ok; else bad "split set -> single file differs from the source"; fi
"$BIN/qinspect" --json "$T/sp-00001-of-00003.gguf" >"$T/out"; out_has "split shard 1 has the model keys" '"general.architecture":	"llama"'
run "hf shards" 0 "$BIN/qconvert" -q "$H" "$T/shards/" --split-max-size 1M
if [ -f "$T/shards/model.safetensors.index.json" ] && [ -f "$T/shards/model-00001-of-00005.safetensors" ]; then ok; else bad "hf shards: no index"; ls "$T/shards"; fi
run "hf shards -> one file" 0 "$BIN/qconvert" -q "$T/shards/" "$T/unshard.safetensors"
run "hf -> one file" 0 "$BIN/qconvert" -q "$H" "$T/one2.safetensors"
if same_tail "$T/unshard.safetensors" "$T/one2.safetensors" 3672576; then ok; else bad "re-sharding changed the tensors"; fi
run "bad split size" 2 "$BIN/qconvert" "$G" "$T/x.gguf" --split-max-size 12Q

# --- no output may replace an input: exit 2 naming both, the input untouched, nothing written
cp "$G" "$T/self.gguf"; ln -s "$T/self.gguf" "$T/self-link.gguf"
s0=$(sha256sum <"$T/self.gguf")
run "output is the input" 2 "$BIN/qconvert" "$T/self.gguf" "$T/self.gguf" --to q8_0
err_has "output is the input" "the output '$T/self.gguf' is the input '$T/self.gguf'"
run "output is a link to the input" 2 "$BIN/qconvert" "$T/self.gguf" "$T/self-link.gguf" --to q8_0
run "--report is the input" 2 "$BIN/qconvert" "$T/self.gguf" "$T/self-out.gguf" --report "$T/self.gguf"
err_has "--report is the input" "the report '$T/self.gguf' is the input"; no_file "--report is the input" "$T/self-out.gguf"
run "--report is the output" 2 "$BIN/qconvert" "$T/self.gguf" "$T/self-out.gguf" --report "$T/self-out.gguf"
# a report inside an output directory would go when the directory is replaced: refused, whether
# the directory exists or not
run "--report in the output directory (new)" 2 "$BIN/qconvert" "$T/self.gguf" "$T/rdir/" --report "$T/rdir/r.json"
err_has "--report in the output directory (new)" "would be inside the output directory"; no_file "--report in the output directory (new)" "$T/rdir"
run "HF output for the report check" 0 "$BIN/qconvert" -q "$T/self.gguf" "$T/rdir/"
run "--report in the output directory (existing)" 2 "$BIN/qconvert" --force "$T/self.gguf" "$T/rdir/" --report "$T/rdir/sub/../r.json"
err_has "--report in the output directory (existing)" "would be inside the output directory"
# a report that cannot be written fails before the conversion (exit 4), leaving no output
run "--report in a missing directory" 4 "$BIN/qconvert" "$T/self.gguf" "$T/rep-out.gguf" --report "$T/no-such-dir/r.json"
err_has "--report in a missing directory" "its directory '$T/no-such-dir' does not exist"; no_file "--report in a missing directory" "$T/rep-out.gguf"
if [ "$(sha256sum <"$T/self.gguf")" = "$s0" ]; then ok; else bad "an input was changed"; fi
s1=$(cat "$T"/sp-0000?-of-00003.gguf | sha256sum)
run "output is a shard of the input's set" 2 "$BIN/qconvert" "$T/sp-00002-of-00003.gguf" "$T/sp-00001-of-00003.gguf" --to q8_0
err_has "output is a shard of the input's set" "is the input '$T/sp-00001-of-00003.gguf'"
run "split output over the input's set" 2 "$BIN/qconvert" "$T/sp-00002-of-00003.gguf" "$T/sp.gguf" --split-max-size 2M
err_has "split output over the input's set" "would be split into shards named like the input"
run "--report is a shard of the input's set" 2 "$BIN/qconvert" "$T/sp-00001-of-00003.gguf" "$T/x.gguf" --report "$T/sp-00003-of-00003.gguf"
if [ "$(cat "$T"/sp-0000?-of-00003.gguf | sha256sum)" = "$s1" ]; then ok; else bad "the split set was changed"; fi
mkdir -p "$T/selfdir" && cp "$H"/* "$T/selfdir/"
run "HF output is the input directory" 2 "$BIN/qconvert" "$T/selfdir" "$T/selfdir/" --to f16
err_has "HF output is the input directory" "the output directory '$T/selfdir/' holds the input"
run "HF output holds the input" 2 "$BIN/qconvert" "$T/selfdir/model.safetensors" "$T/" --to f16
run "output is an input file of a directory" 2 "$BIN/qconvert" "$T/selfdir" "$T/selfdir/model.safetensors"
if cmp -s "$H/model.safetensors" "$T/selfdir/model.safetensors"; then ok; else bad "the input directory was changed"; fi

# --- man pages are clean mdoc
if command -v mandoc >/dev/null 2>&1; then
	if mandoc -Tlint -W warning man/*.1 >"$T/lint" 2>&1; then ok; else bad "mandoc -Tlint"; cat "$T/lint"; fi
else
	echo "skipped: mandoc absent (man page lint)"
fi

# --- qconvert writes no GGUF qtk would refuse: --set values that break the reader's rules are exit 2
for kv in general.alignment=64 split.count=5 tokenizer.ggml.bos_token_id=999999 llama.block_count=100000 \
	tokenizer.ggml.tokens=abc "$(printf 'ev\033[1mil=1')"; do
	run "--set ${kv%%=*} refused" 2 "$BIN/qconvert" "$G" "$T/set-bad.gguf" --set "$kv"; no_file "--set ${kv%%=*}" "$T/set-bad.gguf"
done
err_has "--set key with ESC" 'ev\\x1b\[1mil: --set: a GGUF key is printable ASCII'
run "--set a fine key" 0 "$BIN/qconvert" -q "$G" "$T/set-ok.gguf" --set general.name=fine
run "--set a fine key verifies" 0 "$BIN/qverify" "$T/set-ok.gguf"

# --- side files: only the known ones are carried; code, pickles and other names only with --carry
mkdir -p "$T/evil" && cp "$H"/* "$T/evil/"
echo 'import os' >"$T/evil/modeling_evil.py"; echo 'rm -rf ~' >"$T/evil/run.sh"; echo pickle >"$T/evil/pytorch_model.bin"
sed 's/^{/{"auto_map": {"AutoModelForCausalLM": "modeling_evil.EvilModel"},/' "$H/config.json" >"$T/evil/config.json"
run "--carry into a QPK" 0 "$BIN/qconvert" "$T/evil" "$T/evil.qpk" --carry modeling_evil.py --carry run.sh --carry pytorch_model.bin
err_has "--carry reported" "note: carrying side file 'modeling_evil.py' (asked for with --carry): code or a pickle"
err_has "--carry keeps auto_map" "auto_map kept"
run "QPK side files not carried" 0 "$BIN/qconvert" "$T/evil.qpk" "$T/evil-hf/"
err_has "QPK side files not carried" "side file 'modeling_evil.py' not carried: code or a pickle"
err_has "QPK side files not carried: run.sh" "side file 'run.sh' not carried: not a known side file"
err_has "auto_map dropped" "config.json: auto_map dropped: it names modeling_evil.py"
for f in modeling_evil.py run.sh pytorch_model.bin; do no_file "not carried: $f" "$T/evil-hf/$f"; done
if grep -q auto_map "$T/evil-hf/config.json"; then bad "auto_map left in config.json"; else ok; fi
for o in tar zip; do
	run "QPK side files not carried: .$o" 0 "$BIN/qconvert" -q "$T/evil.qpk" "$T/evil.$o"
	case $o in tar) list="tar -tf" ;; zip) list="unzip -Z1" ;; esac
	if ! command -v ${list%% *} >/dev/null 2>&1; then echo "skipped: ${list%% *} absent (evil.$o listing)"
	elif $list "$T/evil.$o" >"$T/list" && grep -q config.json "$T/list" && ! grep -Eq '\.(py|sh|bin)$' "$T/list"; then ok
	else bad "evil.$o carries code"; cat "$T/list"; fi
done
run "HF side files not carried" 0 "$BIN/qconvert" "$T/evil" "$T/evil-hf2/"
no_file "HF: not carried" "$T/evil-hf2/modeling_evil.py"
run "--carry from a QPK" 0 "$BIN/qconvert" "$T/evil.qpk" "$T/evil-hf3/" --carry modeling_evil.py
if [ -f "$T/evil-hf3/modeling_evil.py" ] && grep -q auto_map "$T/evil-hf3/config.json" && [ ! -e "$T/evil-hf3/run.sh" ]; then ok
else bad "--carry modeling_evil.py from a QPK"; ls "$T/evil-hf3"; fi
run "--carry absent" 2 "$BIN/qconvert" "$T/evil" "$T/evil2.qpk" --carry nope.py
err_has "--carry absent" "carry nope.py: no such side file"
run "--carry a path" 2 "$BIN/qconvert" "$T/evil" "$T/evil2.qpk" --carry ../x.py

# --- untrusted names never reach the terminal raw (one sanitiser, src/text.c)
# mkst FILE NAME: a safetensors file with one F32 [2, 32] tensor; NAME is JSON string text
mkst() {
	h="{\"$2\":{\"dtype\":\"F32\",\"shape\":[2,32],\"data_offsets\":[0,$3]}}"
	n=$(printf '%s' "$h" | wc -c)
	{ printf "\\$(printf %03o "$n")\\000\\000\\000\\000\\000\\000\\000"; printf '%s' "$h"; head -c 256 /dev/zero | tr '\000' '\077'; } >"$1"
}
# inert NAME: no ESC, CR, BEL or 8-bit CSI byte in stdout or stderr
inert() {
	for f in "$T/out" "$T/err"; do
		if [ "$(tr -d '\033\015\007\233' <"$f" | wc -c)" -eq "$(wc -c <"$f")" ]; then ok; else bad "$1: raw control bytes in ${f##*/}"; fi
		# UTF-8-encoded C1 controls and bidi controls (U+0080-009F, U+200E/F, U+202A-202E, U+2066-2069, U+061C)
		if LC_ALL=C grep -q "$U8CTL" "$f"; then bad "$1: UTF-8 C1 or bidi control in ${f##*/}"; else ok; fi
	done
}
U8CTL=$(printf '\302[\200-\237]\\|\342\200[\216\217\252-\256]\\|\342\201[\246-\251]\\|\330\234')
mkst "$T/esc.safetensors" '\u001b[31mRED' 256
mkst "$T/spoof.safetensors" 'blk.0.x\r\u001b[2Kspoof.gguf: ok\u001b[8m.weight' 256
mkst "$T/bidi.safetensors" 'a\u202eb\u009bc\u0007.weight' 256
mkst "$T/md.safetensors" 'a|b`<img src=x>[l](http://e)' 256
mkst "$T/short.safetensors" '\u001b[31mRED' 512
mkst "$T/osc.safetensors" 'a\u001b]0;pwned\u0007b\u2066c\u061cd.weight' 256
for m in "" --summary --markdown --json; do
	run "escaped name: qinspect $m" 0 "$BIN/qinspect" $m "$T/esc.safetensors"; inert "escaped name: qinspect $m"
done
run "escaped name: qinspect text" 0 "$BIN/qinspect" --summary "$T/esc.safetensors"; out_has "escaped name: shown" '^\\x1b\[31mRED  '
run "escaped name: qinspect json" 0 "$BIN/qinspect" --json "$T/esc.safetensors"; out_has "escaped name: json" '"\\u001b\[31mRED"'
run "escaped name: qinspect --tensor" 0 "$BIN/qinspect" --tensor "$(printf '\033[31mRED')" "$T/esc.safetensors"
inert "escaped name: qinspect --tensor"; out_has "escaped name: --tensor" '^tensor \\x1b\[31mRED$'
run "escaped name: bidi and C1" 0 "$BIN/qinspect" --summary "$T/bidi.safetensors"; inert "escaped name: bidi and C1"
out_has "escaped name: bidi and C1" 'a\\u{202e}b\\u{9b}c\\x07.weight'
run "escaped name: markdown" 0 "$BIN/qinspect" --markdown "$T/md.safetensors"
out_has "escaped name: markdown cell" '^| `a\\|b\\x60<img src=x>\[l\](http://e)` | \[2, 32\] |'
run "escaped name: reader error" 3 "$BIN/qinspect" "$T/short.safetensors"; inert "escaped name: reader error"
err_has "escaped name: reader error" "error: tensor '\\\\x1b\[31mRED'"
run "escaped name: qconvert error" 3 "$BIN/qconvert" "$T/short.safetensors" "$T/short.gguf"; inert "escaped name: qconvert error"
run "escaped name: qverify" 0 "$BIN/qverify" -v "$T/spoof.safetensors"; inert "escaped name: qverify"
"$BIN/qverify" --emit-record "$T/esc.safetensors" >"$T/esc-rec.json"
run "escaped name: qverify fails visibly" 1 "$BIN/qverify" --record "$T/esc-rec.json" "$T/spoof.safetensors"
inert "escaped name: qverify fails visibly"; out_has "escaped name: verdict" "spoof.safetensors: FAILED$"
out_has "escaped name: qverify" "tensor 'blk.0.x\\\\r\\\\x1b\[2Kspoof.gguf: ok\\\\x1b\[8m.weight': extra"
run "escaped name: qconvert -v" 0 "$BIN/qconvert" -v --to q4_0 --pure "$T/spoof.safetensors" "$T/spoof.gguf"
inert "escaped name: qconvert -v"; out_has "escaped name: worst SQNR" 'worst SQNR .* (blk.0.x\\r\\x1b\[2Kspoof.gguf: ok\\x1b\[8m.weight)'
err_has "escaped name: plan line" '\] blk.0.x\\r\\x1b\[2Kspoof.gguf: ok\\x1b\[8m.weight  \[2, 32\]'
# every text mode on OSC, UTF-8 C1 and bidi names, and a hostile file name (paths are shown escaped too)
hp="$T/$(printf 'p\033]0;t\007\342\200\256q\302\233x').safetensors"
cp "$T/bidi.safetensors" "$hp"
for x in "$T/osc.safetensors" "$T/bidi.safetensors" "$hp"; do
	for m in "" --summary --markdown --memory "--diff $T/esc.safetensors"; do
		run "escaped: qinspect $m ${x##*/}" 0 "$BIN/qinspect" $m "$x"; inert "escaped: qinspect $m ${x##*/}"
	done
	run "escaped: qinspect --diff (reference) ${x##*/}" 0 "$BIN/qinspect" --diff "$x" "$T/esc.safetensors"
	inert "escaped: qinspect --diff (reference) ${x##*/}"
	run "escaped: qverify ${x##*/}" 0 "$BIN/qverify" -v "$x"; inert "escaped: qverify ${x##*/}"
	run "escaped: qconvert -v ${x##*/}" 0 "$BIN/qconvert" -v --to q8_0 --pure "$x" "$T/escv.gguf"; inert "escaped: qconvert -v ${x##*/}"
	run "escaped: --dry-run ${x##*/}" 0 "$BIN/qconvert" --dry-run --to q8_0 --pure "$x" "$T/escd.gguf"; inert "escaped: --dry-run ${x##*/}"
	"$BIN/qinspect" --json "$x" >"$T/j.json"
	if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/j.json" 2>/dev/null || ! command -v python3 >/dev/null; then ok
	else bad "escaped: qinspect --json ${x##*/} is not valid JSON"; fi
done
run "escaped: missing hostile path" 4 "$BIN/qinspect" "$hp.nope"; inert "escaped: missing hostile path"
run "escaped name: qconvert --dry-run" 0 "$BIN/qconvert" --dry-run --to q4_0 --pure "$T/spoof.safetensors" "$T/spoof2.gguf"
inert "escaped name: qconvert --dry-run"
run "escaped name: qconvert --exact" 1 "$BIN/qconvert" --exact --to q4_0 --pure "$T/spoof.safetensors" "$T/spoof3.gguf"
inert "escaped name: qconvert --exact"; err_has "escaped name: --exact" 'not exact: blk.0.x\\r\\x1b'
run "escaped name: qconvert --max-error" 1 "$BIN/qconvert" --max-error 200 --to q4_0 --pure "$T/spoof.safetensors" "$T/spoof4.gguf"
inert "escaped name: qconvert --max-error"; err_has "escaped name: --max-error" 'qconvert: blk.0.x\\r\\x1b.*below --max-error'

# --- an HF directory with only a tokenizer.json: tokenizer.ggml.pre named from its pre_tokenizer
mkdir -p "$T/bpe-ok" "$T/bpe-bad"
for f in config.json model.safetensors; do cp "$H/$f" "$T/bpe-ok/"; cp "$H/$f" "$T/bpe-bad/"; done
cat >"$T/bpe-ok/tokenizer.json" <<'TOK'
{"version": "1.0", "normalizer": null,
 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
 "added_tokens": [{"id": 3, "content": "<|endoftext|>", "special": true}],
 "model": {"type": "BPE", "byte_fallback": false, "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}
TOK
sed 's/"ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true/"Whitespace"/' \
	"$T/bpe-ok/tokenizer.json" >"$T/bpe-bad/tokenizer.json"
run "tokenizer.json only -> gguf" 0 "$BIN/qconvert" -q "$T/bpe-ok/" "$T/bpe-ok.gguf"
run "tokenizer.json only: keys" 0 "$BIN/qinspect" --json "$T/bpe-ok.gguf"
out_has "tokenizer.json only: gpt2 model" '"tokenizer.ggml.model":	"gpt2"'
out_has "tokenizer.json only: pre named" '"tokenizer.ggml.pre":	"gpt-2"'
run "unknown pre_tokenizer refused" 3 "$BIN/qconvert" -q "$T/bpe-bad/" "$T/bpe-bad.gguf"
err_has "unknown pre_tokenizer: names the file" "tokenizer.json"
err_has "unknown pre_tokenizer: what was found" "Whitespace"
err_has "unknown pre_tokenizer: what is recognised" "recognised: llama-bpe"
no_file "unknown pre_tokenizer: no output" "$T/bpe-bad.gguf"

# --- fixtures from the real tools
if [ -n "$FX" ] && [ -d "$FX/hf/arch/ref" ]; then
	# mixtral: 1017472 params, of which 786432 in expert tensors, 2 of 4 experts per token
	run "memory mixtral gguf" 0 "$BIN/qinspect" --memory --json "$FX/hf/arch/ref/mixtral-llamacpp-f16.gguf"
	out_has "memory mixtral gguf" '"params_active":	624256'; out_has "memory mixtral gguf" '"weights_bytes_active":	1251840'
	run "memory mixtral hf" 0 "$BIN/qinspect" --memory "$FX/hf/arch/mixtral"
	out_has "memory mixtral hf" "624256 of 1017472 parameters active"
	# gemma2: 2 layers, window 4096 on layer 0: (2 x 8192 + 2 x 4096) x 128 x 2 B at 8192 tokens
	run "memory gemma2 gguf" 0 "$BIN/qinspect" --memory --json "$FX/hf/arch/ref/gemma2-llamacpp-f16.gguf"
	out_has "memory gemma2 gguf" '"kv_bytes":	6291456'
	run "memory gemma2 hf" 0 "$BIN/qinspect" --memory "$FX/hf/arch/gemma2"
	out_has "memory gemma2 hf" "sliding window 4096 on 1 of 2 layers"
	run "memory phi3" 0 "$BIN/qinspect" --memory "$FX/hf/arch/ref/phi3-llamacpp-f16.gguf"
	out_has "memory phi3" "sliding window 2047 not applied"
else
	echo "skipped: fixtures absent (hf/arch memory cases)"
fi
if [ -n "$FX" ]; then
	run "fixture f16 -> f32 -> f16" 0 "$BIN/qconvert" -q "$FX/gguf/tiny-F16.gguf" "$T/fx32.gguf" --to f32
	run "fixture f32 -> f16" 0 "$BIN/qconvert" -q "$T/fx32.gguf" "$T/fx16.gguf" --to f16
	if same_tail "$T/fx16.gguf" "$FX/gguf/tiny-F16.gguf" 3675136 && [ "$(json_sans_prov "$T/fx16.gguf" qtk.provenance)" = "$(json_sans_prov "$FX/gguf/tiny-F16.gguf" qtk.provenance)" ]; then ok; else bad "F16 -> F32 -> F16 differs from llama-quantize's F16 file"; fi
	for f in "$FX"/gguf/*.gguf "$FX"/gguf/split-*/*.gguf "$FX"/vocab/*.gguf "$FX"/hf/tiny-llama/[a-z]*-*/ "$FX"/hf/tiny-llama/fp16/; do
		run "qinspect $f" 0 "$BIN/qinspect" --json "$f"
	done
	# ggml's FP4 quantizers, pure: the same tensors as ggml's own (gguf/fp4), file type 38/39
	if [ -f "$FX/gguf/fp4/tiny-nvfp4.gguf" ]; then
		for t in mxfp4 nvfp4; do
			run "tiny-f32 -> $t" 0 "$BIN/qconvert" -q "$FX/gguf/tiny-f32.gguf" "$T/fp4-$t.gguf" --to $t
			run "$t against ggml's" 0 "$BIN/qinspect" --diff "$FX/gguf/fp4/tiny-$t.gguf" "$T/fp4-$t.gguf"
			n=$(grep -c " exact " "$T/out")
			if [ "$n" -eq 21 ]; then ok; else bad "$t: $n of 21 tensors equal ggml's"; fi
			run "$t file type" 0 "$BIN/qinspect" --json "$T/fp4-$t.gguf"
			if grep -q "\"general.file_type\":.*$([ $t = mxfp4 ] && echo 38 || echo 39)" "$T/out"; then ok; else bad "$t: general.file_type"; fi
		done
	fi
	# llama.cpp's per-tensor mix rules: the plan must pick exactly the types llama-quantize chose
	for mix in Q2_K Q3_K_S Q3_K_M Q4_K_S Q4_K_M Q5_K_M Q6_K Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL IQ4_XS; do
		"$BIN/qconvert" --dry-run "$FX/gguf/tiny-f32.gguf" "$T/mix.gguf" --to $mix 2>"$T/err" |
			awk '/^\[/ { sub(/^\[ *[0-9]+\/[0-9]+\] /, ""); t = ""; for (i = 1; i <= NF; i++) if ($i == "->" && t == "") t = $(i + 1); sub(/^ggml:/, "", t); print $1 "\t" t }' | sort >"$T/plan"
		cut -f1,2 "$FX/gguf/tiny-$mix.digest.tsv" | tr 'A-Z' 'a-z' | sort >"$T/want"
		if [ -s "$T/plan" ] && cmp -s "$T/plan" "$T/want"; then ok; else bad "mix $mix differs from llama-quantize"; diff "$T/plan" "$T/want" | head -5; fi
	done
	# the same for a mixture-of-experts model (3-D expert tensors, routers), and its QPK round trip
	MX=$FX/hf/arch/ref
	if [ -f "$MX/mixtral-Q4_K_M.gguf" ] && [ -f "$MX/mixtral-llamacpp-f16.gguf" ]; then
		"$BIN/qconvert" --dry-run "$MX/mixtral-llamacpp-f16.gguf" "$T/mx.gguf" --to Q4_K_M 2>"$T/err" |
			awk '/^\[/ { sub(/^\[ *[0-9]+\/[0-9]+\] /, ""); t = ""; for (i = 1; i <= NF; i++) if ($i == "->" && t == "") t = $(i + 1); sub(/^ggml:/, "", t); print $1 "\t" t }' | sort >"$T/plan"
		cut -f1,2 "$MX/mixtral-Q4_K_M.digest.tsv" | tr 'A-Z' 'a-z' | sort >"$T/want"
		if [ "$(wc -l <"$T/plan")" -eq 23 ] && cmp -s "$T/plan" "$T/want"; then ok; else bad "MoE mix Q4_K_M differs from llama-quantize"; diff "$T/plan" "$T/want" | head -5; fi
		run "MoE Q4_K_M -> qpk" 0 "$BIN/qconvert" -q "$MX/mixtral-Q4_K_M.gguf" "$T/mx.qpk"
		run "MoE qpk -> gguf" 0 "$BIN/qconvert" -q "$T/mx.qpk" "$T/mx-back.gguf"
		run "MoE round trip against the original" 0 "$BIN/qverify" --against "$MX/mixtral-Q4_K_M.gguf" "$T/mx-back.gguf"
		out_has "MoE round trip exact" "23 exact, 0 lossy"
		if same_tail "$T/mx-back.gguf" "$MX/mixtral-Q4_K_M.gguf" 733696; then ok; else bad "MoE GGUF -> QPK -> GGUF changed tensor bytes"; fi
	else
		echo "skipped: no hf/arch MoE fixtures"
	fi
	# HF -> GGUF equals llama.cpp's converter, tensor for tensor and key for key (naming keys aside)
	REF=$FX/hf/tiny-llama/ref/llamacpp-from-hf-f16.gguf
	run "fixture hf -> gguf" 0 "$BIN/qconvert" -q "$FX/hf/tiny-llama/fp16/" "$T/fx-hf.gguf"
	json_sans_prov "$T/fx-hf.gguf" '"general.\(name\|finetune\)"' >"$T/a.json"
	json_sans_prov "$REF" '"general.\(name\|finetune\)"' >"$T/b.json"
	if cmp -s "$T/a.json" "$T/b.json"; then ok; else bad "hf -> gguf metadata/tensors differ from llama.cpp's"; diff "$T/a.json" "$T/b.json" | head -5; fi
	n=$(wc -c <"$REF"); m=$(wc -c <"$T/fx-hf.gguf"); d=$((n - m))
	if [ "$(tail -c 3675136 "$T/fx-hf.gguf" | sha256sum)" = "$(tail -c 3675136 "$REF" | sha256sum)" ]; then ok; else bad "hf -> gguf tensor data differs from llama.cpp's"; fi
	run "fixture gguf -> hf" 0 "$BIN/qconvert" -q "$REF" "$T/fx-back/"
	if cmp -s "$T/fx-back/model.safetensors" "$FX/hf/tiny-llama/fp16/model.safetensors"; then ok; else bad "GGUF -> HF does not return the original safetensors"; fi
	run "fixture gguf -> hf -> gguf" 0 "$BIN/qconvert" -q "$T/fx-back/" "$T/fx-rt.gguf" --set general.name=fp16
	run "fixture hf -> gguf (named)" 0 "$BIN/qconvert" -q "$FX/hf/tiny-llama/fp16/" "$T/fx-hf2.gguf" --set general.name=fp16
	if same_tail "$T/fx-rt.gguf" "$T/fx-hf2.gguf" 3675136 && [ "$(json_sans_prov "$T/fx-rt.gguf" qtk.provenance)" = "$(json_sans_prov "$T/fx-hf2.gguf" qtk.provenance)" ]; then ok; else bad "GGUF -> HF -> GGUF does not round-trip"; fi
	# AWQ -> GPTQ: v1 cannot hold a zero of 0, so gptq picks v2; gptq-v1 under --exact fails
	run "fixture awq -> gptq" 0 "$BIN/qconvert" "$FX/hf/tiny-llama/awq-g128" "$T/fx-gptq.safetensors" --to gptq
	err_has "awq -> gptq says v2" "writing GPTQ v2"; out_has "awq -> gptq exact" "21 exact, 0 requantized"
	run "fixture awq -> gptq-v1 --exact" 1 "$BIN/qconvert" --exact "$FX/hf/tiny-llama/awq-g128" "$T/fx-v1.safetensors" --to gptq-v1
	err_has "awq -> gptq-v1 names the tensor" "not exact: model.layers.1.self_attn.o_proj.weight"
	no_file "gptq-v1 --exact writes nothing" "$T/fx-v1.safetensors"
	for v in awq-g128 gptq-4-128-0 gptq-3-128-0 gptq-2-64-0 gptq-8-128-0 gptq-4-128-1 gptq-4-32-1s; do
		run "fixture $v -> auto-exact gguf" 0 "$BIN/qconvert" -q --exact "$FX/hf/tiny-llama/$v" "$T/fx-$v.gguf" --to auto-exact
		run "fixture $v -> gptq repack" 0 "$BIN/qconvert" -q "$FX/hf/tiny-llama/$v" "$T/fx-$v/" --to gptq
	done
	run "fixture Q4_K_M -> awq" 0 "$BIN/qconvert" "$FX/gguf/tiny-Q4_K_M.gguf" "$T/fx-q4km-awq/" --to awq
	out_has "Q4_K_M -> awq requantizes" "requantized"
	run "awq bpw" 0 "$BIN/qinspect" --json "$FX/hf/tiny-llama/awq-g128"
	out_has "awq bpw 4.15625" '"bits_per_weight":	4.15625'
	out_has "awq logical tensor" '"name":	"model.layers.0.self_attn.q_proj.weight"'
	# bitsandbytes 4-bit: read, verify, convert from (re-fit); a quant_state lie is exit 3 naming the tensor
	if [ -d "$FX/hf/more/bnb-nf4-dq" ]; then
		run "bnb inspect" 0 "$BIN/qinspect" "$FX/hf/more/bnb-nf4-dq/"; out_has "bnb4 layout" "bnb4"
		run "bnb verify" 0 "$BIN/qverify" "$FX/hf/more/bnb-fp4/"
		run "bnb -> q4_k" 0 "$BIN/qconvert" "$FX/hf/more/bnb-nf4-dq/" "$T/bnb.gguf" --to q4_k --pure
		run "bnb -> auto-exact --exact" 0 "$BIN/qconvert" --exact "$FX/hf/more/bnb-fp4/" "$T/bnb-ae.gguf" --to auto-exact
		out_has "bnb auto-exact" "21 exact, 0 requantized"
		run "bnb -> awq" 0 "$BIN/qconvert" -q "$FX/hf/more/bnb-fp4/" "$T/bnb-awq/" --to awq
		mkdir -p "$T/bnb-lie" && cp "$FX/hf/more/bnb-fp4/config.json" "$T/bnb-lie/" &&
			sed 's/"blocksize": 64/"blocksize": 32/' "$FX/hf/more/bnb-fp4/model.safetensors" >"$T/bnb-lie/model.safetensors"
		run "bnb quant_state lie" 3 "$BIN/qinspect" "$T/bnb-lie/"
		err_has "bnb lie names the tensor" "tensor .model.layers.0.mlp.down_proj.weight.absmax.*blocksize 32"
	fi
	# bitsandbytes LLM.int8 (made here): I8 codes 1 with SCB 127 decode to 1.0; SCB of the wrong length is exit 3
	mkbnb8() {
		mkdir -p "$1"
		printf '%s' '{"model_type":"llama","quantization_config":{"quant_method":"bitsandbytes","load_in_8bit":true,"llm_int8_threshold":6.0}}' >"$1/config.json"
		e=$((64 + 4 * $2))
		h="{\"model.layers.0.mlp.down_proj.weight\":{\"dtype\":\"I8\",\"shape\":[2,32],\"data_offsets\":[0,64]},\"model.layers.0.mlp.down_proj.SCB\":{\"dtype\":\"F32\",\"shape\":[$2],\"data_offsets\":[64,$e]},\"model.layers.0.mlp.down_proj.weight_format\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[$e,$((e + 1))]}}"
		n=$(printf '%s' "$h" | wc -c)
		{
			printf "\\$(printf %03o $((n % 256)))\\$(printf %03o $((n / 256)))\\000\\000\\000\\000\\000\\000"
			printf '%s' "$h"
			head -c 64 /dev/zero | tr '\000' '\001'
			i=0; while [ $i -lt "$2" ]; do printf '\000\000\376\102'; i=$((i + 1)); done
			printf '\000'
		} >"$1/model.safetensors"
	}
	mkbnb8 "$T/bnb8" 2
	run "bnb8 inspect" 0 "$BIN/qinspect" "$T/bnb8/"; out_has "bnb8 layout" "bnb8"
	run "bnb8 bpw" 0 "$BIN/qinspect" --json "$T/bnb8/"; out_has "bnb8 bpw 9" '"bits_per_weight":	9'
	run "bnb8 -> f16 safetensors" 0 "$BIN/qconvert" "$T/bnb8/" "$T/bnb8-f16/" --to f16
	mkbnb8 "$T/bnb8-bad" 3
	run "bnb8 SCB length" 3 "$BIN/qinspect" "$T/bnb8-bad/"
	err_has "bnb8 SCB names the tensor" "tensor .model.layers.0.mlp.down_proj.SCB.*F32 \[2\]"
	# gpt-oss MXFP4 experts: GGUF needs --names keep; the blocks move to ggml's MXFP4 (sign of zero only)
	OSS=$FX/hf/more/gptoss-mxfp4
	run "gpt-oss -> gguf without --names keep" 3 "$BIN/qconvert" "$OSS" "$T/oss0.gguf" --to auto-exact
	err_has "gpt-oss names hint" "names keep"
	no_file "gpt-oss refused: nothing written" "$T/oss0.gguf"
	run "gpt-oss -> gguf auto-exact" 0 "$BIN/qconvert" -v --names keep --max-error 200 "$OSS" "$T/oss.gguf" --to auto-exact
	err_has "gpt-oss experts shuffled" "mxfp4 -> ggml:mxfp4 .*SQNR inf dB"
	err_has "gpt-oss stacks into ggml's by windows" "experts.gate_up_proj: MXFP4 blocks into ggml's a window of rows at a time"
	run "gpt-oss mxfp4 gguf inspect" 0 "$BIN/qinspect" "$T/oss.gguf"
	out_has "gpt-oss experts in ggml mxfp4" "gate_up_proj .*ggml:mxfp4"
	# the stacks' blocks are read a window of rows at a time (an expert's rows at most): the same
	# file, record included, as the whole-tensor path
	run "gpt-oss -> gguf, windows" 0 env SOURCE_DATE_EPOCH=1 "$BIN/qconvert" -q --names keep --max-error 200 "$OSS" "$T/oss-s.gguf" --to auto-exact
	run "gpt-oss -> gguf, whole tensors" 0 env SOURCE_DATE_EPOCH=1 QTK_REPACK=windows "$BIN/qconvert" -q --names keep --max-error 200 "$OSS" "$T/oss-w.gguf" --to auto-exact
	if cmp -s "$T/oss-s.gguf" "$T/oss-w.gguf"; then ok; else bad "gpt-oss -> gguf: windowed and whole-tensor outputs differ"; fi
	run "gpt-oss --exact refuses the sign of zero" 1 "$BIN/qconvert" --exact --names keep "$OSS" "$T/oss1.gguf" --to mxfp4
	run "gpt-oss against" 0 "$BIN/qverify" --against "$OSS" "$T/oss.gguf"
	# and back: the GGUF's MXFP4 stacks become gpt-oss's _blocks/_scales again, the same bytes
	run "gpt-oss gguf -> dir" 0 "$BIN/qconvert" -v --names keep "$T/oss.gguf" "$T/oss-back/"
	err_has "gpt-oss stacks shuffled window by window" "experts.gate_up_proj: MXFP4 blocks shuffled window by window"
	run "gpt-oss gguf -> dir, whole tensors" 0 env QTK_REPACK=windows "$BIN/qconvert" -q --names keep "$T/oss.gguf" "$T/oss-back-w/"
	if cmp -s "$T/oss-back/model.safetensors" "$T/oss-back-w/model.safetensors"; then ok; else bad "gpt-oss back: streamed and whole differ"; fi
	if grep -q '"quant_method":[[:space:]]*"mxfp4"' "$T/oss-back/config.json"; then ok; else bad "gpt-oss back: config"; fi
	for part in model.layers.0.mlp.experts.gate_up_proj_blocks model.layers.1.mlp.experts.down_proj_scales; do
		a=$(python3 -c 'import json,struct,sys,hashlib
b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; h=json.loads(b[8:8+n]); o=h[sys.argv[2]]["data_offsets"]
print(hashlib.sha256(b[8+n+o[0]:8+n+o[1]]).hexdigest(), h[sys.argv[2]]["shape"])' "$OSS/model.safetensors" "$part" 2>/dev/null)
		b=$(python3 -c 'import json,struct,sys,hashlib
b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; h=json.loads(b[8:8+n]); o=h[sys.argv[2]]["data_offsets"]
print(hashlib.sha256(b[8+n+o[0]:8+n+o[1]]).hexdigest(), h[sys.argv[2]]["shape"])' "$T/oss-back/model.safetensors" "$part" 2>/dev/null)
		if [ -n "$a" ] && [ "$a" = "$b" ]; then ok; else bad "gpt-oss back: $part differs ($a / $b)"; fi
	done
	run "gpt-oss back against" 0 "$BIN/qinspect" --diff "$OSS" "$T/oss-back/"
	out_has "gpt-oss back against" "12 exact"
	run "gpt-oss dir keep" 0 "$BIN/qconvert" -q --names keep "$OSS" "$T/oss-keep/"
	if cmp -s "$OSS/model.safetensors" "$T/oss-keep/model.safetensors"; then ok; else bad "gpt-oss keep: weights differ"; fi
	run "gpt-oss inspect" 0 "$BIN/qinspect" "$OSS"
	out_has "gpt-oss 4.25 bpw" "experts.down_proj .*mxfp4 .*4.250"
else
	echo "skipped: fixtures absent (qconvert/qinspect interop cases)"
fi

# FP8 into GGUF: said plainly that no ggml type holds it, with the cost of the chosen target
if [ -n "$FX" ] && [ -d "$FX/hf/ct/ct-w8a8-int8-channel" ]; then
	# int8 W8A8 kept as it is goes back out as llm-compressor's int-quantized, config included
	run "w8a8 -> dir keep" 0 "$BIN/qconvert" -q "$FX/hf/ct/ct-w8a8-int8-channel/" "$T/w8a8/"
	run "w8a8 dir reads back exact" 0 "$BIN/qverify" --against "$FX/hf/ct/ct-w8a8-int8-channel/" "$T/w8a8/"
	out_has "w8a8 dir reads back exact" "21 exact, 0 lossy"
	if grep -q '"format":[[:space:]]*"int-quantized"' "$T/w8a8/config.json" && grep -q '"strategy":[[:space:]]*"token"' "$T/w8a8/config.json"; then ok
	else bad "w8a8 dir: config is not int-quantized W8A8"; fi
else
	echo "skipped: compressed-tensors W8A8 round trip (no fixtures)"
fi
if [ -n "$FX" ] && [ -d "$FX/hf/ct/ct-fp8-channel" ]; then
	run "fp8 -> gguf auto-exact" 0 "$BIN/qconvert" "$FX/hf/ct/ct-fp8-channel/" "$T/fp8.gguf" --to auto-exact
	err_has "no ggml type for fp8" "14 fp8 tensors: GGUF has no type that holds fp8 values exactly; writing f32 (3.97x"
fi

# qinspect --json lists a packed tensor's parts and scheme parameters
run "awq from the sample" 0 "$BIN/qconvert" -q "$G" "$T/parts.safetensors" --to awq --group-size 32
run "json of packed parts" 0 "$BIN/qinspect" --json "$T/parts.safetensors"
out_has "parts listed" '"parts":'
out_has "a qweight part" '"role":[[:space:]]*"qweight"'
out_has "a scales part" '"role":[[:space:]]*"scales"'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
