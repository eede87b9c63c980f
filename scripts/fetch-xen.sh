#!/usr/bin/env bash
# fetch-xen.sh - Debian's Xen 4.17 hypervisors (arm64 and amd64) for `--target xen`,
# downloaded with `apt-get download` and unpacked with `dpkg-deb -x` into
# ${XDG_CACHE_HOME:-~/.cache}/irqlab/xen/<version>/<arch>/ (nothing is installed on the
# host). Idempotent: an already unpacked hypervisor is kept. Pinned version below; pass
# another version as $1 if the mirror no longer has it.
#
#   scripts/fetch-xen.sh [VERSION]
#
# Afterwards:  xen/<version>/arm64/boot/xen-4.17-arm64   (an arm64 Image)
#              xen/<version>/amd64/boot/xen-4.17-amd64.gz (gunzip -> 32-bit ELF for -kernel)
#              xen/current -> <version>
set -euo pipefail

XEN_VERSION=${1:-4.17.7+13-g2445b30a44-0+deb12u1}
SERIES=4.17
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/irqlab/xen"

log() { printf '[fetch-xen] %s\n' "$*"; }

# apt may be busy (another engineer's apt-get): retry on the lock a few times.
apt_retry() {
	local i
	for i in 1 2 3 4 5 6; do
		"$@" && return 0
		log "apt busy or failed ($*); retry $i in 5 s"
		sleep 5
	done
	return 1
}

fetch_one() {
	local arch=$1 pkg dest tmp
	pkg="xen-hypervisor-$SERIES-$arch"
	dest="$CACHE/$XEN_VERSION/$arch"
	if [[ -f $dest/.complete ]]; then
		return 0
	fi
	if [[ $arch != "$(dpkg --print-architecture)" ]] && \
	   ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
		log "$arch is not a dpkg architecture here: run 'dpkg --add-architecture $arch && apt-get update' (as root), then retry"
		return 1
	fi
	log "fetching $pkg=$XEN_VERSION into $dest"
	tmp=$(mktemp -d)
	if ! (cd "$tmp" && apt_retry apt-get download -q "$pkg:$arch=$XEN_VERSION" >/dev/null); then
		rm -rf "$tmp"
		log "apt-get download $pkg:$arch=$XEN_VERSION failed (is the version still on the mirror?)"
		return 1
	fi
	rm -rf "$dest"
	mkdir -p "$dest"
	dpkg-deb -x "$tmp"/*.deb "$dest"
	cp "$tmp"/*.deb "$dest/"
	rm -rf "$tmp"
	if [[ $arch == amd64 ]]; then
		# QEMU's -kernel loads the 32-bit multiboot ELF inside the gzip.
		gzip -dc "$dest/boot/xen-$SERIES-amd64.gz" >"$dest/boot/xen-$SERIES-amd64.elf"
	fi
	touch "$dest/.complete"
}

status=0
for arch in arm64 amd64; do
	fetch_one "$arch" || status=1
done
ln -sfn "$XEN_VERSION" "$CACHE/current"
exit $status
