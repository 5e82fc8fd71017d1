#!/bin/sh
# cli_records.sh - the provenance record qconvert writes for packed outputs states the values the
# file decodes to. The decoded tier of a re-fitted AWQ/GPTQ tensor comes from the converter's own
# check (docs/provenance.md, "The decoded tier of packed outputs"), not from decoding the written
# parts again: every leaf of the embedded record must equal the leaf qverify --emit-record
# computes from the file, for AWQ and GPTQ (whose first slice writes the g_idx every slice's check
# reads), from the Hugging Face sample and from the GGUF sample (Q/K rows kept in GGUF's order,
# hashed in whole heads), and from a one-block model 2048 wide (two windows a matrix: the values
# hashed beside the next window's fit, heads in each), with 1 and 4 threads; the files and the
# reported error figures must not depend on the thread count.
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
T=$(mktemp -d /tmp/qtk-records-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

S=$T/samples
"$B/samples/gen" "$S" >/dev/null || bad "sample generator"
"$B/samples/gen" --bench 1 "$S/wide.gguf" 2048 1024 "$S/tiny-llama-f32.gguf" >/dev/null || bad "wide sample"

cat >"$T/leaves.py" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
emb = {t["name"]: t for t in d["embedded"]["output"]["tensors"]}
got = {t["name"]: t for t in d["output"]["tensors"]}
bad = [n for n in got if n not in emb or emb[n]["decoded"] != got[n]["decoded"] or emb[n]["encoded"] != got[n]["encoded"]]
packed = [n for n in got if got[n]["encoding"].split(":")[0] in ("awq", "gptq-v1", "gptq-v2", "ct-int", "mlx", "fp8", "mxfp4", "nvfp4")]
if bad or not packed or d["embedded"]["output"]["tensor_root"] != d["output"]["tensor_root"]:
    print("differ:", bad[:5], "packed:", len(packed))
    sys.exit(1)
EOF
cat >"$T/same.py" <<'EOF'
import json, sys
a, b = (json.load(open(f))["tensors"] for f in sys.argv[1:3])
sys.exit(0 if a == b and len(a) > 0 else 1)
EOF

for src in "$S/tiny-llama" "$S/tiny-llama-f32.gguf" "$S/wide.gguf"; do
	sn=$(basename "$src")
	for to in awq gptq ct-int; do
		ext=$to
		[ "$to" = ct-int ] && ext=qpk
		for th in 1 4; do
			o=$T/$to-$th.$ext
			if "$BIN/qconvert" -q --threads $th "$src" "$o" --to $to --report "$T/rep-$th.json" >/dev/null 2>"$T/err"; then
				ok
				if "$BIN/qverify" --emit-record "$o" >"$T/rec.json" 2>"$T/err" && python3 "$T/leaves.py" "$T/rec.json"; then
					ok
				else
					bad "$sn -> $to, $th threads: record leaves differ from the file's"
				fi
			else
				bad "$sn -> $to, $th threads: qconvert failed"; head -3 "$T/err"
			fi
		done
		for th in 1 4; do
			"$BIN/qverify" --emit-record "$T/$to-$th.$ext" 2>/dev/null |
				python3 -c 'import json,sys; print(json.load(sys.stdin)["output"]["tensor_root"])' >"$T/root-$th"
		done
		if [ -s "$T/root-1" ] && cmp -s "$T/root-1" "$T/root-4"; then ok; else bad "$sn -> $to: 1 and 4 threads differ"; fi
		if python3 "$T/same.py" "$T/rep-1.json" "$T/rep-4.json"; then ok; else
			bad "$sn -> $to: reported error figures differ between 1 and 4 threads"
		fi
	done
done

# exact AWQ <-> GPTQ repacks stream bands of input rows and take each matrix's decoded leaf from
# the source's digests once its codes, zeros and scales are checked equal: the leaves must still be
# the file's (here from the 2048-wide GGUF sample: Q/K rows in GGUF's order on both sides)
for th in 1 4; do
	for to in gptq awq; do
		src=$T/awq-$th.awq
		[ $to = awq ] && src=$T/rp-gptq-$th.qpk
		o=$T/rp-$to-$th.qpk
		if "$BIN/qconvert" -v --threads $th "$src" "$o" --to $to >/dev/null 2>"$T/err" &&
			grep -q "in bands of" "$T/err"; then
			ok
			if "$BIN/qverify" --emit-record "$o" >"$T/rec.json" 2>"$T/err" && python3 "$T/leaves.py" "$T/rec.json"; then
				ok
			else
				bad "repack -> $to, $th threads: record leaves differ from the file's"
			fi
		else
			bad "repack -> $to, $th threads: qconvert failed or did not stream"; head -3 "$T/err"
		fi
	done
done

# a repack into compressed-tensors goes a window of output features at a time: weight_shape must
# be the whole matrix's (each window wrote its own rows' [n, in] over it; the QPK writer refused
# the part, an HF directory was written with it)
for o in "$T/rp-ct.qpk" "$T/rp-ct/"; do
	if "$BIN/qconvert" -q "$T/awq-1.awq" "$o" --to ct-int 2>"$T/err" &&
		"$BIN/qverify" --against "$T/awq-1.awq" "$o" >"$T/v.out" 2>&1 &&
		grep -q "against: ok: [0-9]* exact, 0 lossy, 0 failing" "$T/v.out"; then
		ok
	else
		bad "awq -> ct-int ($o) in windows: not written or not exact"; head -3 "$T/err" "$T/v.out"
	fi
done

# outputs whose bulk splits by rows (compressed-tensors, MLX) stream it window by window, fitted or
# repacked, and AWQ's qweight, whose windows are column bands, goes through a scratch file: the
# same file, report and record as the windowed path that holds the packed output
# (QTK_REPACK=windows), and record leaves that are the file's
for src in "$S/wide.gguf" "$T/awq-1.awq"; do
	for to in ct-int mlx ct-fp8 awq gptq; do
		sn=$(basename "$src")-$to
		case $sn in *.awq-awq | *.awq-gptq) continue ;; esac # a copy; the band repack (cli.sh)
		if env SOURCE_DATE_EPOCH=1 "$BIN/qconvert" -v --threads 2 "$src" "$T/st-$sn.qpk" --to $to --report "$T/st.json" >/dev/null 2>"$T/err" &&
			grep -q "window by window" "$T/err" &&
			env SOURCE_DATE_EPOCH=1 QTK_REPACK=windows "$BIN/qconvert" -q --threads 2 "$src" "$T/wi-$sn.qpk" --to $to --report "$T/wi.json" 2>"$T/err" &&
			cmp -s "$T/st-$sn.qpk" "$T/wi-$sn.qpk" && python3 "$T/same.py" "$T/st.json" "$T/wi.json"; then
			ok
		else
			bad "$sn: streamed and windowed outputs or reports differ"; head -3 "$T/err"
		fi
		if "$BIN/qverify" --emit-record "$T/st-$sn.qpk" >"$T/rec.json" 2>"$T/err" && python3 "$T/leaves.py" "$T/rec.json"; then
			ok
		else
			bad "$sn streamed: record leaves differ from the file's"
		fi
	done
