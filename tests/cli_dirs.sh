#!/bin/sh
# cli_dirs.sh - a Hugging Face directory OUTPUT is replaced as a whole (docs/cli.md, "Atomic
# outputs"): the new model's files appear together, the old model's files go, a directory
# holding files qtk did not write is refused without --force, a failed run leaves it untouched;
# and qverify DIR reports weight files that are not part of the model.
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
T=$(mktemp -d /tmp/qtk-dirs-XXXXXX)
trap 'umount "$T/mnt" 2>/dev/null; rm -rf "$T"' EXIT
pass=0; fail=0
SOURCE_DATE_EPOCH=1700000000; export SOURCE_DATE_EPOCH

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
no_temps() { n=$(find "$2" -name '.*.qtk-*' | wc -l); if [ "$n" -eq 0 ]; then ok; else bad "$1: $n temporaries left"; fi; }
# listing DIR: its entries, one line
listing() { ls -A "$1" | tr '\n' ' '; }
# same_listing NAME DIR WANT
same_listing() { got=$(listing "$2"); if [ "$got" = "$3" ]; then ok; else bad "$1: '$2' holds '$got', expected '$3'"; fi; }
snap() { (cd "$1" && ls -A | sort | xargs sha256sum); }

S=$T/samples
"$B/samples/gen" "$S" >/dev/null || bad "sample generator"
G=$S/tiny-llama-f32.gguf
H=$S/tiny-llama
ONE="README.md config.json generation_config.json model.safetensors qtk-provenance.json tokenizer.model tokenizer_config.json "

# --- sharded, then one file into the same directory: the shards go with their index
run "shards" 0 "$BIN/qconvert" -q "$H" "$T/sh/" --split-max-size 1M
n=$(ls "$T/sh" | grep -c '^model-0000.-of-0000.\.safetensors$')
if [ "$n" -gt 1 ]; then ok; else bad "shards: $n shards"; fi
run "one file over shards" 0 "$BIN/qconvert" "$H" "$T/sh/"
same_listing "one file over shards" "$T/sh" "$ONE"
out_has "one file over shards: summary names OUTPUT" "$T/sh/model.safetensors"
no_temps "one file over shards" "$T"
run "qverify after one file over shards" 0 "$BIN/qverify" "$T/sh/"
# --- and back: shards over one file leave no model.safetensors
run "shards over one file" 0 "$BIN/qconvert" -q "$G" "$T/sh/" --split-max-size 1M --to f16
if [ ! -e "$T/sh/model.safetensors" ] && [ -f "$T/sh/model.safetensors.index.json" ]; then ok
else bad "shards over one file: $(listing "$T/sh")"; fi
run "qverify shards" 0 "$BIN/qverify" "$T/sh/"

# --- an empty existing directory is fine
mkdir "$T/empty"
run "empty dir" 0 "$BIN/qconvert" -q "$H" "$T/empty"
same_listing "empty dir" "$T/empty" "$ONE"

# --- files qtk did not write: refused (exit 2), untouched; --force replaces everything
mkdir "$T/foreign" && echo notes >"$T/foreign/notes.txt"
run "foreign file" 2 "$BIN/qconvert" -q "$H" "$T/foreign/"
err_has "foreign file" "holds 1 file qtk did not write ('notes.txt')"
err_has "foreign file" "--force"
same_listing "foreign file untouched" "$T/foreign" "notes.txt "
run "foreign file --force" 0 "$BIN/qconvert" -q --force "$H" "$T/foreign/"
same_listing "foreign file --force" "$T/foreign" "$ONE"
# a subdirectory is not qtk's either
mkdir -p "$T/sub/cache" && cp "$T/empty/"* "$T/sub/"
run "subdirectory" 2 "$BIN/qconvert" -q "$H" "$T/sub/"
err_has "subdirectory" "'cache/'"
# another tool's model (the same file names, no qtk-provenance.json): refused
cp -r "$H" "$T/theirs"
snap "$T/theirs" >"$T/theirs.before"
run "model qtk did not write" 2 "$BIN/qconvert" -q "$G" "$T/theirs/"
err_has "model qtk did not write" "no qtk-provenance.json"
if snap "$T/theirs" | cmp -s - "$T/theirs.before"; then ok; else bad "model qtk did not write: changed"; fi
# the current directory (or one holding it) cannot be swapped out from under the shell
run "current directory" 2 sh -c "cd '$T/empty' && '$PWD/$BIN/qconvert' -q '$H' ./"
err_has "current directory" "current directory"

