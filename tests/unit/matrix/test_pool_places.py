"""The pool's reading of ``labgrid-client -v places`` and its MATCH (name pattern or
tag=value), on the text labgrid 26 prints (labgrid.remote.common.Place.show)."""

from __future__ import annotations

from irqlab.cli.matrix_pool import matches, parse_places

PLACES = """\
Place 'other':
  tags: board=arm, lab=b
  matches:
  acquired: None
  acquired resources:
  created: 2026-11-26 19:00:00.000000
  changed: 2026-11-26 19:00:00.000000
Place 'rig-a':
  comment: under the desk
  tags: board=x86
  matches:
    */QEMU/*
  acquired: ci-host/alice
  acquired resources:
  created: 2026-11-26 19:00:00.000000
  changed: 2026-11-26 19:00:01.000000
Place 'rig-b':
  matches:
  acquired: None
  acquired resources:
  created: 2026-11-26 19:00:00.000000
  changed: 2026-11-26 19:00:00.000000
"""


def test_places_tags_and_who_holds_them():
    places = {p.name: p for p in parse_places(PLACES)}
    assert list(places) == ["other", "rig-a", "rig-b"]
    assert places["other"].tags == {"board": "arm", "lab": "b"}
    assert (places["rig-a"].tags, places["rig-a"].acquired) == ({"board": "x86"},
                                                                "ci-host/alice")
    assert (places["rig-b"].tags, places["rig-b"].acquired) == ({}, None)


def test_match_by_name_pattern_or_tags():
    places = parse_places(PLACES)

    def picked(match: str) -> list[str]:
        return [p.name for p in places if matches(p, match)]

    assert picked("rig-*") == ["rig-a", "rig-b"]
    assert picked("rig-b") == ["rig-b"]
    assert picked("RIG-*") == []                       # case-sensitive, as place names
    assert picked("board=x86") == ["rig-a"]
    assert picked("board=arm,lab=b") == ["other"]       # every tag must hold
    assert picked("board=arm,lab=a") == []
    assert parse_places("") == []
