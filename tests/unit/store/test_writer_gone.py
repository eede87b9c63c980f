"""recover.writer_gone: a run's writer is judged gone only when it ran in this boot of
this host and its process no longer exists (the lab store's rule for dead runs)."""

from __future__ import annotations

import subprocess
import sys

from irqlab.store.recover import writer_gone, writer_identity


def test_this_process_is_alive():
    assert writer_gone(writer_identity()) is False


def test_an_ended_process_of_this_boot_is_gone():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    me = writer_identity()
    from irqlab.store.recover import _starttime
    writer = {"pid": child.pid, "starttime": _starttime(child.pid), "boot_id": me["boot_id"]}
    assert writer_gone(writer) is False              # alive
    child.communicate(b"")
    assert writer_gone(writer) is True               # ended


def test_a_reused_pid_is_still_gone():
    me = writer_identity()
    assert writer_gone({**me, "starttime": me["starttime"] + 1}) is True


def test_another_boot_or_no_record_cannot_be_judged():
    me = writer_identity()
    assert writer_gone({**me, "pid": 999_999_999, "boot_id": "another-host"}) is False
    assert writer_gone(None) is False
    assert writer_gone({"pid": 1}) is False
