#!/usr/bin/env bash
# fetch-linux-net.sh - the virtio-net and virtio-blk drivers of the cached Linux guest
# kernel, for `irqlab run --target net`: Debian builds virtio, virtio_pci, virtio_net (and
# the failover modules virtio_net needs) and virtio_blk as modules, so irqlab puts them
# into the guest's initramfs and its init loads them. Downloaded with `apt-get download` (the same
# linux-image package as the cached vmlinuz) and unpacked with dpkg-deb into
# ${XDG_CACHE_HOME:-~/.cache}/irqlab/linux/net-modules-<version>/, with `load-order`
# listing them in dependency order; nothing is installed on the host. Idempotent.
set -euo pipefail

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/irqlab/linux"
# dependency order (each module's `depends=` before it)
MODULES=(drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_modern_dev
	 drivers/virtio/virtio_pci_legacy_dev drivers/virtio/virtio_pci net/core/failover
	 drivers/net/net_failover drivers/net/virtio_net drivers/block/virtio_blk)

log() { printf '[fetch-linux-net] %s\n' "$*"; }

kernel=$(readlink "$CACHE/vmlinuz" || true)
kver=${kernel#vmlinuz-}
if [[ -z $kver ]]; then
	log "no cached Linux kernel ($CACHE/vmlinuz): run ./setup.sh --install-only first"
	exit 1
fi
DEST="$CACHE/net-modules-$kver"
# complete, and with this list of modules (a longer list fetches again)
[[ -f $DEST/.complete && $(cat "$DEST/.complete") == "${MODULES[*]}" ]] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log "downloading linux-image-$kver for its virtio-net modules"
# apt may be busy with another engineer's apt-get: retry on the lock a few times.
for i in 1 2 3 4 5 6; do
	(cd "$tmp" && apt-get download -q "linux-image-$kver" >/dev/null 2>&1) && break
	((i < 6)) || { log "apt-get download failed"; exit 1; }
	sleep 5
done
members=()
for m in "${MODULES[@]}"; do
	members+=("./lib/modules/$kver/kernel/$m.ko")
done
rm -rf "$DEST"
mkdir -p "$DEST"
dpkg-deb --fsys-tarfile "$tmp"/*.deb | tar -x -C "$tmp" "${members[@]}"
: >"$DEST/load-order"
for m in "${MODULES[@]}"; do
	cp "$tmp/lib/modules/$kver/kernel/$m.ko" "$DEST/"
	basename "$m.ko" >>"$DEST/load-order"
done
echo "${MODULES[*]}" >"$DEST/.complete"
log "done: $DEST"
