"""No password is ever printed (issue 30): irqlab.store.location.redact on URLs and on
messages that quote one, and the CLI's error lines for stores it cannot open."""

from __future__ import annotations

import subprocess
import sys

import pytest

from irqlab.store.location import redact
from irqlab.store.pg import safe_url


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
        res = subprocess.run([sys.executable, "-m", "irqlab.cli.main", *argv],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 2
        assert "hunter2" not in res.stderr + res.stdout
        assert len(res.stderr.strip().splitlines()) == 1 and "internal error" not in res.stderr
