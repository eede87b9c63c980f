"""Runner pieces of the native and Linux-guest targets that need no process."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from irqlab.runner.linux_guest import _newc_entry, _pow2_at_least, build_initramfs
from irqlab.runner.native import probe_args
from irqlab.targets import parse_targets


def test_probe_args():
    # irqlab-native's --cpus takes ranges (probes/native/native.c parse_cpu_list).
    assert probe_args(1_000_000, [0, 1, 3], 80, True, 10, 16) == [
        "--cpus", "0-1,3", "--priority", "80", "--period-ns", "1000000", "--capacity", "16",
        "--samples", "10", "--rt-fallback"]


def test_targets_and_suites():
    assert parse_targets("guest") == ["guest"]
    assert parse_targets("native,linux-guest") == ["native", "linux-guest"]
    assert parse_targets("all") == ["native", "guest", "linux-guest"]
    for bad in ("bogus", "native,native", ""):
        with pytest.raises(ValueError):
            parse_targets(bad)


def test_pow2():
    assert [_pow2_at_least(n) for n in (1, 2, 3, 4096, 4097)] == [1, 2, 4, 4096, 8192]


def test_newc_member_is_aligned():
    entry = _newc_entry("init", 0o100755, b"abc")
    assert entry.startswith(b"070701") and len(entry) % 4 == 0


@pytest.mark.skipif(shutil.which("cpio") is None, reason="cpio tool not installed")
def test_initramfs_lists_with_cpio(tmp_path):
    init = tmp_path / "i"
    probe = tmp_path / "p"
    init.write_bytes(b"\x7fELF-init")
    probe.write_bytes(b"\x7fELF-probe-longer")
    out = build_initramfs(tmp_path / "x.cpio", init=init, probe=probe)
    listing = subprocess.run(["cpio", "-itv"], stdin=out.open("rb"), capture_output=True,
                             text=True, check=True).stdout
    for name in ("dev/console", "init", "irqlab-native", "proc", "sys"):
        assert name in listing


def test_initramfs_structure(tmp_path):
    init = tmp_path / "i"
    probe = tmp_path / "p"
    init.write_bytes(b"I" * 5)
    probe.write_bytes(b"P" * 9)
    data = build_initramfs(tmp_path / "x.cpio", init=init, probe=probe).read_bytes()
    names = []
    pos = 0
    while pos < len(data):
        assert data[pos:pos + 6] == b"070701"
        size = int(data[pos + 54:pos + 62], 16)
        namesize = int(data[pos + 94:pos + 102], 16)
        name = data[pos + 110:pos + 110 + namesize - 1].decode()
        names.append(name)
        pos += 110 + namesize
        pos += -pos % 4
        pos += size
        pos += -pos % 4
        if name == "TRAILER!!!":
            break
    assert names == ["dev", "dev/console", "proc", "sys", "init", "irqlab-native",
                     "TRAILER!!!"]
