#!/bin/sh
# fuzz_replay.sh - replay every fuzz target's seed corpus ($QTK_BUILD/fuzz/corpus/<target>/,
# generated from the project's own sample generator by tests/fuzz/mkcorpus.sh) and
# regression inputs (tests/fuzz/regress/<target>/) through its plain replay driver
# ($QTK_BUILD/fuzz/replay_<target>, built by `make fuzz-drivers`; no clang needed).
# One test per input; prints "N passed, N failed". Inputs in tests/fuzz/pending/<target>/
# reproduce open bugs in files owned elsewhere: they are run and reported as "skipped:" lines
# (saying whether they still crash the replay driver), never counted as failures.
B=${QTK_BUILD:-build}
F=tests/fuzz
TARGETS="gguf safetensors st_index hfdir qpk archive zst spm imatrix prov hfmap ct mlx bnb mxfp4"
TARGETS="$TARGETS sigbundle jsonfmt"
pass=0; fail=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

need=0
for t in $TARGETS; do
	d=$B/fuzz/replay_$t
	if [ ! -x "$d" ] || [ -n "$(find $F -newer "$d" -name '*.[ch]' 2>/dev/null | head -n 1)" ]; then need=1; fi
done
if [ $need -eq 1 ]; then
	${MAKE:-make} -s B="$B" fuzz-drivers >"$out" 2>&1 || { cat "$out"; echo "FAIL: cannot build the replay drivers"; echo "0 passed, 1 failed"; exit 1; }
fi

# the seed corpus is generated, not committed: make it once per build directory
CORPUS=$B/fuzz/corpus
if [ ! -f "$CORPUS/.done" ]; then
	if ${MAKE:-make} -s B="$B" "$B/fuzz/mkseed" >"$out" 2>&1 && QTK_BUILD=$B FUZZ_CORPUS=$CORPUS sh $F/mkcorpus.sh >>"$out" 2>&1; then
		touch "$CORPUS/.done"
	else
		cat "$out"; echo "FAIL: cannot generate the seed corpus"; echo "0 passed, 1 failed"; exit 1
	fi
fi

count() { find "$@" -maxdepth 1 -type f ! -name '.*' 2>/dev/null | wc -l; }

for t in $TARGETS; do
	d=$B/fuzz/replay_$t
	dirs=""
	[ -d "$CORPUS/$t" ] && dirs="$CORPUS/$t"
	[ -d "$F/regress/$t" ] && dirs="$dirs $F/regress/$t"
	[ -n "$dirs" ] || continue
	n=$(count $dirs)
	if timeout 600 "$d" $dirs >"$out" 2>&1; then
		pass=$((pass + n))
		continue
	fi
	# something failed: one process per input to name it
	for dir in $dirs; do
		for f in $(find "$dir" -maxdepth 1 -type f ! -name '.*' | sort); do
			if timeout 120 "$d" "$f" >"$out" 2>&1; then pass=$((pass + 1)); else
				fail=$((fail + 1)); echo "FAIL: $t: $f"; grep -v '^replayed' "$out" | head -n 15 | sed 's/^/  /'
			fi
		done
	done
done

for t in $TARGETS; do
	[ -d "$F/pending/$t" ] || continue
	for f in $(find "$F/pending/$t" -maxdepth 1 -type f ! -name '.*' ! -name '*.md' | sort); do
		if timeout 120 "$B/fuzz/replay_$t" "$f" >"$out" 2>&1; then
			echo "skipped: pending $f (open bug, see $F/pending/README.md; no crash in replay)"
		else
			echo "skipped: pending $f (open bug, see $F/pending/README.md; still crashes)"
		fi
	done
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
