"""Load specs, the flood firmware and the exit-status check (no real tools needed)."""

from __future__ import annotations


import pytest

from irqlab.loads import LOADS, Load, group_members, parse_load, parse_loads
from irqlab.loads.base import parse_params
from irqlab.loads.vm import flood_rom


def test_params_keep_cpu_lists_whole():
    assert parse_params("cpus=0,1,workers=2") == {"cpus": "0,1", "workers": "2"}
    assert parse_params("") == {}


def test_none_is_no_load_and_kinds_are_named():
    assert parse_load("none") is None
    assert set(LOADS) == {"cpu", "hackbench", "io", "cache", "memory", "console",
                          "neighbour", "dom0-cpu", "dom0-console", "domain-create", "hypercall",
                          "net-flood", "guest-disk", "netns-flood", "guest-hog",
                          "kvm-host-hog"}
    loads = parse_loads(["cpu:cpus=0", "cpu:cpus=1,workers=2", "none"])
    assert [x.name for x in loads] == ["load:cpu", "load:cpu#2"]
    assert loads[1].cpus == [1] and loads[1].workers == 2


@pytest.mark.parametrize("spec, words", [
    ("disk", "unknown load 'disk'"),
    ("cpu:workers=0", "workers must be in 1..256"),
    ("cpu:speed=3", "has no parameter 'speed'"),
    ("cpu:cpus=99", "not available here"),
    ("console:source=guest", "not applicable here"),
    ("netns-flood:size=70000", "size must be in 0..65000"),
    ("guest-hog:spin=200ms", "must be shorter than every"),
    ("guest-hog:cpus=1", "use cpu="),
])
def test_bad_specs_say_why(spec, words):
    with pytest.raises(ValueError, match=words):
        parse_load(spec)


def test_flood_rom_sits_at_the_reset_vector():
    rom = flood_rom(0)
    assert len(rom) == 0x10000
    assert rom[0xFFF0:0xFFF3] == bytes([0xBA, 0xF8, 0x03])   # mov dx, 0x3f8
    assert rom[0xFFF5] == 0xEE                                # out dx, al
    with_spin = flood_rom(300)
    assert with_spin[0xFFF6:0xFFF9] == bytes([0xB9, 300 & 0xFF, 300 >> 8])


class _Dies(Load):
    """A load that ends by itself during the run with a failure code."""
    kind = "dies"

    def command(self) -> list[str]:
        return ["sh", "-c", "sleep 0.4; echo broken >&2; exit 3"]


def test_a_load_that_dies_during_the_run_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("IRQLAB_STATE_DIR", str(tmp_path))
    load = _Dies({})
    load.before_start()
    pgid = load.proc.pid
    load.proc.wait(timeout=30)      # it has died (a fixed sleep raced a loaded host)
    load.stop()
    meta = load.metadata()
    assert meta["status"] == "error" and "code 3 during the run" in meta["error"]
    assert "broken" in meta["error"]
    assert group_members(pgid) == []
