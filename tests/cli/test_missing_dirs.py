"""Issue 47, smaller items: a missing parent directory is an error naming it (never
made for the user), and a tag key is refused by the rule the dashboard's filter uses."""

from __future__ import annotations

import pytest

from irqlab.serve.runs_query import BadQuery, RunsQuery
from tests.conftest import call_argv


@pytest.mark.parametrize("argv", [
    ["run", "--target", "native", "--duration", "1s", "--db", "{tmp}/no/dir/x.duckdb"],
    ["list", "--db", "{tmp}/no/dir/x.duckdb"],
    ["report", "1", "-o", "{tmp}/no/dir/x.html", "--db", "{tmp}/x.duckdb"],
])
def test_a_missing_directory_is_named_and_not_made(tmp_path, argv):
    res = call_argv([a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert str(tmp_path / "no") in res.stderr
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("key", ['k"', "k\\x", "x" * 201])
def test_a_tag_key_the_dashboard_cannot_filter_is_refused(tmp_path, key):
    res = call_argv(["tag", "1", f"{key}=v", "--db", str(tmp_path / "x.duckdb")])
    assert res.returncode == 2 and "without quotes or backslashes" in res.stderr
    with pytest.raises(BadQuery):
        RunsQuery.from_params({"tag": f"{key}=v"})
