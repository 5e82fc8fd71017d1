#!/bin/sh
# Behaviour-preservation check for restructurings (not part of `make test`):
#   sh tests/compare_trees.sh OLD_ROOT NEW_ROOT [WORKDIR]
# OLD_ROOT and NEW_ROOT are built checkouts (bin/ and build/samples/gen). Every command of the
# battery below runs once with each tree's programs on the same inputs, with the same relative
# output names in two scratch directories; stdout, stderr, exit status and every output file
# must be byte-identical. Uses the fixtures in ../shared/fixtures (or $QTK_FIXTURES) when present.
set -u
OLD=$(cd "$1" && pwd); NEW=$(cd "$2" && pwd)
W=${3:-$(mktemp -d)}
FX=${QTK_FIXTURES:-$(cd "$NEW/.." && pwd)/shared/fixtures}  # QTK_FIXTURES overrides
export SOURCE_DATE_EPOCH=1700000000 NO_COLOR=1 LC_ALL=C
rm -rf "$W"; mkdir -p "$W/in" "$W/old" "$W/new"
"$OLD/build/samples/gen" "$W/in/s" >/dev/null 2>&1
"$NEW/build/samples/gen" "$W/in/s-new" >/dev/null 2>&1
if ! diff -r "$W/in/s" "$W/in/s-new" >/dev/null; then echo "DIFF samples/gen output"; fails=1; else fails=0; fi
S=$W/in/s
inputs="$S/tiny-llama/ $S/tiny-llama-f32.gguf"
if [ -d "$FX" ]; then
	for f in tiny-f32 tiny-F16 tiny-Q4_K_M tiny-Q4_0 tiny-Q8_0 tiny-Q6_K tiny-IQ4_XS; do inputs="$inputs $FX/gguf/$f.gguf"; done
	for d in awq-g128 fp16 gptq-4-128-1 gptq-3-128-0 gptq-4-32-1s gptq-8-128-0 gptq-2-64-0; do inputs="$inputs $FX/hf/tiny-llama/$d/"; done
	inputs="$inputs $(ls "$FX"/gguf/split-f32/*00001-of*.gguf | head -1)"
fi
n=0; ran=0
run() { # run ID PROG ARGS... (in each scratch dir)
	id=$1; shift; prog=$1; shift
	for side in old new; do
		[ $side = old ] && R=$OLD || R=$NEW
		mkdir -p "$W/$side/$id"
		( cd "$W/$side/$id" && "$R/bin/$prog" "$@" >stdout 2>stderr; echo $? >rc )
	done
	ran=$((ran + 1))
	if ! diff -r "$W/old/$id" "$W/new/$id" >"$W/diff.$id" 2>&1; then
		echo "DIFF $id: $prog $*"; head -5 "$W/diff.$id"; fails=$((fails + 1))
	fi
}
for in in $inputs; do
	n=$((n + 1))
	run "i$n-json" qinspect --json "$in"
	run "i$n-stats" qinspect --json --stats "$in"
	run "i$n-sum" qinspect --summary "$in"
	run "i$n-md" qinspect --markdown "$in"
	run "i$n-mem" qinspect --memory "$in"
	run "i$n-memj" qinspect --json --memory "$in"
	run "i$n-ver" qverify --json "$in"
	for t in keep-gguf keep-st keep-hf keep-qpk q4_k Q4_K_M q8_0 awq gptq auto-exact f16 tar tarzst zip; do
		case $t in
		keep-gguf) run "c$n-$t" qconvert -q "$in" out.gguf ;;
		keep-st) run "c$n-$t" qconvert -q "$in" out.safetensors ;;
		keep-hf) run "c$n-$t" qconvert -q "$in" out/ ;;
		keep-qpk) run "c$n-$t" qconvert -q "$in" out.qpk ;;
		tar) run "c$n-$t" qconvert -q "$in" out.tar ;;
		tarzst) run "c$n-$t" qconvert -q "$in" out.tar.zst ;;
		zip) run "c$n-$t" qconvert -q "$in" out.zip ;;
		awq|gptq) run "c$n-$t" qconvert -q --to $t --report rep.json "$in" out.qpk ;;
		*) run "c$n-$t" qconvert -q --to $t --report rep.json "$in" out.gguf ;;
		esac
	done
	run "c$n-dry" qconvert -v --dry-run --to Q4_K_M "$in" x.gguf
	# read back and verify what was written
	run "v$n-against" qverify --json --against "$in" "$W/new/c$n-q8_0/out.gguf"
	run "v$n-rt" qverify --json "$W/new/c$n-keep-qpk/out.qpk"
	run "i$n-rt" qinspect --json "$W/new/c$n-keep-hf/out/"
	run "d$n-diff" qinspect --diff "$in" "$W/new/c$n-q8_0/out.gguf"
	run "d$n-diffk" qinspect --diff "$in" "$W/new/c$n-keep-hf/out/"
done
echo "$ran commands compared, $fails differ"
[ "$fails" -eq 0 ]
