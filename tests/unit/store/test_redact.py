"""No password is ever printed (issue 30): irqlab.store.location.redact on URLs and on
messages that quote one, and the CLI's error lines for stores it cannot open."""

from __future__ import annotations

import pytest

from irqlab.store.location import redact
from irqlab.store.pg import safe_url
from tests.conftest import call_argv


@pytest.mark.parametrize("text, shown", [
    ("postgresql://lab:hunter2@db/irq", "postgresql://lab:***@db/irq"),
    ("postgres://lab:hunter2@db:5433/irq?sslmode=require",
     "postgres://lab:***@db:5433/irq?sslmode=require"),
    ("postgresql://lab@db/irq?password=hunter2", "postgresql://lab@db/irq?password=***"),
    ("postgresql://db/irq?sslmode=require&PASSWORD=hunter2&connect_timeout=3",
     "postgresql://db/irq?sslmode=require&PASSWORD=***&connect_timeout=3"),
    ("postgresql://lab:hunter2@[::1", "postgresql://lab:***@[::1"),
    ("failed: \"postgresql://a:hunter2@h/d?password=hunter2\"",
     "failed: \"postgresql://a:***@h/d?password=***\""),
    ("host=db password=hunter2 user=lab", "host=db password=*** user=lab"),
    ("no database at mysql:/u:hunter2@h/x", "no database at mysql:/u:***@h/x"),
    ("postgresql://lab@db/irq", "postgresql://lab@db/irq"),          # nothing to hide
])
def test_redact_hides_every_password(text, shown):
    assert redact(text) == shown
    assert safe_url(text) == shown                 # the store's name for itself: the same


@pytest.mark.parametrize("url", [
    "postgresql://lab:hunter2@/irq?host=/nonexistent-irqlab&password=hunter2",
    "postgresql://lab:hunter2@[::1",
    "postgresql://lab@/irq?password=hunter2&no_such_option=1",
])
def test_cli_errors_never_show_the_password(url, tmp_path):
    for argv in (["list", "--db", url], ["push", "1", "--db", str(tmp_path / "a.duckdb"),
                                          "--to", url.replace("postgresql", "pg")]):
        res = call_argv(argv)        # in this interpreter: the message is the point
        assert res.returncode == 2
        assert "hunter2" not in res.stderr + res.stdout
        assert len(res.stderr.strip().splitlines()) == 1 and "internal error" not in res.stderr


def test_redaction_is_linear_in_the_text():
    """A long run of scheme characters once made the userinfo pattern rescan from every
    start (16.7 s for 64 k characters, issue 47). The text grows 16x: linear work grows
    ~16x, the old pattern's ~256x. Best of seven each, compared within this one test (a
    ratio, no absolute time: a busy machine slows both alike), at sizes whose time is far
    above the clock's and the scheduler's noise (4 k characters took ~50 us: one
    preemption on a loaded host decided the ratio)."""
    import time

    def best(n: int) -> float:
        text = "a" * n
        out = []
        for _ in range(7):
            t = time.perf_counter()
            redact(text)
            out.append(time.perf_counter() - t)
        return min(out)
    assert best(512_000) < 64 * best(32_000)
    # and it still redacts, around long runs
    long = "A" * 50_000
    out = redact(f"{long} postgresql://u:secret@h/db {long}")
    assert "secret" not in out and "postgresql://u:***@h/db" in out


def test_error_lines_cut_long_echoed_values():
    from irqlab.cli.main import ECHO_MAX, error_text
    word = "series:" + "A" * 64_000
    line = error_text(f"irqlab show: error: no series '{word}' (see `irqlab list`)")
    assert len(line) < 2 * ECHO_MAX + 80 and line.endswith("(see `irqlab list`)")
    assert "…(63,829 characters)…" in line      # 64,009 less the 180 shown
    assert error_text("postgresql://u:" + "p" * 500 + "@h/db") == "postgresql://u:***@h/db"
