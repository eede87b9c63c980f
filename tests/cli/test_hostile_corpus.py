"""Issue 47: the hostile-input corpus (tests/fixtures/hostile_corpus.json, 449 command
lines: every case of the issue and generated ones), each run as a real `irqlab` process
in a scratch directory with a store of two runs: the exit code recorded with the case,
no internal error, no traceback, one error line at most, within TIMEOUT_S. The cases run
a few at a time inside each shard (the suite's budget is tight).

Regenerate the recorded exit codes after a deliberate change:
    python -m tests.cli.test_hostile_corpus --record
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from irqlab.cli.fuzz_args import Sandbox

# Nothing host-wide (tests/conftest.py): its one probe-shaped input, a matrix of
# target = "native", is always refused before a run starts (every such case expects 2);
# the word alone put its 449 processes (81 s) on the host group's one worker.
XDIST_GROUP = ""

CORPUS = Path(__file__).parents[1] / "fixtures" / "hostile_corpus.json"
SHARDS = 4
AT_ONCE = 4
TIMEOUT_S = 120
_NO_DB = ("completion", "manpage", "doctor")


def _scenarios(root: Path) -> dict[str, str]:
    def values(fmt: str, n: int) -> str:
        return "[" + ", ".join(fmt.format(100 + i) for i in range(n)) + "]"
    files = {
        "huge": f'name = "huge"\n[run]\ntarget = "native"\nduration = "1s"\n[matrix]\n'
                f'period = {values(chr(34) + "{}us" + chr(34), 1000)}\n'
                f'warmup = {values("{}", 1000)}\n'
                f'threshold = {values(chr(34) + "{}us" + chr(34), 1000)}\n'
                f'window = {values(chr(34) + "{}ms" + chr(34), 1000)}\n',
        "conflict": f'name = "conflict"\n[run]\ntarget = "native"\nduration = "1s"\n'
                    f'samples = 1000\n[matrix]\n'
                    f'period = {values(chr(34) + "{}us" + chr(34), 400)}\n'
                    f'threshold = {values(chr(34) + "{}us" + chr(34), 300)}\n',
        "small": 'name = "small"\n[run]\ntarget = "native"\nduration = "1s"\n'
                 '[matrix]\nperiod = ["100us", "200us"]\n'}
    out = {}
    for name, text in files.items():
        path = root / f"{name}.toml"
        path.write_text(text)
        out[name] = str(path)
    return out


def _argv(case: list[str], box: Sandbox, scenarios: dict[str, str]) -> list[str]:
    argv = []
    for a in case:
        a = a.replace("{tmp}", str(box.root)).replace("{fifo}", str(box.fifo))
        for name, path in scenarios.items():
            a = a.replace("{" + name + "}", path)
        argv.append(a)
    if argv[0] not in _NO_DB and "--db" not in argv:
        argv += ["--db", str(box.db)]
    return argv


def _run(argv: list[str], root: Path) -> tuple[int | None, str]:
    try:
        proc = subprocess.run([sys.executable, "-m", "irqlab.cli.main", *argv], cwd=root,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=TIMEOUT_S,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__)
                                                                   .parents[2])})
    except subprocess.TimeoutExpired:
        return None, ""
    return proc.returncode, proc.stderr.decode("utf-8", "replace")


def _problem(case: dict, code: int | None, err: str) -> str | None:
    if code is None:
        return f"still running after {TIMEOUT_S} s"
    if "internal error" in err or "Traceback" in err:
        return f"exit {code}: {err.strip()[-300:]}"
    if code != case["exit"]:
        return f"exit {code}, recorded {case['exit']}: {err.strip()[-300:]}"
    if code == 2 and len(err.strip().splitlines()) != 1:
        return f"{len(err.strip().splitlines())} error lines: {err.strip()[-300:]}"
    return None


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-corpus")
    return Sandbox(root), _scenarios(root)


def test_the_corpus_is_large_and_holds_the_issues_cases():
    cases = json.loads(CORPUS.read_text())
    assert len(cases) >= 400
    lines = {" ".join(c["argv"])[:60] for c in cases}
    for case in ("compare 1 2 --resamples 1000000000000", "bench --stats-samples 0 stats",
                 "tag 2 k\"=v", "import auto /dev/zero", "import auto {fifo}"):
        assert case in lines, case


@pytest.mark.slow            # 470 CLI processes: about a minute on two cores
@pytest.mark.parametrize("shard", range(SHARDS))
def test_hostile_corpus(sandbox, shard):
    box, scenarios = sandbox
    cases = json.loads(CORPUS.read_text())[shard::SHARDS]
    with ThreadPoolExecutor(AT_ONCE) as pool:
        results = list(pool.map(lambda c: _run(_argv(c["argv"], box, scenarios),
                                               box.root), cases))
    problems = [f"{ascii(c['argv'])[:200]}: {p}" for c, (code, err) in zip(cases, results)
                if (p := _problem(c, code, err)) is not None]
    assert not problems, "\n".join(problems[:20])


def _record(raw: list[list[str]]) -> None:
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        box = Sandbox(Path(tmp))
        scenarios = _scenarios(Path(tmp))
        with ThreadPoolExecutor(AT_ONCE) as pool:
            results = list(pool.map(lambda a: _run(_argv(a, box, scenarios), box.root),
                                    raw))
    out = []
    for argv, (code, err) in zip(raw, results):
        if code is None or "internal error" in err or "Traceback" in err:
            print("PROBLEM", ascii(argv)[:200], code, err.strip()[-300:])
            continue
        out.append({"argv": argv, "exit": code})
    CORPUS.write_text(json.dumps(out, indent=0, ensure_ascii=True) + "\n")
    print(f"{len(out)} cases recorded")


if __name__ == "__main__":
    if sys.argv[1:] == ["--record"]:
        _record([c["argv"] for c in json.loads(CORPUS.read_text())])
    elif len(sys.argv) == 3 and sys.argv[1] == "--record-from":
        _record(json.loads(Path(sys.argv[2]).read_text()))
