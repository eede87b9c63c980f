#!/usr/bin/env bash
# fetch-linux-net.sh - the virtio-net and virtio-blk drivers of the cached Linux guest
# kernel, for `irqlab run --target net`: Debian builds virtio, virtio_pci, virtio_net (and
# the failover modules virtio_net needs) and virtio_blk as modules, so irqlab puts them
# into the guest's initramfs and its init loads them. Downloaded with `apt-get download` (the same
# linux-image package as the cached vmlinuz) and unpacked with dpkg-deb into
# ${XDG_CACHE_HOME:-~/.cache}/irqlab/linux/net-modules-<version>/, with `load-order`
# listing them in dependency order; a module the kernel has built in (modules.builtin)
# is left out. Nothing is installed on the host. Idempotent.
#
# arm64 (`--target linux-guest|net --arch arm64`): Debian's arm64 linux-image of the same
# version as the cached amd64 kernel; its vmlinuz (a raw Image) and its modules go into
# ${XDG_CACHE_HOME:-~/.cache}/irqlab/linux/arm64/ (vmlinuz-<version>, the vmlinuz link,
# net-modules-<version>). Needs the arm64 dpkg architecture (setup.sh adds it).
#
#   scripts/fetch-linux-net.sh [amd64|arm64]
set -euo pipefail

ARCH=${1:-amd64}
BASE="${XDG_CACHE_HOME:-$HOME/.cache}/irqlab/linux"
# dependency order (each module's `depends=` before it)
MODULES=(drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_modern_dev
	 drivers/virtio/virtio_pci_legacy_dev drivers/virtio/virtio_pci net/core/failover
	 drivers/net/net_failover drivers/net/virtio_net drivers/block/virtio_blk)

log() { printf '[fetch-linux-net] %s\n' "$*"; }

case $ARCH in
amd64) CACHE=$BASE ;;
arm64) CACHE=$BASE/arm64 ;;
*) log "unknown architecture $ARCH: amd64 or arm64"; exit 1 ;;
esac
kernel=$(readlink "$BASE/vmlinuz" || true)
kver=${kernel#vmlinuz-}
if [[ -z $kver ]]; then
	log "no cached Linux kernel ($BASE/vmlinuz): run ./setup.sh --install-only first"
	exit 1
fi
kver=${kver%-amd64}-$ARCH        # the same Debian kernel version, built for $ARCH
DEST="$CACHE/net-modules-$kver"
# complete, and with this list of modules (a longer list fetches again)
if [[ -f $DEST/.complete && $(cat "$DEST/.complete") == "${MODULES[*]}" ]] && \
   [[ $ARCH == amd64 || -s $CACHE/vmlinuz-$kver ]]; then
	exit 0
fi
if [[ $ARCH != "$(dpkg --print-architecture)" ]] && \
   ! dpkg --print-foreign-architectures | grep -qx "$ARCH"; then
	log "$ARCH is not a dpkg architecture here: run 'dpkg --add-architecture $ARCH && apt-get update' (as root), then retry"
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log "downloading linux-image-$kver ($ARCH) for its virtio-net modules"
# apt may be busy with another engineer's apt-get: retry on the lock a few times.
for i in 1 2 3 4 5 6; do
	(cd "$tmp" && apt-get download -q "linux-image-$kver:$ARCH" >/dev/null 2>&1) && break
	((i < 6)) || { log "apt-get download failed"; exit 1; }
	sleep 5
done
deb=("$tmp"/*.deb)
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" "./lib/modules/$kver/modules.builtin"
members=()
wanted=()
for m in "${MODULES[@]}"; do
	grep -qx "kernel/$m.ko" "$tmp/lib/modules/$kver/modules.builtin" && continue
	members+=("./lib/modules/$kver/kernel/$m.ko")
	wanted+=("$m")
done
mkdir -p "$CACHE"
if [[ $ARCH == arm64 ]]; then
	dpkg-deb --fsys-tarfile "$deb" | tar -xO "./boot/vmlinuz-$kver" >"$CACHE/vmlinuz-$kver.tmp"
	mv "$CACHE/vmlinuz-$kver.tmp" "$CACHE/vmlinuz-$kver"
	ln -sfn "vmlinuz-$kver" "$CACHE/vmlinuz"
fi
rm -rf "$DEST"
mkdir -p "$DEST"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" "${members[@]}"
: >"$DEST/load-order"
for m in "${wanted[@]}"; do
	cp "$tmp/lib/modules/$kver/kernel/$m.ko" "$DEST/"
	basename "$m.ko" >>"$DEST/load-order"
done
echo "${MODULES[*]}" >"$DEST/.complete"
log "done: $DEST"
