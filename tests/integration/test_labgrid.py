"""``--target labgrid``: labgrid's QEMUDriver boots our x86-64 and arm64 probes as the
"board"; a real labgrid coordinator (on 127.0.0.1) holds the place. A run of each
architecture completes with nothing lost, and the place is released after a normal end,
a Ctrl-C and a failed boot; a place someone holds is refused."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from irqlab.runner.machines import MACHINES, find_qboot
from irqlab.runner.process import die_with_parent
from irqlab.store import Store
from tests.conftest import run_cli

pytestmark = [pytest.mark.integration, pytest.mark.emulated]   # boots QEMU

labgrid = pytest.importorskip(
    "labgrid", reason="labgrid is not installed (./setup.sh installs irqlab[labgrid])")

BIN = Path(sys.executable).parent
# TCG guests on a loaded 2-core machine can pause for seconds: not what these tests test.
STALL = "30s"


def write_env(path: Path, arch: str, strategy: bool = False, boot_args: str = "") -> Path:
    """A labgrid environment whose board is QEMU running the probe of ``arch``."""
    m = MACHINES[arch]
    if arch == "x86_64":
        machine, cpu = "pc", "max"
        extra = "-accel tcg -nodefaults -no-reboot" + (
            f" -bios {find_qboot()}" if find_qboot() else "")
    else:
        machine, cpu, extra = "virt,gic-version=3", "cortex-a57", \
            "-accel tcg -nodefaults -no-reboot"
    qemu = {"qemu_bin": "qemu", "machine": machine, "cpu": cpu, "memory": "64M",
            "kernel": "probe", "display": "fb-headless", "extra_args": extra}
    if boot_args:
        qemu["boot_args"] = boot_args
    drivers: dict = {"QEMUDriver": qemu}
    if strategy:
        drivers["IrqlabStrategy"] = {}
    env = {"targets": {"main": {"drivers": drivers}},
           "tools": {"qemu": f"/usr/bin/{m.qemu}"}, "images": {"probe": str(m.probe)}}
    path.write_text(json.dumps(env))            # JSON is YAML
    return path


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory):
    """A labgrid coordinator on a free loopback port, with place irqlab-test (it keeps
    places.yaml and resources.yaml in its working directory: a temporary one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"127.0.0.1:{port}"
    proc = subprocess.Popen([str(BIN / "labgrid-coordinator"), "-l", address],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=tmp_path_factory.mktemp("coordinator"),
                            preexec_fn=die_with_parent)
    env = {**os.environ, "LG_COORDINATOR": address}
    try:
        deadline = time.monotonic() + 15
        while subprocess.run([str(BIN / "labgrid-client"), "-p", "irqlab-test", "create"],
                             env=env, capture_output=True).returncode != 0:
            assert time.monotonic() < deadline and proc.poll() is None, \
                "labgrid-coordinator did not come up"
            time.sleep(0.3)
        yield env
    finally:
        proc.terminate()
        proc.wait(10)


def client(env: dict, *args: str) -> str:
    res = subprocess.run([str(BIN / "labgrid-client"), "-p", "irqlab-test", *args],
                         env=env, capture_output=True, text=True, timeout=30)
    return res.stdout + res.stderr


def acquired_by(env: dict) -> str:
    out = client(env, "show")
    return next(ln.split(":", 1)[1].strip() for ln in out.splitlines()
                if ln.strip().startswith("acquired:"))


def irqlab(args: list[str], db: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "irqlab.cli.main", "run", *args,
                             "--stall-timeout", STALL, "--json", "--db", str(db)],
                            env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def summary(out: str) -> dict:
    return next(json.loads(ln) for ln in out.splitlines() if '"type": "summary"' in ln)


def qemu_left(db: Path, run_id: int) -> bool:
    """Is the run's QEMU (found by its unique chardev socket path) still alive?"""
    with Store(db, read_only=True) as st:
        meta = next(r.metadata for r in st.runs() if r.run_id == run_id)
    sock = next(a for a in meta["qemu_argv"] if "serialrw" in a)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if sock.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            pass
    return False


@pytest.fixture
def probes(probe_built):
    subprocess.run(["make", "-s", "-C", str(probe_built.parents[2])], check=True)


def test_x86_board_in_a_place_runs_and_the_place_is_released(probes, coordinator,
                                                               tmp_path):
    db = tmp_path / "db.duckdb"
    env_file = write_env(tmp_path / "x86.yaml", "x86_64")
    p = irqlab(["--target", "labgrid", "--lg-env", str(env_file), "--lg-place",
                "irqlab-test", "--samples", "3000"], db, coordinator)
    out, err = p.communicate(timeout=90)
    s = summary(out)
    assert p.returncode == 0, err
    assert (s["status"], s["arch"], s["samples"], s["lost"]) == ("ok", "x86_64", 3000, 0)
    assert s["accel"] == "qemu (labgrid QEMUDriver)" and s["emulated"] is True
    assert acquired_by(coordinator) == "None"
    with Store(db, read_only=True) as st:
        meta = next(r.metadata for r in st.runs() if r.run_id == s["run_id"])
    assert meta["labgrid"]["place"] == "irqlab-test" and meta["labgrid"]["released"]
    assert "sink=console" in " ".join(meta["qemu_argv"])
    assert not qemu_left(db, s["run_id"])


def test_arm64_board_through_irqlab_strategy(probes, tmp_path, db):
    env_file = write_env(tmp_path / "arm64.yaml", "arm64", strategy=True)
    res = run_cli(["run", "--target", "labgrid", "--lg-env", str(env_file),
                   "--lg-image", str(MACHINES["arm64"].probe), "--samples", "3000",
                   "--stall-timeout", STALL,
                   "--json"], db, timeout=90)
    assert res.code == 0, res.stderr
    s = res.summary
    assert (s["status"], s["arch"], s["samples"], s["lost"]) == ("ok", "arm64", 3000, 0)
    with Store(db, read_only=True) as st:
        meta = next(r.metadata for r in st.runs() if r.run_id == s["run_id"])
    assert meta["labgrid"]["booted_by"] == "IrqlabStrategy"
    assert not qemu_left(db, s["run_id"])


UBOOT = (Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "irqlab"
         / "u-boot" / "usr" / "lib" / "u-boot" / "qemu_arm64" / "u-boot.bin")


def test_arm64_board_booted_by_u_boot(probes, tmp_path, db):
    """The real-board path: power on, U-Boot's prompt (autoboot stopped by labgrid's
    UBootDriver), IrqlabStrategy's boot command (`booti`), then the probe's console.
    QEMU's loader stands in for the TFTP download."""
    if not UBOOT.is_file():
        pytest.skip(f"Debian's U-Boot for QEMU is not unpacked at {UBOOT}: run "
                    f"scripts/fetch-u-boot.sh (./setup.sh does)")
    probe = MACHINES["arm64"].probe
    env = {"targets": {"main": {"drivers": {
        "QEMUDriver": {
            "qemu_bin": "qemu", "machine": "virt,gic-version=3", "cpu": "cortex-a57",
            "memory": "256M", "bios": "uboot", "display": "fb-headless",
            "extra_args": f"-accel tcg -nodefaults -no-reboot -device loader,file={probe},"
                          f"addr=0x40200000,force-raw=on"},
        "UBootDriver": {"prompt": "=> ", "autoboot": "Hit any key to stop autoboot"},
        "IrqlabStrategy": {"boot_command": "setenv bootargs 'period_ns=1000000 samples=0 "
                                           "sink=console'; booti 0x40200000 - "
                                           "${fdtcontroladdr}"}}}},
        "tools": {"qemu": "/usr/bin/qemu-system-aarch64"}, "images": {"uboot": str(UBOOT)}}
    env_file = tmp_path / "uboot.yaml"
    env_file.write_text(json.dumps(env))
    res = run_cli(["run", "--target", "labgrid", "--lg-env", str(env_file), "--samples",
                   "2000", "--stall-timeout", STALL, "--json"], db, timeout=90)
    assert res.code == 0, res.stderr
    s = res.summary
    assert (s["status"], s["arch"], s["samples"], s["lost"]) == ("ok", "arm64", 2000, 0)
    with Store(db, read_only=True) as st:
        meta = next(r.metadata for r in st.runs() if r.run_id == s["run_id"])
    assert meta["labgrid"]["booted_by"] == "IrqlabStrategy"
    assert not qemu_left(db, s["run_id"])


def test_interrupted_run_releases_the_place(probes, coordinator, tmp_path):
    db = tmp_path / "db.duckdb"
    env_file = write_env(tmp_path / "x86.yaml", "x86_64")
    p = irqlab(["--target", "labgrid", "--lg-env", str(env_file), "--lg-place",
                "irqlab-test", "--samples", "1000000", "--window", "1s"], db, coordinator)
    try:
        # Ctrl-C once samples flow: the first window line says they do.
        first, deadline = "", time.monotonic() + 60
        while '"type": "window"' not in first:
            assert time.monotonic() < deadline and p.poll() is None, p.stderr.read()
            if select.select([p.stdout], [], [], 1.0)[0]:
                first = p.stdout.readline()
        assert acquired_by(coordinator) != "None"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    s = summary(out)
    assert s["status"] == "interrupted" and s["samples"] > 0, err
    assert acquired_by(coordinator) == "None"
    assert not qemu_left(db, s["run_id"])


def test_failed_boot_says_why_and_releases_the_place(probes, coordinator, tmp_path):
    """The environment boots the probe without sink=console: no frames ever come."""
    db = tmp_path / "db.duckdb"
    env_file = write_env(tmp_path / "x86.yaml", "x86_64",
                         boot_args="period_ns=1000000 samples=0")
    p = irqlab(["--target", "labgrid", "--lg-env", str(env_file), "--lg-place",
                "irqlab-test", "--samples", "10", "--boot-timeout", "5s"], db, coordinator)
    out, err = p.communicate(timeout=60)
    s = summary(out)
    assert p.returncode == 1 and s["status"] == "failed"
    assert "no irqlab frame" in s["message"] and "sink=console" in s["message"]
    assert acquired_by(coordinator) == "None"


def test_place_already_held_is_refused(probes, coordinator, tmp_path):
    db = tmp_path / "db.duckdb"
    env_file = write_env(tmp_path / "x86.yaml", "x86_64")
    assert "acquired place" in client(coordinator, "acquire")
    try:
        p = irqlab(["--target", "labgrid", "--lg-env", str(env_file), "--lg-place",
                    "irqlab-test", "--samples", "10"], db, coordinator)
        out, err = p.communicate(timeout=60)
    finally:
        client(coordinator, "release")
    s = summary(out)
    assert p.returncode == 1 and "cannot acquire labgrid place irqlab-test" in s["message"]


def test_bad_labgrid_options_exit_2(tmp_path, db):
    res = run_cli(["run", "--target", "labgrid"], db, timeout=60)
    assert res.code == 2 and "--lg-env" in res.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("just: text\n")
    res = run_cli(["run", "--target", "labgrid", "--lg-env", str(bad)], db, timeout=60)
    assert res.code == 2 and "no targets" in res.stderr
    env_file = write_env(tmp_path / "x86.yaml", "x86_64")
    res = run_cli(["run", "--target", "labgrid", "--lg-env", str(env_file),
                   "--lg-image", str(tmp_path / "none.elf")], db, timeout=60)
    assert res.code == 2 and "--lg-image" in res.stderr


def test_matrix_over_boards_with_the_environment_as_a_key(probes, tmp_path):
    """One matrix, two "boards" (x86-64 and arm64 environments); a lab would use
    ``lg_place`` the same way."""
    x86 = write_env(tmp_path / "x86.yaml", "x86_64")
    arm = write_env(tmp_path / "arm64.yaml", "arm64")
    scenario = tmp_path / "boards.toml"
    scenario.write_text(f'name = "boards"\n[run]\ntarget = "labgrid"\nsamples = 1000\n'
                        f'window = "1s"\nstall_timeout = "{STALL}"\n[matrix]\n'
                        f'lg_env = ["{x86}", "{arm}"]\n')
    res = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "matrix", str(scenario),
                          "--format", "json", "--db", str(tmp_path / "db.duckdb")],
                         capture_output=True, text=True, timeout=240)
    cells = [json.loads(ln) for ln in res.stdout.splitlines() if ln.startswith("{")]
    assert res.returncode == 0, res.stderr
    assert [(c["arch"], c["status"], c["samples"]) for c in cells] == [
        ("x86_64", "ok", 1000), ("arm64", "ok", 1000)], res.stdout + res.stderr
    # The boards' samples come over the console: on a busy host TCG's UART can fall
    # behind the probe's ring, which then overflows. Such loss must be counted, never
    # hidden or invented: every gap in the stored sequence is a lost sample.
    with Store(tmp_path / "db.duckdb", read_only=True) as store:
        for c in cells:
            seqs = sorted(int(s) for b in store.iter_samples(c["run_id"])
                          for s in b.column("seq").to_pylist())
            assert len(seqs) == c["samples"]
            assert seqs[-1] + 1 - seqs[0] - len(seqs) == c["lost"], c
            assert c["lost"] <= 0.05 * c["samples"], c