done
# ggml q4_0/q8_0/q4_1 sources give their integer groups a window at a time (repacked where the
# target holds them, else fitted; q4_1's choice made for the whole tensor first): the same files,
# reports and records as the whole-tensor path
for ty in q4_0 q8_0 q4_1; do
	"$BIN/qconvert" -q "$S/wide.gguf" "$T/w-$ty.gguf" --to $ty --pure || bad "wide.gguf -> $ty"
	for to in "awq --group-size 32" "gptq --group-size 32" "mlx --group-size 32" awq; do
		sn=$ty-$(echo "$to" | tr -d ' -')
		# shellcheck disable=SC2086 # $to is the target and its options
		if env SOURCE_DATE_EPOCH=1 "$BIN/qconvert" -v --threads 2 "$T/w-$ty.gguf" "$T/st-$sn.qpk" --to $to --report "$T/st.json" >/dev/null 2>"$T/err" &&
			grep -q "window by window" "$T/err" &&
			env SOURCE_DATE_EPOCH=1 QTK_REPACK=windows "$BIN/qconvert" -q --threads 2 "$T/w-$ty.gguf" "$T/wi-$sn.qpk" --to $to --report "$T/wi.json" 2>"$T/err" &&
			cmp -s "$T/st-$sn.qpk" "$T/wi-$sn.qpk" && python3 "$T/same.py" "$T/st.json" "$T/wi.json" &&
			"$BIN/qverify" --emit-record "$T/st-$sn.qpk" >"$T/rec.json" 2>"$T/err" && python3 "$T/leaves.py" "$T/rec.json"; then
			ok
		else
			bad "$sn: streamed and whole-tensor outputs, reports or record leaves differ"; head -3 "$T/err"
		fi
	done
