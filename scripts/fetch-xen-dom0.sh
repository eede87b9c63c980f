#!/usr/bin/env bash
# fetch-xen-dom0.sh - what irqlab's Linux dom0 (`--target xen --xen-dom0 linux`) is built
# from: Debian's Xen tools (xen-utils-4.17, xenstore-utils and their libraries),
# busybox-static, and the Xen driver modules of the cached Linux kernel
# (xen-privcmd, xenfs, xen-evtchn, xen-gntdev, xen-gntalloc are modules in Debian's
# build). Downloaded with `apt-get download` and unpacked with `dpkg-deb -x` into
# ${XDG_CACHE_HOME:-~/.cache}/irqlab/xen-dom0/<arch>/root; nothing is installed on the
# host. Idempotent: a complete cache (.complete) is kept.
#
# arm64 (`--arch arm64`): the same packages for arm64, plus what the host cannot lend an
# arm64 dom0 (glibc, libgcc, libuuid, zlib, libfdt, which arm64's libxenguest needs) and
# the arm64 kernel itself (its vmlinuz, a raw Image, as <arch>/vmlinuz), of the same
# version as the cached amd64 kernel. Needs the arm64 dpkg architecture (setup.sh adds it).
#
#   scripts/fetch-xen-dom0.sh [amd64|arm64]
set -euo pipefail

ARCH=${1:-amd64}
XEN_VERSION=4.17.7+13-g2445b30a44-0+deb12u1
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/irqlab"
DEST="$CACHE/xen-dom0/$ARCH"
XEN_PKGS=(xen-utils-4.17 xen-utils-common xenstore-utils libxencall1 libxenevtchn1
	  libxenforeignmemory1 libxengnttab1 libxenmisc4.17 libxenstore4 libxentoollog1
	  libxenhypfs1 libxendevicemodel1 libxentoolcore1)
OTHER_PKGS=(libyajl2 busybox-static)
# An amd64 dom0 takes glibc & co. from the host; an arm64 one cannot.
ARM64_PKGS=(libc6 libgcc-s1 libuuid1 zlib1g libfdt1)

log() { printf '[fetch-xen-dom0] %s\n' "$*"; }

[[ -f $DEST/.complete ]] && exit 0
if [[ $ARCH != amd64 && $ARCH != arm64 ]]; then
	log "unknown architecture $ARCH: amd64 or arm64"
	exit 1
fi
if [[ $ARCH != "$(dpkg --print-architecture)" ]] && \
   ! dpkg --print-foreign-architectures | grep -qx "$ARCH"; then
	log "$ARCH is not a dpkg architecture here: run 'dpkg --add-architecture $ARCH && apt-get update' (as root), then retry"
	exit 1
fi
kernel=$(readlink "$CACHE/linux/vmlinuz" || true)
kver=${kernel#vmlinuz-}
if [[ -z $kver ]]; then
	log "no cached Linux kernel ($CACHE/linux/vmlinuz): run ./setup.sh --install-only first"
	exit 1
fi
kver=${kver%-amd64}-$ARCH        # the same Debian kernel version, built for $ARCH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pkgs=()
for p in "${XEN_PKGS[@]}"; do
	pkgs+=("$p:$ARCH=$XEN_VERSION")
done
extra=("${OTHER_PKGS[@]}")
[[ $ARCH == arm64 ]] && extra+=("${ARM64_PKGS[@]}")
for p in "${extra[@]}"; do
	pkgs+=("$p:$ARCH")
done
pkgs+=("linux-image-$kver:$ARCH")
log "downloading ${#pkgs[@]} packages into $DEST"
# apt may be busy with another engineer's apt-get: retry on the lock a few times.
for i in 1 2 3 4 5 6; do
	(cd "$tmp" && apt-get download -q "${pkgs[@]}" >/dev/null 2>&1) && break
	((i < 6)) || { log "apt-get download failed"; exit 1; }
	sleep 5
done
rm -rf "$DEST"
mkdir -p "$DEST/root" "$DEST/modules"
for deb in "$tmp"/*.deb; do
	case $(basename "$deb") in
	linux-image-*)
		# Only the Xen drivers dom0 needs, not the whole 400 MB module tree.
		dpkg-deb --fsys-tarfile "$deb" |
			tar -x -C "$DEST/modules" --wildcards --strip-components=7 \
			    "./lib/modules/$kver/kernel/drivers/xen/*.ko"
		echo "$kver" >"$DEST/modules/kernel-version"
		if [[ $ARCH == arm64 ]]; then
			# dom0's kernel (amd64's is setup.sh's cached linux/vmlinuz)
			dpkg-deb --fsys-tarfile "$deb" | tar -xO "./boot/vmlinuz-$kver" >"$DEST/vmlinuz"
		fi ;;
	*)
		dpkg-deb -x "$deb" "$DEST/root" ;;
	esac
done
echo "$XEN_VERSION" >"$DEST/xen-version"
touch "$DEST/.complete"
log "done: $DEST"
