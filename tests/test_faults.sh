#!/bin/sh
# test_faults.sh - fault injection for the programs (docs/cli.md: exit status, atomic outputs):
# disk full (a 1 MiB tmpfs), a read-only and a missing output directory, output paths that
# collide with files or directories, non-regular and truncated inputs, and interruption
# (SIGINT, SIGTERM, SIGKILL) in the middle of writing a ~150 MB conversion. Prints "skipped: ..."
# for what cannot run here (mounting needs root) and "N passed, N failed" at the end.
#   QTK_BUILD (build), QTK_BIN (bin); QTK_FAULTS_STRICT=1 makes known open issues failures.
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
T=$(mktemp -d "${TMPDIR:-/tmp}/qtk-faults-XXXXXX")
MOUNTS=""
cleanup() {
	for m in $MOUNTS; do umount "$m" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
pass=0; fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
# known NAME WHY: an open issue reported to its owner; a failure only under QTK_FAULTS_STRICT=1
known() {
	if [ "${QTK_FAULTS_STRICT:-0}" = 1 ]; then bad "$1: $2"; else echo "skipped: known issue: $1: $2"; fi
}
run() {
	name=$1; want=$2; shift 2
	"$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" -eq "$want" ]; then ok; else bad "$name: exit $got, expected $want"; sed 's/^/  stderr: /' "$T/err" | head -5; fi
}
err_has() { if grep -q -- "$2" "$T/err"; then ok; else bad "$1: stderr lacks '$2'"; head -5 "$T/err"; fi; }
no_file() { if [ ! -e "$2" ]; then ok; else bad "$1: '$2' exists"; fi; }
temps_in() { find "$1" -name '.*.qtk-*' 2>/dev/null | wc -l; }
no_temps() { n=$(temps_in "$2"); if [ "$n" -eq 0 ]; then ok; else bad "$1: $n temporaries left in $2"; find "$2" -name '.*.qtk-*' | head -3; fi; }
# mount_tmpfs DIR OPTIONS: 0 when mounted (root), else 1
mount_tmpfs() {
	mkdir -p "$1"
	if mount -t tmpfs -o "$2" tmpfs "$1" 2>/dev/null; then MOUNTS="$1 $MOUNTS"; return 0; fi
	return 1
}

S=$T/samples
"$B/samples/gen" "$S" >/dev/null || bad "sample generator"
G=$S/tiny-llama-f32.gguf   # 7 MB F32; its F16 conversion (3.6 MB) cannot fit in 1 MiB
H=$S/tiny-llama

# ---- disk full: every output kind -> exit 4, a clear message, no OUTPUT, no temporaries
if mount_tmpfs "$T/full" size=1m; then
	for o in out.gguf out.safetensors out.qpk out.awq out.tar out.tar.zst out.zip; do
		to=f16; [ "$o" = out.awq ] && to=awq
		run "disk full $o" 4 "$BIN/qconvert" "$G" "$T/full/$o" --to $to
		err_has "disk full $o" "No space left on device"
		no_file "disk full $o" "$T/full/$o"
		no_temps "disk full $o" "$T/full"
	done
	run "disk full split" 4 "$BIN/qconvert" "$G" "$T/full/sp.gguf" --to f16 --split-max-size 600K
	err_has "disk full split" "No space left on device"
	n=$(find "$T/full" -name 'sp*' | wc -l)
	if [ "$n" -eq 0 ]; then ok; else bad "disk full split: $n shards left"; fi
	no_temps "disk full split" "$T/full"
	run "disk full hf dir" 4 "$BIN/qconvert" "$G" "$T/full/hf/" --to f16
	err_has "disk full hf dir" "No space left on device"
	no_temps "disk full hf dir" "$T/full"
	if [ ! -e "$T/full/hf" ]; then ok
	elif [ -d "$T/full/hf" ] && [ -z "$(ls -A "$T/full/hf")" ]; then
		known "disk full hf dir" "an empty OUTPUT directory is left behind (it did not exist before)"
	else bad "disk full hf dir: partial OUTPUT directory: $(ls -A "$T/full/hf" | head -3 | tr '\n' ' ')"; fi
	rm -rf "$T/full/hf"
	# a previous OUTPUT survives a failed rewrite
	echo "previous version" >"$T/full/keep.gguf"
	run "disk full over existing" 4 "$BIN/qconvert" "$G" "$T/full/keep.gguf" --to f16
	if [ "$(cat "$T/full/keep.gguf")" = "previous version" ]; then ok; else bad "disk full over existing: OUTPUT changed"; fi
	no_temps "disk full over existing" "$T/full"
