#!/bin/sh
# Install missing build dependencies (Debian/Ubuntu) with apt-get, through sudo when not root.
pkgs="build-essential pkg-config libzstd-dev libcjson-dev libarchive-dev libncurses-dev libssl-dev"
missing=""
for p in $pkgs; do
	dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
echo "installing:$missing" >&2
$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