# --- a failed run (exit 1 from --exact) leaves the old directory as it was, without temporaries
snap "$T/empty" >"$T/empty.before"
run "failed run" 1 "$BIN/qconvert" -q --exact --to awq "$H" "$T/empty/"
if snap "$T/empty" | cmp -s - "$T/empty.before"; then ok; else bad "failed run: OUTPUT changed"; fi
no_temps "failed run" "$T"
# a new directory that fails is not created
run "failed run, new dir" 1 "$BIN/qconvert" -q --exact --to awq "$H" "$T/new/"
if [ ! -e "$T/new" ]; then ok; else bad "failed run, new dir: '$T/new' exists"; fi
no_temps "failed run, new dir" "$T"

# --- a mount point (a container's volume) cannot be renamed: its files are replaced in place
mkdir -p "$T/mnt"
if mount -t tmpfs -o size=64m tmpfs "$T/mnt" 2>/dev/null; then
	run "mount point: shards" 0 "$BIN/qconvert" -q "$H" "$T/mnt/" --split-max-size 1M
	run "mount point: one file over shards" 0 "$BIN/qconvert" -q "$H" "$T/mnt/"
	same_listing "mount point: one file over shards" "$T/mnt" "$ONE"
	snap "$T/mnt" >"$T/mnt.before"
	run "mount point: failed run" 1 "$BIN/qconvert" -q --exact --to awq "$H" "$T/mnt/"
	if snap "$T/mnt" | cmp -s - "$T/mnt.before"; then ok; else bad "mount point: failed run changed it"; fi
	no_temps "mount point: failed run" "$T/mnt"
	umount "$T/mnt"
else
	echo "skipped: output directory that is a mount point (cannot mount a tmpfs: needs root)"
fi

# --- qverify DIR: weight files that are not part of the model
run "stray: setup" 0 "$BIN/qconvert" -q "$H" "$T/st/" --split-max-size 1M
run "stray: setup one" 0 "$BIN/qconvert" -q "$H" "$T/one/"
cp "$T/st/"model-0000*.safetensors "$T/one/"
run "stray shards" 1 "$BIN/qverify" "$T/one/"
out_has "stray shards" "stray_files: failed: "
out_has "stray shards" "model-00001-of-"
run "stray shards json" 1 "$BIN/qverify" --json "$T/one/"
out_has "stray shards json" '"check":	"stray_files"'
rm "$T/one/"model-0000*.safetensors
: >"$T/one/pytorch_model.bin"
run "stray pickle" 0 "$BIN/qverify" --allow-code "$T/one/" # a pickle is code (the audit): allowed, so the stray check shows
out_has "stray pickle" "stray_files: note: 1 weight file .*pytorch_model.bin"
err_has "stray pickle" "warning: .*pytorch_model.bin"
# with an index, an extra *.safetensors is not loaded: a note
: >"$T/st/consolidated.safetensors"
run "stray beside an index" 0 "$BIN/qverify" "$T/st/"
out_has "stray beside an index" "stray_files: note: .*consolidated.safetensors"
run "stray beside an index (index named)" 0 "$BIN/qverify" "$T/st/model.safetensors.index.json"
out_has "stray beside an index (index named)" "consolidated.safetensors"
run "clean dir" 0 "$BIN/qverify" "$T/sh/"
if grep -q stray_files "$T/out"; then bad "clean dir: reports stray files"; else ok; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
