#!/bin/sh
# fuzz_replay.sh - replay every fuzz target's seed corpus (tests/fuzz/corpus/<target>/) and
# regression inputs (tests/fuzz/regress/<target>/) through its plain replay driver
# ($QTK_BUILD/fuzz/replay_<target>, built by `make fuzz-drivers`; no clang needed).
# One test per input; prints "N passed, N failed". Inputs in tests/fuzz/pending/<target>/
# reproduce open bugs in files owned elsewhere: they are run and reported as "skipped:" lines
# (saying whether they still crash the replay driver), never counted as failures.
B=${QTK_BUILD:-build}
F=tests/fuzz
TARGETS="gguf safetensors st_index hfdir qpk archive zst spm imatrix prov"
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

count() { find "$@" -maxdepth 1 -type f ! -name '.*' 2>/dev/null | wc -l; }

for t in $TARGETS; do
	d=$B/fuzz/replay_$t
	dirs=""
	for s in corpus regress; do [ -d "$F/$s/$t" ] && dirs="$dirs $F/$s/$t"; done
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