else
	echo "skipped: disk full (cannot mount a tmpfs: needs root)"
fi

# ---- unwritable output directory (read-only mount; root ignores file modes)
if mount_tmpfs "$T/ro" ro,size=1m; then
	run "read-only dir" 4 "$BIN/qconvert" "$G" "$T/ro/out.gguf" --to f16
	err_has "read-only dir" "Read-only file system"
	run "read-only dir hf" 4 "$BIN/qconvert" "$G" "$T/ro/hf/" --to f16
	no_file "read-only dir hf" "$T/ro/hf"
elif [ "$(id -u)" -ne 0 ]; then
	mkdir -p "$T/ro" && chmod 555 "$T/ro"
	run "unwritable dir" 4 "$BIN/qconvert" "$G" "$T/ro/out.gguf" --to f16
	no_file "unwritable dir" "$T/ro/out.gguf"
else
	echo "skipped: unwritable directory (root, and cannot mount a read-only tmpfs)"
fi
run "missing output dir" 4 "$BIN/qconvert" "$G" "$T/no/such/dir/out.gguf" --to f16
err_has "missing output dir" "cannot create output"

# ---- collisions: OUTPUT names a file where a directory is needed, and the reverse
: >"$T/afile"
run "hf output over a file" 4 "$BIN/qconvert" "$G" "$T/afile/" --to f16
err_has "hf output over a file" "not a directory"
if [ -f "$T/afile" ] && [ ! -s "$T/afile" ]; then ok; else bad "hf output over a file: the file changed"; fi
run "output under a file" 4 "$BIN/qconvert" "$G" "$T/afile/x.gguf" --to f16
mkdir -p "$T/d.gguf"
"$BIN/qconvert" -q "$G" "$T/d.gguf" --to f16 >"$T/out" 2>"$T/err"; rc=$?
case $rc in
0) if [ -f "$T/d.gguf/config.json" ]; then ok; else bad "existing dir named *.gguf: exit 0 but no HF directory"; fi ;;
4) ok; err_has "existing dir named *.gguf" "d.gguf" ;;
*) bad "existing dir named *.gguf: exit $rc (expected 0: an HF directory, or 4)" ;;
esac
no_temps "existing dir named *.gguf" "$T"
if [ -z "$(ls -A "$T/d.gguf" | grep -v -e config.json -e '\.json$' -e '\.safetensors$' -e tokenizer -e '^README.md$')" ]; then ok
else bad "existing dir named *.gguf: unexpected entries"; fi
# OUTPUT = INPUT: refused, or rewritten atomically; never a truncated input
cp "$S/tiny-llama-f32.gguf" "$T/same.gguf"
"$BIN/qconvert" -q "$T/same.gguf" "$T/same.gguf" --to f16 >"$T/out" 2>"$T/err"; rc=$?
if "$BIN/qinspect" --summary "$T/same.gguf" >/dev/null 2>&1 && { [ $rc -eq 0 ] || [ $rc -eq 2 ] || [ $rc -eq 4 ]; }; then ok
else bad "output = input: exit $rc and the file is $("$BIN/qinspect" --summary "$T/same.gguf" >/dev/null 2>&1 && echo valid || echo broken)"; fi

# ---- inputs that are not regular files, and truncated inputs
mkfifo "$T/fifo.gguf" 2>/dev/null
if [ -p "$T/fifo.gguf" ]; then
	timeout 10 "$BIN/qinspect" --json "$T/fifo.gguf" >"$T/out" 2>"$T/err"; rc=$?
	if [ $rc -eq 3 ] || [ $rc -eq 4 ]; then ok; else bad "fifo input: exit $rc (124 = hung), expected 3 or 4"; fi