def test_killed_irqlab_leaves_no_qemu(probes, tmp_path):
    """labgrid cleans up at exit only: irqlab makes its QEMU die with it (SIGKILL too)."""
    db = tmp_path / "db.duckdb"
    env_file = write_env(tmp_path / "x86.yaml", "x86_64")
    # labgrid's QEMU driver keeps its serial socket in a directory it makes under TMPDIR
    # and removes at exit only: a SIGKILLed irqlab left one in /tmp each suite run. Here
    # it goes into the test's own directory.
    p = irqlab(["--target", "labgrid", "--lg-env", str(env_file), "--samples", "1000000",
                "--window", "1s"], db, {**os.environ, "TMPDIR": str(tmp_path)})
    try:
        first, deadline = "", time.monotonic() + 60
        while '"type": "window"' not in first:
            assert time.monotonic() < deadline and p.poll() is None, p.stderr.read()
            if select.select([p.stdout], [], [], 1.0)[0]:
                first = p.stdout.readline()
        qemus = [pid for pid in filter(str.isdigit, os.listdir("/proc"))
                 if _ppid(pid) == p.pid]
        assert qemus, "no QEMU child found"
        p.kill()
        p.wait()
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{q}").exists() and _state(q) != "Z" for q in qemus):
            assert time.monotonic() < deadline, "QEMU outlived a killed irqlab"
            time.sleep(0.1)
    finally:
        if p.poll() is None:
            p.kill()


def _ppid(pid: str) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _state(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"
