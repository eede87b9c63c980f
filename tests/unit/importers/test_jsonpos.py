"""member_lines finds where each member of a JSON object starts, skipping strings."""

from __future__ import annotations

import json

from irqlab.importers.jsonpos import member_lines


def test_members_of_the_named_top_level_object_only() -> None:
    text = ('{\n "a": 1,\n "thread": {\n  "0": {"x": "}\\"{", "h": {"1": 2}},\n'
            '  "1": {\n "min": 3}\n },\n "z": {"thread": 5}\n}')
    assert json.loads(text)["thread"]["1"] == {"min": 3}
    assert member_lines(text, "thread") == {"0": 4, "1": 5}


def test_missing_or_broken_gives_nothing() -> None:
    assert member_lines('{"cpu": [1, 2]}', "cpu") == {}
    assert member_lines('{"a": {"cpu": {"0": 1}}}', "cpu") == {}
    assert member_lines('[1, 2', "cpu") == {}


def test_escaped_keys_are_decoded() -> None:
    assert member_lines('{"cpu":\n{"\\u0030": 1}}', "cpu") == {"0": 2}
