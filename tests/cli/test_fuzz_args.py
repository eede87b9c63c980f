"""Issue 47: arbitrary arguments to every command, in process (irqlab/cli/fuzz_args.py):
no internal error, no traceback, no hang, at most one error line. A few hundred vectors
here; `scripts/fuzz-args 100000` runs the big count (docs/figures.md)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from irqlab.cli.fuzz_args import HOSTILE, Sandbox, Tally, commands, quiet_process

OPTIONS = commands()
_TEXT = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=40),
                  st.binary(max_size=20).map(lambda b: b.decode("utf-8",
                                                                "surrogateescape")))


@st.composite
def _vectors(draw) -> list[str]:
    name = draw(st.sampled_from(sorted(OPTIONS)))
    argv = [name]
    for _ in range(draw(st.integers(0, 5))):
        if OPTIONS[name] and draw(st.booleans()):
            argv.append(draw(st.sampled_from(OPTIONS[name])))
        argv.append(draw(_TEXT))
    return argv


@pytest.mark.slow
def test_every_command_survives_arbitrary_arguments(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-args")
    box = Sandbox(root)
    tally = Tally()

    @settings(max_examples=200, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(_vectors())
    def one(argv: list[str]) -> None:
        with quiet_process(root):
            box.run(argv, tally)
        assert not tally.findings(), "\n".join(tally.lines())
    one()
    assert tally.vectors >= 200 and set(tally.exits) <= {0, 1, 2}
