#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fetch-schema.sh - LAVA's own job and test-definition schemas (Debian's lava-common, with
# python3-voluptuous) downloaded and unpacked into ${XDG_CACHE_HOME:-~/.cache}/irqlab/lava,
# never installed, so tests/unit/lava validates lava/ against them offline. Idempotent.
set -euo pipefail
dir="${XDG_CACHE_HOME:-$HOME/.cache}/irqlab/lava"
[[ -f $dir/ok ]] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -q lava-common python3-voluptuous >/dev/null 2>&1) ||
	{ echo "fetch-schema.sh: apt-get download lava-common python3-voluptuous failed" >&2; exit 1; }
mkdir -p "$dir"
for deb in "$tmp"/*.deb; do
	dpkg-deb -x "$deb" "$dir"
done
touch "$dir/ok"