fi
timeout 10 "$BIN/qinspect" --json /dev/zero >"$T/out" 2>"$T/err"; rc=$?
if [ $rc -eq 3 ] || [ $rc -eq 4 ]; then ok; else bad "device input: exit $rc, expected 3 or 4"; fi
ln -s "$G" "$T/link.gguf"
for cut in 3 23 100 4096 1000000; do
	head -c $cut "$G" >"$T/cut.gguf"
	run "truncated input ($cut bytes)" 3 "$BIN/qinspect" --json "$T/cut.gguf"
	run "truncated input ($cut bytes) convert" 3 "$BIN/qconvert" "$T/cut.gguf" "$T/cut-out.gguf" --to f16
	no_file "truncated input convert" "$T/cut-out.gguf"
done
head -c 1000000 "$H/model.safetensors" >"$T/cut.safetensors"
run "truncated safetensors" 3 "$BIN/qinspect" --json "$T/cut.safetensors"

# ---- short reads and allocation failures: unit-tested through qtk_test_max_read and
# qtk_test_fail_alloc_at (tests/test_*.c); the programs have no hook to inject them.
echo "skipped: CLI-level short reads (no QTK_TEST_MAX_READ hook in the programs; unit-tested)"
echo "skipped: CLI-level allocation failures (no hook in the programs; unit-tested)"

# ---- interruption mid-write: a ~150 MB F16 model converted to q4_k
BIG=$B/faults/bench20.gguf
if [ ! -s "$BIG" ]; then mkdir -p "$B/faults" && "$B/samples/gen" --bench 20 "$BIG" >/dev/null || bad "bench model"; fi
I=$T/int; mkdir -p "$I"
# interrupt SIG OUT [LAYOUT]: start a conversion, wait until its temporary holds data, send SIG;
# sets $rc (exit status) and $saw (1 when the temporary was seen growing)
interrupt() {
	sig=$1; out=$2; to=${3:-q4_k}
	"$BIN/qconvert" -q --threads 1 "$BIG" "$out" --to "$to" >"$T/out" 2>"$T/err" &
	pid=$!
	saw=0; i=0
	while [ $i -lt 400 ]; do
		tmp=$(find "$I" -name '.*.qtk-*' -type f -size +0 2>/dev/null | head -n 1)
		if [ -n "$tmp" ]; then saw=1; break; fi
		kill -0 $pid 2>/dev/null || break
		sleep 0.05; i=$((i + 1))
	done
	kill -s "$sig" $pid 2>/dev/null
	wait $pid; rc=$?
}
for sig in INT TERM; do
	case $sig in INT) want=130 ;; TERM) want=143 ;; esac
	interrupt $sig "$I/out.gguf"
	if [ $saw -eq 1 ]; then ok; else bad "SIG$sig: the temporary never grew (conversion too fast?)"; fi
	if [ $rc -eq $want ]; then ok; else bad "SIG$sig: exit $rc, expected $want"; fi
	case $sig in INT) what=interrupted ;; TERM) what=terminated ;; esac
	err_has "SIG$sig line" "^qconvert: $what: converting .*bench20.gguf to .*out.gguf, nothing written\$"
	no_file "SIG$sig" "$I/out.gguf"
	no_temps "SIG$sig" "$I"
