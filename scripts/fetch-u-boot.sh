#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# fetch-u-boot.sh - Debian's U-Boot for QEMU (u-boot-qemu), downloaded with `apt-get
# download` and unpacked with `dpkg-deb -x` into ${XDG_CACHE_HOME:-~/.cache}/irqlab/u-boot
# (nothing is installed on the host). The labgrid tests boot the arm64 probe through it
# the way a lab boots a board: U-Boot prompt, then `booti`. Idempotent.
#
# Afterwards:  u-boot/usr/lib/u-boot/qemu_arm64/u-boot.bin
set -euo pipefail
dir="${XDG_CACHE_HOME:-$HOME/.cache}/irqlab/u-boot"
[[ -s $dir/usr/lib/u-boot/qemu_arm64/u-boot.bin ]] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -q u-boot-qemu >/dev/null 2>&1) ||
	{ echo "fetch-u-boot.sh: apt-get download u-boot-qemu failed" >&2; exit 1; }
mkdir -p "$dir"
dpkg-deb -x "$tmp"/u-boot-qemu_*.deb "$dir"
