"""A run's scratch directory (initramfs, dom0 image) is in the restore journal (issue 30):
removed when the run stops, and by the next irqlab start after a kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from irqlab.runner.process import MeasuredProcess

# A run's process as far as its scratch directory goes: made through the same function the
# net, Xen and Linux-guest targets use, then held until killed.
HOLD = ("import sys, time\n"
        "from irqlab.runner.process import MeasuredProcess\n"
        "target = MeasuredProcess()\n"
        "work = target._workdir(sys.argv[1])\n"
        "(work / 'initramfs.cpio').write_bytes(bytes(1 << 20))\n"
        "print(work, flush=True)\n"
        "time.sleep(600)\n")


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "IRQLAB_STATE_DIR": str(tmp_path / "state"),
            "TMPDIR": str(tmp_path)}


def test_the_next_start_removes_the_scratch_directory_of_a_killed_run(tmp_path):
    for prefix in ("irqlab-net-", "irqlab-xen-"):
        child = subprocess.Popen([sys.executable, "-c", HOLD, prefix], env=_env(tmp_path),
                                 stdout=subprocess.PIPE, text=True)
        work = Path(child.stdout.readline().strip())
        assert work.parent == tmp_path and work.name.startswith(prefix)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
        assert (work / "initramfs.cpio").exists()        # the kill left it behind
        res = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "list", "--db",
                              str(tmp_path / "none.duckdb")], env=_env(tmp_path),
                             capture_output=True, text=True, timeout=60)
        assert f"removed scratch directory {work}" in res.stderr
        assert not work.exists()
    assert not list((tmp_path / "state" / "journal").glob("*.jsonl"))


def test_stop_removes_it_and_closes_the_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("IRQLAB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)       # re-read $TMPDIR
    target = MeasuredProcess()
    work = target._workdir("irqlab-xen-")
    assert oct(work.stat().st_mode & 0o777) == "0o700"
    (work / "dom0.cpio").write_bytes(b"x")
    assert list((tmp_path / "state" / "journal").glob("*.jsonl"))   # journalled
    target.stop()
    assert not work.exists()
    assert not list((tmp_path / "state" / "journal").glob("*.jsonl"))


def test_an_entry_never_removes_what_is_not_an_irqlab_scratch_directory(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    link = tmp_path / "irqlab-net-link"
    link.symlink_to(precious)
    (tmp_path / "state" / "journal").mkdir(parents=True)
    lines = [{"id": i, "op": "scratch_dir", "undo": "irqlab.runner.scratch", "path": str(p)}
             for i, p in enumerate([precious, link], 1)]
    (tmp_path / "state" / "journal" / "12345-1.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines))
    res = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "list", "--db",
                          str(tmp_path / "none.duckdb")], env=_env(tmp_path),
                         capture_output=True, text=True, timeout=60)
    assert res.stderr.count("not an irqlab scratch directory") == 2
    assert precious.is_dir() and link.is_symlink()


# A load's files (the console flood's ROM, fio's files) as far as scratch goes: the load
# is configured and prepared as a run does, then held until killed.
HOLD_LOAD = ("import sys, time\n"
             "from irqlab.loads import LOADS\n"
             "load = LOADS[sys.argv[1]](dict(a.split('=', 1) for a in sys.argv[2:]))\n"
             "load.prepare()\n"
             "print(load.rom_path if sys.argv[1] == 'console' else load.scratch, flush=True)\n"
             "time.sleep(600)\n")


def test_the_next_start_removes_a_killed_runs_load_files(tmp_path):
    for argv in (["console"], ["io", f"dir={tmp_path / 'io'}", "drop=0s"]):
        child = subprocess.Popen([sys.executable, "-c", HOLD_LOAD, *argv],
                                 env=_env(tmp_path), stdout=subprocess.PIPE, text=True)
        made = Path(child.stdout.readline().strip())
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
        assert made.exists(), argv                    # the kill left it behind
        scratch = made.parent if argv[0] == "console" else made
        assert scratch.name.startswith(f"irqlab-{'flood' if argv[0] == 'console' else 'io'}-")
        res = subprocess.run([sys.executable, "-m", "irqlab.cli.main", "list", "--db",
                              str(tmp_path / "none.duckdb")], env=_env(tmp_path),
                             capture_output=True, text=True, timeout=60)
        assert f"removed scratch directory {scratch}" in res.stderr, res.stderr
        assert not scratch.exists()
    assert not list((tmp_path / "state" / "journal").glob("*.jsonl"))