done
# SIGINT with a previous complete OUTPUT: it is left as it was
"$BIN/qconvert" -q "$G" "$I/prev.gguf" --to q4_0 --pure && cp "$I/prev.gguf" "$T/prev.copy"
interrupt INT "$I/prev.gguf"
if [ $rc -eq 130 ]; then ok; else bad "SIGINT over existing: exit $rc"; fi
if cmp -s "$I/prev.gguf" "$T/prev.copy"; then ok; else bad "SIGINT over existing: OUTPUT changed"; fi
no_temps "SIGINT over existing" "$I"
# the progress line (forced with --progress, drawn on every update): throughput, ETA, the tensor
# and how far into it a conversion is (token_embd is 32000 x 1024: four windows of rows)
SOURCE_DATE_EPOCH=1 QTK_PROGRESS_INTERVAL=0 "$BIN/qconvert" --progress --threads 2 "$BIG" "$I/p.gguf" --to q8_0 >"$T/out" 2>"$T/err"
tr '\r' '\n' <"$T/err" >"$T/lines"
if grep -Eq '^\[#*\.*\] +[0-9.]+%  1/12  .*MB/s  ETA [0-9]+:[0-9]+  token_embd\.weight ([1-9]|[1-9][0-9])%' "$T/lines"; then ok
else bad "progress inside token_embd.weight"; head -c 600 "$T/lines"; fi
if grep -q 'token_embd.weight 0%' "$T/lines" && grep -q '100.0%  12/12' "$T/lines"; then ok; else bad "progress start and end"; fi
SOURCE_DATE_EPOCH=1 "$BIN/qconvert" --no-progress --threads 1 "$BIG" "$I/np.gguf" --to q8_0 >"$T/out2" 2>"$T/err2"
if cmp -s "$I/p.gguf" "$I/np.gguf" && [ ! -s "$T/err2" ]; then ok; else bad "progress changed the output or --no-progress printed"; fi
# qverify: bytes read of the digests, with the tensor being read
QTK_PROGRESS_INTERVAL=0 "$BIN/qverify" --progress "$I/p.gguf" >"$T/out" 2>"$T/err"
if tr '\r' '\n' <"$T/err" | grep -Eq '^\[#*\.*\] +[0-9.]+%  .*(token_embd|output)\.weight'; then ok; else bad "qverify progress names the tensor"; fi
"$BIN/qverify" "$I/p.gguf" >"$T/out" 2>"$T/err"
if [ ! -s "$T/err" ]; then ok; else bad "qverify: progress without a terminal"; fi
rm -f "$I/p.gguf" "$I/np.gguf"
# SIGKILL cannot be caught: OUTPUT must not exist; a hidden temporary may remain (expected)
interrupt KILL "$I/k.gguf"
if [ $rc -eq 137 ]; then ok; else bad "SIGKILL: exit $rc, expected 137"; fi
no_file "SIGKILL" "$I/k.gguf"
left=$(find "$I" -name '.*.qtk-*' | wc -l)
if [ "$left" -le 1 ]; then ok; else bad "SIGKILL: $left temporaries"; fi
for f in $(find "$I" -name '.*.qtk-*'); do
	case $(basename "$f") in .k.gguf.qtk-*) ok ;; *) bad "SIGKILL: unexpected temporary name $f" ;; esac
	rm -rf "$f"
done
# SIGKILL over a previous OUTPUT: still the previous version
"$BIN/qconvert" -q "$G" "$I/prev2.gguf" --to q4_0 --pure && cp "$I/prev2.gguf" "$T/prev2.copy"
interrupt KILL "$I/prev2.gguf"
if cmp -s "$I/prev2.gguf" "$T/prev2.copy"; then ok; else bad "SIGKILL over existing: OUTPUT changed"; fi
find "$I" -name '.*.qtk-*' -exec rm -rf {} +
# interrupting an HF directory output: no directory (or the old one) and no temporaries
interrupt INT "$I/hf/" awq
if [ $saw -eq 1 ]; then ok; else bad "SIGINT hf dir: the temporary never grew"; fi
if [ $rc -eq 130 ]; then ok; else bad "SIGINT hf dir: exit $rc"; fi
no_temps "SIGINT hf dir" "$I"
if [ ! -e "$I/hf" ]; then ok
elif [ -d "$I/hf" ] && [ -z "$(ls -A "$I/hf")" ]; then known "SIGINT hf dir" "an empty OUTPUT directory is left behind"
else bad "SIGINT hf dir: partial OUTPUT: $(ls -A "$I/hf" | tr '\n' ' ')"; fi

# interrupting a bundle: its hidden temporary directory goes with what the inner writer left in it
for b in INT:b.tar TERM:b.tar.zst HUP:b.zip; do
	sig=${b%%:*}; o=${b#*:}
	case $sig in INT) want=130 ;; TERM) want=143 ;; HUP) want=129 ;; esac
	interrupt $sig "$I/$o"
	if [ $saw -eq 1 ]; then ok; else bad "SIG$sig $o: the temporary never grew"; fi
	if [ $rc -eq $want ]; then ok; else bad "SIG$sig $o: exit $rc, expected $want"; fi
	no_file "SIG$sig $o" "$I/$o"
	no_temps "SIG$sig $o" "$I"
	find "$I" -name '.*.qtk-*' -exec rm -rf {} + 2>/dev/null
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
