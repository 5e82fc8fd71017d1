#!/bin/sh
# tui_smoke.sh - qinspect's browser in a real terminal (tmux): start it on the
# sample model at 80x24, move, open a tensor's detail, switch panes, quit.
# Prints "N passed, N failed" (or "skipped: tmux absent").
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
pass=0; fail=0
if ! command -v tmux >/dev/null 2>&1; then
	echo "skipped: tmux absent"
	echo "0 passed, 0 failed"
	exit 0
fi
T=$(mktemp -d /tmp/qtk-tui-smoke-XXXXXX)
SOCK="qtk-smoke-$$"
tm() { tmux -L "$SOCK" "$@"; }
# the second session gets a server of its own: the first one may still be shutting down after
# its last session quit, and a new session on its socket then fails (an empty screen)
tm2() { tmux -L "$SOCK-2" "$@"; }
cleanup() { tm kill-server 2>/dev/null; tm2 kill-server 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

"$B/samples/gen" "$T/s" >/dev/null || bad "sample generator"
G=$T/s/tiny-llama-f32.gguf
QI=$(cd "$(dirname "$BIN/qinspect")" && pwd)/qinspect

# wait until the pane shows TEXT (up to ~20 s: CI machines can be busy); leaves the capture in $T/screen
wait_for() {
	i=0
	while [ $i -lt 200 ]; do
		tm capture-pane -p -t smoke >"$T/screen" 2>/dev/null
		if grep -q -- "$1" "$T/screen"; then return 0; fi
		sleep 0.1; i=$((i + 1))
	done
	return 1
}
check() { if wait_for "$2"; then ok; else bad "$1: screen lacks '$2'"; sed 's/^/  | /' "$T/screen" | head -30; fi; }

tm new-session -d -s smoke -x 80 -y 24 "env TERM=xterm-256color LANG=C.UTF-8 '$QI' '$G'; echo \$? >'$T/rc'"
check "start" "tiny-llama-f32.gguf"
check "table" "attn_q.weight"
check "type histogram" "F32 100%"
tm send-keys -t smoke j j j Enter
check "detail" "outliers"
check "histogram" "value histogram"
tm send-keys -t smoke Tab
check "metadata pane" "general.architecture"
tm send-keys -t smoke Tab Tab
check "memory pane" "KV cache"
tm send-keys -t smoke '?'
check "help" "any key closes"
tm send-keys -t smoke Escape
tm send-keys -t smoke 4
check "key 4: provenance pane" "no provenance record"
tm send-keys -t smoke / 'attn_(q'
check "invalid regex in the prompt" "invalid regex"
tm send-keys -t smoke Escape 5
check "key 5: memory pane" "KV cache"
tm send-keys -t smoke Tab
if tm resize-window -t smoke -x 100 -y 30 2>/dev/null; then
	check "resized to 100x30: the full title" "1.84M params"
else
	check "back to the table" "attn_q.weight"
fi
tm send-keys -t smoke q
i=0
while [ ! -s "$T/rc" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
if [ -s "$T/rc" ] && [ "$(cat "$T/rc")" = 0 ]; then ok; else bad "q: qinspect did not exit with 0 (rc '$(cat "$T/rc" 2>/dev/null)')"; fi

# NO_COLOR and an ASCII locale still draw a usable screen
tm2 new-session -d -s smoke2 -x 80 -y 24 "env NO_COLOR=1 TERM=xterm LANG=C LC_ALL=C '$QI' '$G'" ||
	bad "ascii fallbacks: tmux could not start the session"
i=0
while [ $i -lt 400 ]; do
	tm2 capture-pane -p -t smoke2 >"$T/screen" 2>/dev/null
	grep -q -- "- blk.0  (9)" "$T/screen" && grep -q "types ####" "$T/screen" && break
	sleep 0.1; i=$((i + 1))
done
if grep -q -- "- blk.0  (9)" "$T/screen" && grep -q "types ####" "$T/screen"; then ok; else
	bad "ascii fallbacks (after $i polls; screen: $(grep -v '^ *$' "$T/screen" | head -3 | tr '\n' '|'))"
	sed 's/^/  | /' "$T/screen" | head -8
fi
tm2 send-keys -t smoke2 q

# the provenance pane checks the tensors against the record on Enter
SOURCE_DATE_EPOCH=1700000000 "$BIN/qconvert" -q "$G" "$T/rec.gguf" || bad "qconvert for the record test"
tm new-session -d -s smoke3 -x 100 -y 30 "env TERM=xterm-256color LANG=C.UTF-8 '$QI' '$T/rec.gguf'"
wait_for_s() {
	i=0
	while [ $i -lt 200 ]; do
		tm capture-pane -p -t "$1" >"$T/screen" 2>/dev/null
		if grep -q -- "$2" "$T/screen"; then return 0; fi
		sleep 0.1; i=$((i + 1))
	done
	return 1
}
if wait_for_s smoke3 "attn_q.weight"; then ok; else bad "record file: table"; fi
tm send-keys -t smoke3 Tab Tab Tab
if wait_for_s smoke3 "Enter: check the tensors"; then ok; else bad "provenance pane"; sed 's/^/  | /' "$T/screen" | head -8; fi
tm send-keys -t smoke3 Enter
if wait_for_s smoke3 "digests: ok: all 21 tensors match"; then ok; else bad "provenance check"; sed 's/^/  | /' "$T/screen" | head -8; fi
tm send-keys -t smoke3 q

# a record of the earlier digest scheme (tests/data/v1-hf.json, the sample directory's) is
# checked in its own scheme
if "$BIN/qconvert" -q "$T/s/tiny-llama" "$T/v1dir/" --set "qtk.provenance=$(cat tests/data/v1-hf.json)"; then
	tm new-session -d -s smoke4 -x 100 -y 30 "env TERM=xterm-256color LANG=C.UTF-8 '$QI' '$T/v1dir'"
	if wait_for_s smoke4 "model.layers.0"; then ok; else bad "v1 record: table"; fi
	tm send-keys -t smoke4 Tab Tab Tab
	if wait_for_s smoke4 "Enter: check the tensors"; then ok; else bad "v1 record: provenance pane"; fi
	tm send-keys -t smoke4 Enter
	if wait_for_s smoke4 "digests: ok: all 21 tensors match"; then ok; else bad "v1 record: provenance check"; sed 's/^/  | /' "$T/screen" | head -8; fi
	tm send-keys -t smoke4 q
else
	bad "qconvert with a v1 record"
fi

# not a terminal: the summary
"$BIN/qinspect" "$G" </dev/null >"$T/out" 2>&1
if grep -q "total: 21 tensors" "$T/out"; then ok; else bad "non-tty output is not the summary"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
