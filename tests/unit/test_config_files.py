"""Bounded reading of user configuration files (irqlab/config_files.py, issue 30)."""

from __future__ import annotations

import os

import pytest

from irqlab.config_files import (ConfigFileError, load_yaml, nesting_depth,
                                 read_regular_text)


def test_a_regular_utf8_file_is_read(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("name = \"café\"\n", encoding="utf-8")
    assert read_regular_text(path, "the file") == "name = \"café\"\n"


@pytest.mark.parametrize("kind,match", [("fifo", "is a FIFO"), ("dir", "is a directory"),
                                        ("zero", "is a device"), ("big", "larger than"),
                                        ("latin1", "not UTF-8 text .byte 0xe9 at offset 3"),
                                        ("missing", "cannot read")])
def test_other_files_are_refused_at_once(tmp_path, kind, match):
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)                 # no writer: a blocking open would never return
    elif kind == "dir":
        path.mkdir()
    elif kind == "zero":
        path = "/dev/zero"
    elif kind == "big":
        path.write_bytes(b"#" * 2000)
    elif kind == "latin1":
        path.write_bytes(b"a=\"\xe9\"")
    with pytest.raises(ConfigFileError, match=match):
        read_regular_text(path, "the file", max_bytes=1000)


def test_yaml_with_ordinary_anchors_loads_as_safe_load_does():
    import yaml

    text = ("base: &b {qemu_bin: qemu, memory: 64M}\n"
            "targets:\n  main:\n    drivers:\n      QEMUDriver:\n        <<: *b\n"
            "        kernel: probe\n")
    assert load_yaml(text, "env.yaml") == yaml.safe_load(text)


def test_an_alias_bomb_is_refused_by_its_expanded_size():
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for prev, cur in zip("abcdef", "bcdefg"):
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 10) + "]")
    text = "\n".join(lines) + "\n"          # g expands to 10^7 scalars
    with pytest.raises(ConfigFileError, match="alias bomb"):
        load_yaml(text, "env.yaml")
    assert load_yaml(text, "env.yaml", max_nodes=20_000_000)["a"][0] == "x"


def test_depth_is_limited_in_both_yaml_styles():
    block = "k:\n" + "".join("  " * i + "k:\n" for i in range(1, 70))
    with pytest.raises(ConfigFileError, match="nested more than 64 levels deep"):
        load_yaml(block, "env.yaml")
    with pytest.raises(ConfigFileError, match="env.yaml"):
        load_yaml("[" * 10_000 + "]" * 10_000, "env.yaml")
    assert nesting_depth([[[]]]) == 3
    assert nesting_depth([[[[[[]]]]]], limit=3) == 4     # counting stops past the limit
