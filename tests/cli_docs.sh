#!/bin/sh
# cli_docs.sh - the documentation matches the programs: every option a program's parser accepts
# is in its --help, its man page (options list and SYNOPSIS), and nothing else is; the man
# pages name every input and output kind; the sample generator has a --help and refuses unknown
# options; the `make demo` commands give a GGUF with a vocabulary and an AWQ directory with
# groups of 128.
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
MAN=${QTK_MAN:-man}
T=$(mktemp -d /tmp/qtk-docs-XXXXXX)
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
err_has() { if grep -q -- "$2" "$T/err"; then ok; else bad "$1: stderr lacks '$2'"; head -5 "$T/err"; fi; }

# options in --help: the words that start a line's option column ("  -t, --to LAYOUT", "  --a, --b")
help_opts() { "$BIN/$1" --help | sed -n 's/^  \(-.*\)/\1/p' | sed 's/   .*//' | tr ',' '\n' | sed 's/^ *//; s/ .*//; s/=.*//' | grep '^-' | sort -u; }
# options in the man page: every Fl argument (".Fl -to", "Fl t" -> -t), in a section or in the SYNOPSIS
man_opts() {
	sed -n "$2" "$MAN/$1.1" | grep -o 'Fl [-a-zA-Z][-a-zA-Z]*' | sed 's/^Fl //' |
		while read -r f; do
			# "Fl qv" is -q -v; "Fl ngl" is llama.cpp's one option -ngl when --help lists it
			case $f in -*) echo "-$f" ;; ?) echo "-$f" ;;
			*) if grep -qx -- "-$f" "$T/help.$1" 2>/dev/null; then echo "-$f"; else echo "$f" | sed 's/./-&\n/g' | grep .; fi ;; esac
		done | sort -u
}
for p in qconvert qinspect qverify; do
	help_opts $p >"$T/help.$p"
	man_opts $p '/^\.Sh DESCRIPTION/,/^\.Sh ENVIRONMENT/p' | grep -v -e '^--$' >"$T/man.$p"
	man_opts $p '/^\.Sh SYNOPSIS/,/^\.Sh DESCRIPTION/p' >"$T/syn.$p"
	[ -s "$T/help.$p" ] && [ -s "$T/man.$p" ] || bad "$p: no options found in --help or the man page"
	d=$(comm -3 "$T/help.$p" "$T/man.$p" | tr -d '\t' | tr '\n' ' ')
	if [ -z "$d" ]; then ok; else bad "$p: --help and man page disagree on: $d"; fi
	# the SYNOPSIS shows every option, in one of its spellings ("-q" for "-q, --quiet")
	"$BIN/$p" --help | sed -n 's/^  \(-.*\)/\1/p' | sed 's/   .*//' | tr -d ',' |
		sed 's/ [A-Z][A-Z.|a-z=]*//g; s/ [a-z]*|[a-z|]*//g' >"$T/groups.$p"
	while read -r g; do
		hit=0
		for o in $g; do grep -qx -- "$o" "$T/syn.$p" && hit=1; done
		if [ $hit -eq 1 ]; then ok; else bad "$p: SYNOPSIS lacks $g"; fi
	done <"$T/groups.$p"
	# every documented option is one the parser knows
	for o in $(cat "$T/help.$p" "$T/man.$p" "$T/syn.$p" | sort -u); do
		"$BIN/$p" "$o" x y >"$T/out" 2>"$T/err"
		if grep -q "unknown option '$o" "$T/err"; then bad "$p: documented option $o is unknown to the parser"; else ok; fi
	done
	# `--` ends the options (docs/cli.md, common behaviour)
	if [ $p = qconvert ]; then "$BIN/$p" -- -nonexistent-file "$T/-out.gguf" >"$T/out" 2>"$T/err"
	else "$BIN/$p" -- -nonexistent-file >"$T/out" 2>"$T/err"; fi
	if grep -q "unknown option" "$T/err"; then bad "$p: '--' does not end the options"; else ok; fi
	err_has "$p: '--' then a file named like an option" "-nonexistent-file"
	# the common flags of docs/cli.md
	for o in -h --help --version -q --quiet -v --verbose --progress --no-progress --no-color; do
		if grep -qx -- "$o" "$T/help.$p"; then ok; else bad "$p: --help lacks common option $o"; fi
	done
done

# --- every input and output kind is named in the man pages (and the help)
for p in qconvert qinspect qverify; do
	for k in 'split' 'safetensors' 'index.json' 'Hugging Face' 'QPK' '\.tar' '\.zip' '\.tar\.zst' '\.zst'; do
		if sed -n '/^\.Sh DESCRIPTION/,/^\.Sh ENVIRONMENT/p' "$MAN/$p.1" | grep -q -- "$k"; then ok
		else bad "$p.1: input kind '$k' not named"; fi
		if "$BIN/$p" --help | grep -q -- "$k"; then ok; else bad "$p --help: input kind '$k' not named"; fi
	done
done
for k in 'bundle' '\.tar\.zst' '\.zip' '\.qpk' '\.awq' 'model.safetensors.index.json'; do
	if grep -q -- "$k" "$MAN/qconvert.1"; then ok; else bad "qconvert.1: output kind '$k' not named"; fi
done
# --summary is the default only off a terminal
if sed -n '/^\.It Fl -summary/,/^\.It/p' "$MAN/qinspect.1" | grep -q 'terminal'; then ok
else bad "qinspect.1: --summary is described as the default without the browser"; fi