done
# ggml MXFP4/NVFP4 blocks into compressed-tensors' and ModelOpt's layouts (Q/K rows moved back to
# HF order) are shuffled a window of rows at a time, the scales through a scratch file: the same
# directory, report and record as the whole-tensor path, record leaves that are the files'
for ty in mxfp4 nvfp4; do
	"$BIN/qconvert" -q "$S/wide.gguf" "$T/w-$ty.gguf" --to $ty --pure || bad "wide.gguf -> $ty"
	if env SOURCE_DATE_EPOCH=1 "$BIN/qconvert" -v "$T/w-$ty.gguf" "$T/fst-$ty/" --report "$T/st.json" >/dev/null 2>"$T/err" &&
		grep -q "q_proj.weight: $(echo $ty | tr a-z A-Z) blocks shuffled window by window" "$T/err" &&
		env SOURCE_DATE_EPOCH=1 QTK_REPACK=windows "$BIN/qconvert" -q "$T/w-$ty.gguf" "$T/fwi-$ty/" --report "$T/wi.json" 2>"$T/err" &&
		diff -r "$T/fst-$ty" "$T/fwi-$ty" >/dev/null && python3 "$T/same.py" "$T/st.json" "$T/wi.json" &&
		"$BIN/qverify" --emit-record "$T/fst-$ty/" >"$T/rec.json" 2>"$T/err" && python3 "$T/leaves.py" "$T/rec.json" &&
		"$BIN/qverify" "$T/fst-$ty/" --against "$T/w-$ty.gguf" >"$T/v.out" 2>&1; then
		ok
	else
		bad "$ty gguf -> hf: streamed and whole-tensor directories, reports or record leaves differ, or not verified"
		head -3 "$T/err" "$T/v.out"
	fi
	# and back into ggml's blocks, read a window of rows at a time: the same file and report as
	# the whole-tensor path, the values of the GGUF it came from
	if env SOURCE_DATE_EPOCH=1 "$BIN/qconvert" -v "$T/fst-$ty/" "$T/fb-$ty.gguf" --to $ty --report "$T/st.json" >/dev/null 2>"$T/err" &&
		grep -q "ffn_gate.weight: $(echo $ty | tr a-z A-Z) blocks into ggml's a window of rows at a time" "$T/err" &&
		env SOURCE_DATE_EPOCH=1 QTK_REPACK=windows "$BIN/qconvert" -q "$T/fst-$ty/" "$T/fbw-$ty.gguf" --to $ty --report "$T/wi.json" 2>"$T/err" &&
		cmp -s "$T/fb-$ty.gguf" "$T/fbw-$ty.gguf" && python3 "$T/same.py" "$T/st.json" "$T/wi.json" &&
		"$BIN/qverify" "$T/fb-$ty.gguf" --against "$T/w-$ty.gguf" >"$T/v.out" 2>&1; then
		ok
	else
		bad "$ty hf -> gguf: windowed and whole-tensor files or reports differ, or not verified"
		head -3 "$T/err" "$T/v.out"
	fi
