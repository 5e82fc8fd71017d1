#!/bin/sh
# test_layers.sh - the library's layers hold (docs/architecture.md): every source file's
# headers, direct and indirect (as the compiler resolves them: cc -MM), come from its own
# layer or a lower one; the programs include only qtk.h, qtk_ext.h and their own headers and
# never reach internal.h or a container's header; no source includes another .c file.
cd "$(dirname "$0")/.." || exit 1
CC=${CC:-cc}
CFLAGS=$(pkg-config --cflags libzstd libcjson libarchive ncursesw libcrypto 2>/dev/null)
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
layer() {
	case $1 in
	src/qtk.h|src/qtk_ext.h) echo "api 6" ;;
	src/family/*) echo "family 2" ;;
	src/scheme/*) echo "scheme 2" ;;
	src/view/*) echo "view 3" ;;
	src/record/*) echo "record 4" ;;
	src/*) echo "core 1" ;;
	formats/*) echo "formats 5" ;;
	convert/*|inspect/*|verify/*|cli/*) echo "program 7" ;;
	*) echo "other 0" ;;
	esac
}
for f in src/*.c src/*/*.c formats/*.c convert/*.c inspect/*.c verify/*.c cli/*.c; do
	[ -f "$f" ] || continue
	set -- $(layer "$f"); fl=$1; fr=$2
	deps=$($CC -std=c11 -D_GNU_SOURCE $CFLAGS -Isrc -Iformats -Icli -MM "$f" 2>/dev/null |
		tr ' \\' '\n\n' | sed -n 's|^\./||; /\.h$/p' | sort -u)
	[ -n "$deps" ] || { bad "$f: cc -MM failed"; continue; }
	for d in $deps; do
		set -- $(layer "$d"); dl=$1; dr=$2
		[ "$d" = src/qtk.h ] && dr=0   # the public header is below everything
		if [ "$fl" = program ]; then
			case $d in src/internal.h|formats/*) bad "$f reaches $d (programs use qtk.h and qtk_ext.h)"; continue ;; esac
		fi
		if [ "$dr" -gt "$fr" ]; then
			bad "$f ($fl) includes $d ($dl, a higher layer)"
		elif [ "$dr" -eq "$fr" ] && [ "$dl" != "$fl" ] && [ "$fl" != program ]; then
			bad "$f ($fl) includes $d ($dl, a sibling layer)"
		else
			ok
		fi
	done
	if grep -q '#include "[^"]*\.c"' "$f"; then bad "$f includes a .c file"; else ok; fi
	if [ "$fl" = program ]; then
		dir=$(dirname "$f")
		for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
			if [ "$inc" = qtk.h ] || [ "$inc" = qtk_ext.h ] || [ "$inc" = cli.h ] || [ -f "$dir/$inc" ]; then ok
			else bad "$f includes \"$inc\" (programs use qtk.h and qtk_ext.h)"; fi
		done
	fi
done
for h in convert/*.h inspect/*.h verify/*.h cli/*.h; do
	dir=$(dirname "$h")
	for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$h"); do
		if [ "$inc" = qtk.h ] || [ "$inc" = qtk_ext.h ] || [ "$inc" = cli.h ] || [ -f "$dir/$inc" ]; then ok
		else bad "$h includes \"$inc\" (programs use qtk.h and qtk_ext.h)"; fi
	done
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