# --- the sample generator
GEN=$(cd "$(dirname "$B/samples/gen")" && pwd)/gen
mkdir "$T/cwd"
run "gen --help" 0 sh -c "cd '$T/cwd' && '$GEN' --help"
out_has "gen --help" "usage: gen"
if [ -z "$(ls -A "$T/cwd")" ]; then ok; else bad "gen --help wrote '$(ls -A "$T/cwd")'"; fi
run "gen unknown option" 2 sh -c "cd '$T/cwd' && '$GEN' --bogus"
err_has "gen unknown option" "unknown option '--bogus'"
if [ -z "$(ls -A "$T/cwd")" ]; then ok; else bad "gen --bogus wrote '$(ls -A "$T/cwd")'"; fi
run "gen two outputs" 2 "$B/samples/gen" "$T/a" "$T/b"
run "gen" 0 "$B/samples/gen" "$T/samples"
run "gen again (replaces its own directory)" 0 "$B/samples/gen" "$T/samples"
for f in tokenizer.model tokenizer_config.json; do
	if [ -s "$T/samples/tiny-llama/$f" ]; then ok; else bad "gen: tiny-llama/$f missing"; fi
done

# --perturb: same seed, same bytes; another seed, other bits; same layout, still a readable GGUF
P="$T/samples/tiny-llama-f32.gguf"
run "gen --perturb" 0 "$B/samples/gen" --perturb 1 "$P" "$T/p1.gguf"
out_has "gen --perturb" "matrices perturbed"
run "gen --perturb again" 0 "$B/samples/gen" --perturb 1 "$P" "$T/p1b.gguf"
run "gen --perturb, seed 2" 0 "$B/samples/gen" --perturb 2 "$P" "$T/p2.gguf"
if cmp -s "$T/p1.gguf" "$T/p1b.gguf"; then ok; else bad "gen --perturb: same seed, other bytes"; fi
if ! cmp -s "$T/p1.gguf" "$T/p2.gguf" && ! cmp -s "$T/p1.gguf" "$P"; then ok
else bad "gen --perturb: no bits changed, or the same for two seeds"; fi
if [ "$(wc -c <"$T/p1.gguf")" -eq "$(wc -c <"$P")" ]; then ok; else bad "gen --perturb: size changed"; fi
# only weights change: the header, metadata and tensor table are byte-identical
"$BIN/qinspect" --json "$P" | grep -v '"path"\|"file"\|sha256\|"size_bytes"' >"$T/pa.json"
"$BIN/qinspect" --json "$T/p1.gguf" | grep -v '"path"\|"file"\|sha256\|"size_bytes"' >"$T/pb.json"
if [ -s "$T/pa.json" ] && cmp -s "$T/pa.json" "$T/pb.json"; then ok; else bad "gen --perturb: qinspect reports differ"; fi
run "gen --perturb, missing output" 2 "$B/samples/gen" --perturb 1 "$P"
run "gen --perturb, bad seed" 2 "$B/samples/gen" --perturb x "$P" "$T/p3.gguf"
run "gen --perturb, not a GGUF" 1 "$B/samples/gen" --perturb 1 "$T/samples/tiny-llama/config.json" "$T/p3.gguf"

# --- the demo: the Makefile's own commands, on a fresh sample directory
sed -n '/^demo:/,/^$/p' Makefile | sed -n 's/^\t\(bin\/q[a-z]*\)/\1/p' >"$T/demo.cmds"
if [ "$(wc -l <"$T/demo.cmds")" -ge 2 ]; then ok; else bad "demo: no commands found in the Makefile"; fi
while read -r prog rest; do
	# shellcheck disable=SC2086
	eval "\"$BIN/$(basename "$prog")\" $(echo "$rest" | sed "s#\$(B)/samples#$T/samples#g")" >"$T/out" 2>"$T/err" ||
		bad "demo: $prog $rest failed: $(head -c 300 "$T/err")"
done <"$T/demo.cmds"
gg=$(ls "$T"/samples/*.gguf | grep -v tiny-llama-f32 | head -n 1)
if [ -n "$gg" ]; then ok; else bad "demo: no GGUF made"; fi
# its vocabulary is the sample's: both GGUFs give the same tokenizer.model back
run "demo GGUF to HF" 0 "$BIN/qconvert" -q "$gg" "$T/v1/" --to f16
run "sample GGUF to HF" 0 "$BIN/qconvert" -q "$T/samples/tiny-llama-f32.gguf" "$T/v2/" --to f16
if [ -s "$T/v1/tokenizer.model" ] && cmp -s "$T/v1/tokenizer.model" "$T/v2/tokenizer.model"; then ok
else bad "demo GGUF: its vocabulary is not the sample's (tokenizer.model differs or is missing)"; fi
"$BIN/qinspect" --json "$gg" >"$T/g.json"
if grep -q '"tokenizer.ggml.model":[[:space:]]*"llama"' "$T/g.json"; then ok; else bad "demo GGUF: no tokenizer.ggml.model llama"; fi
awq=$(ls -d "$T"/samples/*awq*/ 2>/dev/null | head -n 1)
if [ -n "$awq" ] && grep -Eq '"group_size":[[:space:]]*128' "$awq/config.json"; then ok; else bad "demo: no AWQ directory with group_size 128"; fi
hs=$(sed -n 's/.*"hidden_size": *\([0-9]*\).*/\1/p' "$T/samples/tiny-llama/config.json")
is=$(sed -n 's/.*"intermediate_size": *\([0-9]*\).*/\1/p' "$T/samples/tiny-llama/config.json")
if [ -n "$hs" ] && [ -n "$is" ] && [ $((hs % 128)) -eq 0 ] && [ $((is % 128)) -eq 0 ]; then ok
else bad "sample: hidden sizes are not multiples of 128"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