done
# q4_1 whose every block is an integer group (minimum 0, step 0.5) repacks into AWQ exactly, a window
# at a time; one block that is not (in the last window) sends the whole tensor to a re-fit, as the
# whole-tensor path does, decided before anything is written
# blocks.py OUT KIND: a 2048 x 2048 F32 down_proj whose blocks of 32 are chosen for the ggml type
# made from it: int (q4_1 integer groups: minimum 0, step 0.5), odd (the same, but the last
# block not), pair8 (q8_0 blocks of step 0.5 that pair into groups of 64, but in the last window)
cat >"$T/blocks.py" <<'EOF'
import json, random, struct, sys
random.seed(1)
out, kind = sys.argv[1], sys.argv[2]
rows, cols = 2048, 2048
vals = []
for r in range(rows):
    for b in range(cols // 32):
        if kind == "pair8":
            blk = [random.randint(-127, 127) * 0.5 for _ in range(32)]
            blk[0] = 63.5
            if r >= rows - 128 and b % 2:
                blk = [v * 0.5 for v in blk]
        else:
            blk = [random.randint(0, 15) * 0.5 for _ in range(32)]
            blk[0], blk[1] = 0.0, 7.5
        vals += blk
if kind == "odd":
    vals[-32:] = [v + 0.3 for v in vals[-32:]]
data = struct.pack("<%df" % len(vals), *vals)
h = json.dumps({"model.layers.0.mlp.down_proj.weight": {"dtype": "F32", "shape": [rows, cols], "data_offsets": [0, len(data)]}}).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(out, "wb").write(struct.pack("<Q", len(h)) + h + data)
EOF
for kind in int odd; do
	if python3 "$T/blocks.py" "$T/$kind.safetensors" $kind && "$BIN/qconvert" -q "$T/$kind.safetensors" "$T/$kind.gguf" --to q4_1 --pure 2>/dev/null &&
		env SOURCE_DATE_EPOCH=1 "$BIN/qconvert" -v "$T/$kind.gguf" "$T/$kind-st.awq" --to awq --group-size 32 --report "$T/st.json" >/dev/null 2>"$T/err" &&
		env SOURCE_DATE_EPOCH=1 QTK_REPACK=windows "$BIN/qconvert" -q "$T/$kind.gguf" "$T/$kind-wi.awq" --to awq --group-size 32 --report "$T/wi.json" &&
		cmp -s "$T/$kind-st.awq" "$T/$kind-wi.awq" && python3 "$T/same.py" "$T/st.json" "$T/wi.json"; then
		ok
	else
		bad "q4_1 ($kind) -> awq: streamed and whole-tensor outputs differ"; head -3 "$T/err"
	fi
	want="repacked window by window"
	[ $kind = odd ] && want="fitted window by window"
	if grep -q "down_proj.weight: $want" "$T/err"; then ok; else bad "q4_1 ($kind) -> awq: not $want"; head -3 "$T/err"; fi
done
# repack or re-fit is one choice for the whole tensor: q8_0 blocks that pair into MLX groups of 64
# in every window but the last re-fit the whole tensor, as the whole-tensor path does
if python3 "$T/blocks.py" "$T/pair8.safetensors" pair8 && "$BIN/qconvert" -q "$T/pair8.safetensors" "$T/pair8.gguf" --to q8_0 --pure 2>/dev/null &&
	env SOURCE_DATE_EPOCH=1 "$BIN/qconvert" -v "$T/pair8.gguf" "$T/pair8-st.qpk" --to mlx --bits 8 --group-size 64 --report "$T/st.json" >/dev/null 2>"$T/err" &&
	grep -q "fitted window by window" "$T/err" &&
	env SOURCE_DATE_EPOCH=1 QTK_REPACK=windows "$BIN/qconvert" -q "$T/pair8.gguf" "$T/pair8-wi.qpk" --to mlx --bits 8 --group-size 64 --report "$T/wi.json" &&
	cmp -s "$T/pair8-st.qpk" "$T/pair8-wi.qpk" && python3 "$T/same.py" "$T/st.json" "$T/wi.json"; then
	ok
else
	bad "q8_0 -> mlx 8-bit group 64 (last window's blocks do not pair): streamed and whole-tensor outputs differ"; head -3 "$T/err"
fi
if "$BIN/qconvert" -v --threads 2 "$T/w-q4_0.gguf" "$T/q4.awq" --to awq --group-size 32 >/dev/null 2>"$T/err" &&
	grep -q "attn_q.weight: repacked window by window" "$T/err"; then
	ok
else
	bad "q4_0 -> awq (group 32): not repacked window by window"
fi
if "$BIN/qconvert" -v --threads 2 "$S/wide.gguf" "$T/sc.awq" --to awq >/dev/null 2>"$T/err" &&
	grep -q "qweight through a scratch file" "$T/err"; then
	ok
else
	bad "wide.gguf -> awq: no qweight went through a scratch file"
fi
# into a Hugging Face directory too (the scratch file beside it), verified; nothing left behind
mkdir -p "$T/scd"
if "$BIN/qconvert" -v "$S/wide.gguf" "$T/scd/hf/" --to awq >/dev/null 2>"$T/err" &&
	grep -q "through a scratch file" "$T/err" && "$BIN/qverify" "$T/scd/hf/" >"$T/v.out" 2>&1 &&
	[ "$(ls -A "$T/scd")" = hf ]; then
	ok
else
	bad "wide.gguf -> awq HF directory through a scratch file: not verified, or files left"; head -3 "$T/err" "$T/v.out"
fi

# into Hugging Face directories the record's encoded leaves are the files' too (the layouts as the
# safetensors reader sees them: MLX's weight is U32), from floats and from AWQ
for src in "$S/wide.gguf" "$T/awq-1.awq"; do
	for to in awq gptq ct-int ct-fp8 mlx; do
		sn=$(basename "$src")-$to
		rm -rf "$T/hfl"
		if "$BIN/qconvert" -q "$src" "$T/hfl/" --to $to 2>"$T/err" && "$BIN/qverify" --emit-record "$T/hfl/" >"$T/rec.json" 2>"$T/err" &&
			python3 "$T/leaves.py" "$T/rec.json" && "$BIN/qverify" "$T/hfl/" >"$T/v.out" 2>&1 &&
			grep -q "tensor_root: ok: encoded root" "$T/v.out"; then
			ok
		else
			bad "$sn (HF directory): record leaves or tensor root differ from the files'"; head -3 "$T/err" "$T/v.out"
		fi
	done
done

# a QPK source is hashed for the record by a second reader of its own, beside the conversion: the
# record's source roots must be the source's (qverify --emit-record of it), and link it
cat >"$T/srcroot.py" <<'EOF'
import json, sys
rec = json.load(open(sys.argv[1]))["embedded"]["source"]
src = json.load(open(sys.argv[2]))["output"]
ok = rec.get("tensor_root") == src.get("tensor_root") and rec.get("tensor_root")
sys.exit(0 if ok else 1)
EOF
for to in gptq ct-int mlx; do
	if "$BIN/qconvert" -q --threads 2 "$T/awq-1.awq" "$T/tw-$to.qpk" --to $to 2>"$T/err" &&
		"$BIN/qverify" --emit-record "$T/tw-$to.qpk" >"$T/rec.json" 2>"$T/err" &&
		"$BIN/qverify" --emit-record "$T/awq-1.awq" >"$T/srec.json" 2>"$T/err" &&
		python3 "$T/srcroot.py" "$T/rec.json" "$T/srec.json" &&
		"$BIN/qverify" "$T/tw-$to.qpk" --against "$T/awq-1.awq" >"$T/v.out" 2>&1 && grep -q "source_link: ok" "$T/v.out"; then
		ok
	else
		bad "QPK source -> $to: the record's source roots are not the source's"; head -3 "$T/err" "$T/v.out"
	fi
done

# copies from a QPK source: the second reader skips them, and their source leaves come from the
# bytes the conversion's reader returned (checked against the part digests of the QPK index as the
# copy reads each part to its end): the record's source roots must be the QPK's own and every
# output leaf the file's, with 1 and 4 threads; a flipped byte in a copied part fails the
# conversion (exit 3, the part's digest named) and leaves no output and no --report
cat >"$T/copyrec.py" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))["output"]
emb = d["embedded"]
leaves = lambda o: {t["name"]: (t["encoded"], t["decoded"]) for t in o["tensors"]}
ok = (emb["source"]["tensor_root"] == s["tensor_root"] and emb["output"]["tensor_root"] == d["output"]["tensor_root"]
      and leaves(emb["output"]) == leaves(d["output"]) and len(leaves(d["output"])) > 0)
