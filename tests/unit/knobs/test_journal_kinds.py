"""Undo kinds register themselves (@undo_kind where the change is made); the journal
finds a kind it has not seen through the module its entry names."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from irqlab.journal import Journal, undo_kind

# Replays in a fresh interpreter that imported only the journal, as `irqlab` does at start.
REPLAY = ("import sys\nfrom irqlab.journal import replay_stale\n"
          "print('\\n'.join(replay_stale()))\n"
          "print(sorted(m for m in sys.modules if m.startswith('irqlab.')))\n")


def _dead_journal(state: Path, entry: dict) -> None:
    # A file nobody holds a lock on: its owner died.
    (state / "journal").mkdir(parents=True, exist_ok=True)
    (state / "journal" / "12345-1.jsonl").write_text(json.dumps({"id": 1, **entry}) + "\n")


def _replay(state: Path) -> tuple[str, list[str]]:
    res = subprocess.run([sys.executable, "-c", REPLAY], capture_output=True, text=True,
                         env={**os.environ, "IRQLAB_STATE_DIR": str(state)}, timeout=60)
    assert res.returncode == 0, res.stderr
    said, modules = res.stdout.rsplit("\n", 2)[0], res.stdout.rsplit("\n", 2)[1]
    return said, ast.literal_eval(modules)   # the list printed above


@pytest.mark.parametrize("named", [True, False], ids=["undo-key", "entry-before-the-key"])
def test_a_fresh_process_undoes_a_kind_whose_module_it_never_imported(tmp_path, named):
    knob = tmp_path / "knob"
    knob.write_text("0")
    entry = {"op": "write", "path": str(knob), "old": "200000"}
    if named:
        entry["undo"] = "irqlab.knobs.kvm"
    _dead_journal(tmp_path, entry)
    said, modules = _replay(tmp_path)
    assert knob.read_text() == "200000"
    assert said == f"restored {knob} to '200000'"
    assert "irqlab.knobs.kvm" in modules          # imported for the entry, not before
    assert not list((tmp_path / "journal").glob("*.jsonl"))


def test_an_entry_naming_a_module_outside_the_package_is_not_imported(tmp_path):
    _dead_journal(tmp_path, {"op": "surprise", "undo": "os.path"})
    said, _ = _replay(tmp_path)
    assert said.startswith("unknown journal entry") and said.endswith("skipped")


def test_an_entry_records_the_module_of_its_undo(tmp_path):
    @undo_kind("test-kind")
    def undo_test(entry: dict) -> str:
        return f"undid {entry['what']}"

    j = Journal(tmp_path)
    j.add("test-kind", what="x")
    line = json.loads(j.path.read_text().splitlines()[0])
    assert line == {"id": 1, "op": "test-kind", "undo": __name__, "what": "x"}
    from irqlab.journal import undo
    assert undo(line) == "undid x"
    j.done(1)


def test_journalling_a_kind_nothing_can_undo_is_refused(tmp_path):
    j = Journal(tmp_path)
    with pytest.raises(ValueError, match="no registered undo"):
        j.add("never-registered", path="/x")
    assert j.path is None                        # no file was made for it
