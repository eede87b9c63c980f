"""The Python blocks of README.md and docs/*.md marked ``<!-- runnable -->`` run, as a
reader would paste them, with what the default install has (issue 32: docs/api.md's
example needed pandas, which only the test extra installs).

Each block runs in a fresh interpreter whose HOME holds a store with one run at the
default path (~/.local/share/irqlab/irqlab.duckdb) and whose working directory holds
DIR, an `irqlab export --parquet` of it; `import pandas` and `import polars` fail there
(the default install has neither)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from irqlab.store import Store
from tests.conftest import call_cli
from tests.unit.reports._runs import add_run, latencies

ROOT = Path(__file__).parents[2]
MARK = "<!-- runnable -->"
# A marked block: the marker line, then a ```python fence (blank lines between allowed).
BLOCK = re.compile(re.escape(MARK) + r"\s*\n```python\n(.*?)\n```", re.S)
# What the default install lacks: the block fails if it imports them.
# (a finder that says "no module named", as Python does when a package is absent)
NOT_INSTALLED = """import sys
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pandas", "polars"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _Absent())
"""


def _blocks() -> list[tuple[str, int, str]]:
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        for m in BLOCK.finditer(text):
            out.append((path.name, text[:m.start()].count("\n") + 1, m.group(1)))
    return out


BLOCKS = _blocks()


def test_api_examples_are_marked():
    assert [(name, code) for name, _line, code in BLOCKS if name == "api.md"], \
        "docs/api.md's examples are not marked runnable"
    # Every Python block of docs/api.md is marked: none can rot unseen.
    text = (ROOT / "docs" / "api.md").read_text()
    assert text.count("```python") == len([b for b in BLOCKS if b[0] == "api.md"])


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("home")
    db = home / ".local" / "share" / "irqlab" / "irqlab.duckdb"
    db.parent.mkdir(parents=True)
    with Store(db) as st:
        add_run(st, "docs", latencies("ramp", 1000))
    res = call_cli(["export", "docs", "--parquet", str(home / "DIR")], db)
    assert res.code == 0, res.stderr
    return home


@pytest.mark.parametrize("name,line,code", BLOCKS, ids=[f"{n}:{ln}" for n, ln, _ in BLOCKS])
def test_runnable_block_runs(home, name, line, code):
    proc = subprocess.run([sys.executable, "-c", NOT_INSTALLED + code], cwd=home,
                          env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{name} line {line}:\n{proc.stderr[-2000:]}"
    assert proc.stdout.strip(), f"{name} line {line} printed nothing"