sys.exit(0 if ok else 1)
EOF
if "$BIN/qconvert" -q "$S/wide.gguf" "$T/cp.qpk" 2>"$T/err" && "$BIN/qverify" --emit-record "$T/cp.qpk" >"$T/srec.json" 2>"$T/err"; then
	for ext in gguf safetensors; do
		for th in 1 4; do
			if "$BIN/qconvert" -q --threads $th "$T/cp.qpk" "$T/cp-$th.$ext" 2>"$T/err" &&
				"$BIN/qverify" --emit-record "$T/cp-$th.$ext" >"$T/rec.json" 2>"$T/err" &&
				python3 "$T/copyrec.py" "$T/rec.json" "$T/srec.json"; then
				ok
			else
				bad "QPK -> $ext copy, $th threads: record roots or leaves differ from the files'"; head -3 "$T/err"
			fi
		done
	done
	# a byte in the middle of the file, and the last byte of the data (the index starts where
	# the trailer's first 8 bytes say): that part is read last, and only the settling after the
	# copy can report it. With 2 threads the part digests are checked on a thread beside the
	# copy; with 1, in the reading thread; with and without the record.
	sz=$(wc -c <"$T/cp.qpk")
	ix=$(od -An -tu8 -j $((sz - 128)) -N8 "$T/cp.qpk" | tr -d ' ')
	for n in $((sz / 2)) $((ix - 1)); do
		cp "$T/cp.qpk" "$T/cpf.qpk"
		v=$(od -An -tu1 -j "$n" -N1 "$T/cpf.qpk" | tr -d ' ')
		printf "\\$(printf %03o $(( (v + 1) % 256 )))" | dd of="$T/cpf.qpk" bs=1 seek="$n" conv=notrunc 2>/dev/null
		for th in 1 2; do
			for rec in "" "--set qtk.provenance=none"; do
				"$BIN/qconvert" -q --threads $th $rec --report "$T/cpf.json" "$T/cpf.qpk" "$T/cpf.gguf" 2>"$T/err"
				rc=$?
				if [ $rc -eq 3 ] && grep -q "digest mismatch" "$T/err" && [ ! -e "$T/cpf.gguf" ] && [ ! -e "$T/cpf.json" ]; then
					ok
				else
					bad "a flipped byte at $n of a QPK, $th threads ${rec:-with the record}: exit $rc"; head -3 "$T/err"
				fi
			done
		done
	done
else
	bad "GGUF -> QPK for the copy records"; head -3 "$T/err"
fi

# a source directory's own record describes the source: an output in another container gets
# the new record only (the old file used to be carried beside it, and qverify read that one)
if "$BIN/qconvert" -q "$S/tiny-llama" "$T/rec-hf/" && [ -f "$T/rec-hf/qtk-provenance.json" ] &&
	"$BIN/qconvert" -q "$T/rec-hf/" "$T/rec.awq" --to awq &&
	"$BIN/qverify" "$T/rec.awq" >"$T/v.out" 2>&1; then
	if grep -q "qtk-provenance.json" "$T/v.out"; then bad "the source's record file was carried into a QPK output"; else ok; fi
	if grep -q "provenance: ok: record in kv qtk.provenance" "$T/v.out"; then ok; else bad "the QPK output's own record not read"; head -5 "$T/v.out"; fi
else
	bad "HF with a record -> QPK: conversion or qverify failed"; head -5 "$T/v.out"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
