#!/usr/bin/env bash
# setup.sh - install everything irqlab needs on a fresh Debian machine, then measure.
#
#   ./setup.sh                 install (idempotent, fast when done) and run `irqlab run`
#   ./setup.sh --install-only  install only (what ./run-tests.sh and CI use)
#   ./setup.sh -- ARGS...      install, then `irqlab run ARGS...`
set -euo pipefail
cd "$(dirname "$0")"

APT_PACKAGES=(qemu-system-x86 qemu-system-data gcc make python3 python3-venv python3-pip chromium rt-tests libc6-dev cpio gcc-aarch64-linux-gnu qemu-system-arm stress-ng fio trace-cmd device-tree-compiler postgresql prometheus chromium-driver sockperf iputils-ping flex bison dpkg-dev)
run_after=1
run_args=()
while (($#)); do
	case "$1" in
	--install-only) run_after=0 ;;
	--) shift; run_args=("$@"); break ;;
	-h|--help) sed -n '2,7p' "$0"; exit 0 ;;
	*) echo "setup.sh: unknown option $1 (try --install-only, or -- ARGS for irqlab run)" >&2; exit 2 ;;
	esac
	shift
done

log() { printf '[setup] %s\n' "$*"; }

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
	log "installing Debian packages: ${missing[*]}"
	SUDO=""
	[[ $(id -u) -eq 0 ]] || SUDO="sudo"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The three C builds run beside the Python install: they need neither it nor each other
# (a fresh clone here, beside the loaded suite: 24 s one after another, 13 s side by
# side). Each one's output is shown, in order, once it is done.
builds=(probes/guest probes/native irqlab/native)
build_logs=$(mktemp -d)
trap 'rm -rf "$build_logs"' EXIT
build_pids=()
log "building the guest probe, the native probe and the trace/explain fast paths (irqlab/native)"
for i in "${!builds[@]}"; do
	make -s -j"$(nproc)" -C "${builds[$i]}" >"$build_logs/$i.log" 2>&1 &
	build_pids+=($!)
done

PY=${PYTHON:-python3}
stamp=.venv/.irqlab-installed
if [[ ! -x .venv/bin/python ]]; then
	log "creating .venv"
	"$PY" -m venv .venv
fi
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
	log "installing Python dependencies into .venv"
	# uv (from PyPI) resolves and installs the same packages in ~5 s where pip took ~68 s
	# on a fresh clone (a third of the suite's set-up); pip stays the fallback. Bytecode
	# compiled at install: uv writes none by default, and where PYTHONDONTWRITEBYTECODE is
	# set (this lab's machines) every `irqlab report` compiled matplotlib again (1-3.5 s).
	if .venv/bin/pip install -q uv && .venv/bin/uv pip install -q --compile-bytecode \
		--python .venv/bin/python -e '.[test,labgrid]'; then
		:
	else
		log "uv unavailable or failed: installing with pip"
		.venv/bin/pip install -q --upgrade pip
		.venv/bin/pip install -q -e '.[test,labgrid]'
	fi
	touch "$stamp"
fi

# The man page, generated from the parser (irqlab manpage): `man irqlab` with the venv's
# bin on PATH (man finds ../share/man beside it).
mkdir -p .venv/share/man/man1
.venv/bin/irqlab manpage >.venv/share/man/man1/irqlab.1.tmp && mv .venv/share/man/man1/irqlab.1.tmp .venv/share/man/man1/irqlab.1
build_failed=0
for i in "${!builds[@]}"; do
	if wait "${build_pids[$i]}"; then
		cat "$build_logs/$i.log"
	else
		cat "$build_logs/$i.log" >&2
		log "building ${builds[$i]} failed (its output is above)"
		build_failed=1
	fi
done
rm -rf "$build_logs"
((build_failed == 0)) || exit 1

# fetch_linux_kernel - Debian's linux-image (amd64) vmlinuz for `--target linux-guest`,
# cached in ${XDG_CACHE_HOME:-~/.cache}/irqlab/linux (idempotent: nothing to do when the
# cached vmlinuz exists). Only the package mirror is needed; nothing is installed.
fetch_linux_kernel() {
	local dir="${XDG_CACHE_HOME:-$HOME/.cache}/irqlab/linux" pkg tmp
	[[ -s $dir/vmlinuz ]] && return 0
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
	[[ -n $pkg ]] || { log "linux-image-amd64 unknown to apt: skipping the Linux guest kernel"; return 0; }
	log "fetching $pkg (Linux guest kernel) into $dir"
	mkdir -p "$dir"
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get download -q "$pkg" >/dev/null 2>&1) || { rm -rf "$tmp"; log "apt-get download $pkg failed: --target linux-guest unavailable"; return 0; }
	dpkg-deb --fsys-tarfile "$tmp"/*.deb | tar -xO --wildcards './boot/vmlinuz-*' >"$dir/vmlinuz-${pkg#linux-image-}.tmp"
	mv "$dir/vmlinuz-${pkg#linux-image-}.tmp" "$dir/vmlinuz-${pkg#linux-image-}"
	ln -sfn "vmlinuz-${pkg#linux-image-}" "$dir/vmlinuz"
	rm -rf "$tmp"
}
fetch_linux_kernel
# --target net: the cached kernel's virtio-net modules for the guest's initramfs.
scripts/fetch-linux-net.sh || log "virtio-net modules not fetched: --target net unavailable"

# Xen (--target xen): Debian's xen-hypervisor-4.17-{arm64,amd64}, pinned, downloaded and
# unpacked into ${XDG_CACHE_HOME:-~/.cache}/irqlab/xen (never installed on the host).
# arm64 packages need the foreign architecture known to apt. Debian builds Xen without
# RTDS and null: scripts/build-xen-rtds.sh rebuilds the hypervisor alone from Debian's
# source package with them (~1 min per architecture, once; cached).
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
	log "adding dpkg architecture arm64 (for Debian's arm64 Xen hypervisor package)"
	SUDO=""
	[[ $(id -u) -eq 0 ]] || SUDO="sudo"
	$SUDO dpkg --add-architecture arm64 && $SUDO apt-get update -qq || true
fi
scripts/fetch-xen.sh || log "Xen hypervisor not fetched: --target xen unavailable"
scripts/build-xen-rtds.sh arm64 amd64 || log "Xen with RTDS/null not built: --xen-sched rtds|null and --knob cpupool=null unavailable"
# --xen-dom0 linux: Debian's xen-utils-4.17 (+ libraries), busybox-static and the cached
# kernel's Xen modules, unpacked into the cache (never installed on the host).
scripts/fetch-xen-dom0.sh || log "dom0 toolstack not fetched: --xen-dom0 linux unavailable"
scripts/fetch-xen-dom0.sh arm64 || log "arm64 dom0 not fetched: --xen-dom0 linux --arch arm64 unavailable"
# --target linux-guest|net --arch arm64: Debian's arm64 kernel and its virtio-net modules.
scripts/fetch-linux-net.sh arm64 || log "arm64 Linux guest not fetched: --target linux-guest|net --arch arm64 unavailable"
lava/fetch-schema.sh || log "LAVA schemas not fetched: lava/ is checked by its own test only"
scripts/fetch-u-boot.sh || log "U-Boot for QEMU not fetched: the labgrid U-Boot test skips"

log "ready: .venv/bin/irqlab (add $(pwd)/.venv/bin to PATH to type just irqlab)"
if ((run_after)); then
	log "running: irqlab run ${run_args[*]}"
	exec .venv/bin/irqlab run "${run_args[@]}"
fi
