#!/usr/bin/env bash
# build-xen-rtds.sh - optional: rebuild Debian's Xen hypervisor with the RTDS and null
# schedulers (Debian ships credit and credit2 only) for `irqlab run --target xen
# --xen-sched rtds|null`.
#
#   scripts/build-xen-rtds.sh [arm64|amd64 ...]     (default: arm64)
#
# Source: Debian's own source package of the pinned version (apt-get source through a
# private apt state directory with deb-src lines, so the host's apt configuration is not
# touched). Only the hypervisor (xen/) is built, with the package's config plus
# CONFIG_EXPERT=y and CONFIG_UNSUPPORTED=y (RTDS and null are "unsupported" in 4.17's Kconfig),
# CONFIG_SCHED_RTDS=y and CONFIG_SCHED_NULL=y; arm64 is cross-built with
# gcc-aarch64-linux-gnu. Needs: dpkg-dev, flex, bison, make, gcc, python3.
# Output: ${XDG_CACHE_HOME:-~/.cache}/irqlab/xen/<source version>-rtds/<arch>/boot/xen-4.17-<arch>
# (+ .config), the layout scripts/fetch-xen.sh uses; irqlab finds it by itself.
set -euo pipefail

XEN_VERSION=${XEN_VERSION:-4.17.7+13-g2445b30a44-0+deb12u1}
SERIES=4.17
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/irqlab/xen"
WORK="$CACHE/src"
ARCHES=("${@:-arm64}")

log() { printf '[build-xen-rtds] %s\n' "$*"; }

for tool in flex bison make gcc dpkg-source; do
	command -v "$tool" >/dev/null || { log "missing $tool: apt-get install flex bison make gcc dpkg-dev"; exit 1; }
done

# Private apt state with deb-src for the same suites the host uses.
fetch_source() {
	local apt="$WORK/apt" src="$WORK/xen-${XEN_VERSION%%-*}"
	ls -d "$WORK"/xen-*/xen/Makefile >/dev/null 2>&1 && return 0
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$WORK"
	cat >"$apt/sources.list" <<SRC
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian-security bookworm-security main
SRC
	local opts=(-o Dir::Etc::sourcelist="$apt/sources.list" -o Dir::Etc::sourceparts=-
		-o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache"
		-o APT::Sandbox::User=root)
	log "apt-get update (private deb-src state in $apt)"
	apt-get "${opts[@]}" update -qq
	log "apt-get source xen=$XEN_VERSION"
	if ! (cd "$WORK" && apt-get "${opts[@]}" source -qq "xen=$XEN_VERSION" 2>/dev/null); then
		# The security archive serves binaries of the pinned version but (here) not its
		# source: fall back to the source the suite has, and say so (the directory
		# name below carries the version really built).
		log "source of $XEN_VERSION not on the mirror: using the suite's xen source"
		(cd "$WORK" && apt-get "${opts[@]}" source -qq xen/bookworm)
	fi
}

# src_version - Debian version of the unpacked source (from its changelog).
src_version() {
	dpkg-parsechangelog -l "$(ls -d "$WORK"/xen-*/ | head -1)/debian/changelog" -S Version
}

build_one() {
	local arch=$1 tree out cross="" xarch
	tree=$(ls -d "$WORK"/xen-*/ | head -1)
	out="$CACHE/$(src_version)-rtds/$arch"
	[[ -f $out/.complete ]] && { log "$arch: already built ($out)"; return 0; }
	case $arch in
	arm64) xarch=arm64; [[ $(uname -m) == aarch64 ]] || cross=aarch64-linux-gnu- ;;
	amd64) xarch=x86_64 ;;
	*) log "unknown arch $arch"; return 1 ;;
	esac
	local build="$WORK/build-$arch"
	rm -rf "$build"
	mkdir -p "$build"
	# Out-of-tree build (O=): the source tree stays pristine for the next arch.
	# Start from the config Debian shipped (same as the downloaded hypervisor), add ours.
	local base="$CACHE/$XEN_VERSION/$arch/boot/xen-$SERIES-$arch.config"
	[[ -f $base ]] || { log "no $base: run scripts/fetch-xen.sh first"; return 1; }
	# The scheduler menu is only visible with EXPERT, RTDS/null only with UNSUPPORTED.
	grep -vE '^(# )?CONFIG_(EXPERT|UNSUPPORTED|SCHED_RTDS|SCHED_NULL|SCHED_ARINC653)[= ]' \
		"$base" >"$build/.config"
	cat >>"$build/.config" <<CFG
CONFIG_EXPERT=y
CONFIG_UNSUPPORTED=y
CONFIG_SCHED_RTDS=y
CONFIG_SCHED_NULL=y
CONFIG_SCHED_ARINC653=n
CFG
	log "$arch: building (make -C xen XEN_TARGET_ARCH=$xarch CROSS_COMPILE=$cross)"
	make -C "$tree/xen" O="$build" -s XEN_TARGET_ARCH="$xarch" CROSS_COMPILE="$cross" olddefconfig >/dev/null
	grep -q '^CONFIG_SCHED_RTDS=y' "$build/.config" && grep -q '^CONFIG_SCHED_NULL=y' "$build/.config" \
		|| { log "$arch: Kconfig dropped RTDS/null"; return 1; }
	make -C "$tree/xen" O="$build" -s -j"$(nproc)" XEN_TARGET_ARCH="$xarch" CROSS_COMPILE="$cross" \
		EXTRA_CFLAGS_XEN_CORE="-Wno-error" >"$WORK/build-$arch.log" 2>&1 \
		|| { tail -20 "$WORK/build-$arch.log"; log "$arch: build failed (log: $WORK/build-$arch.log)"; return 1; }
	mkdir -p "$out/boot"
	if [[ $arch == arm64 ]]; then
		cp "$build/xen" "$out/boot/xen-$SERIES-arm64"
	else
		# xen/xen is the 32-bit multiboot ELF QEMU's -kernel loads (Debian ships it
		# gzipped; xen-syms is the 64-bit image, which QEMU refuses).
		if gzip -t "$build/xen" 2>/dev/null; then
			cp "$build/xen" "$out/boot/xen-$SERIES-amd64.gz"
			gzip -dc "$build/xen" >"$out/boot/xen-$SERIES-amd64.elf"
		else
			cp "$build/xen" "$out/boot/xen-$SERIES-amd64.elf"
			gzip -9c "$build/xen" >"$out/boot/xen-$SERIES-amd64.gz"
		fi
	fi
	cp "$build/.config" "$out/boot/xen-$SERIES-$arch.config"
	touch "$out/.complete"
	log "$arch: $out/boot"
}

fetch_source
for a in "${ARCHES[@]}"; do
	build_one "$a"
done
