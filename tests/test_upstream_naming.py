"""Operation names for upstream tools (``opgate.upstream._naming``)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from opgate.upstream._naming import MAX_NAME, Namer, Naming

RULE = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def test_a_plain_tool_name_is_kept() -> None:
    assert Namer().name("time", "get_current_time") == Naming("time.get_current_time")
    assert not Naming("time.x").changed


def test_characters_outside_the_rule_are_replaced() -> None:
    naming = Namer().name("fs", "read file/now?")
    assert naming == Naming("fs.read_file_now_", replaced=True)
    assert naming.changed


def test_an_empty_tool_name_still_gets_a_name() -> None:
    assert Namer().name("fs", "").name == "fs._"


def test_collisions_get_numbers_in_call_order() -> None:
    namer = Namer()
    assert namer.name("fs", "read file").name == "fs.read_file"
    second = namer.name("fs", "read?file")
    assert second == Naming("fs.read_file_2", replaced=True, suffixed=True)
    assert namer.name("fs", "read!file").name == "fs.read_file_3"
    assert namer.name("fs", "read_file_2").name == "fs.read_file_2_2"


def test_long_names_are_shortened_with_a_hash_of_the_whole() -> None:
    namer = Namer()
    first = namer.name("srv", "a" * 200)
    other = namer.name("srv", "a" * 199 + "b")
    assert first.shortened
    assert len(first.name) == MAX_NAME
    assert len(other.name) == MAX_NAME
    assert first.name != other.name
    assert first.name[:119] == other.name[:119]
    assert Namer().name("srv", "a" * 200) == first  # deterministic


def test_a_suffix_on_a_full_length_name_still_fits() -> None:
    namer = Namer()
    names = [namer.name("srv", "a" * 300).name for _ in range(12)]
    assert len(set(names)) == 12
    assert all(len(name) <= MAX_NAME for name in names)


@given(st.lists(st.text(max_size=150), max_size=30))
def test_names_follow_the_rule_and_are_unique(tools: list[str]) -> None:
    namer = Namer()
    names = [namer.name("up-1", tool).name for tool in tools]
    assert all(RULE.fullmatch(name) for name in names)
    assert all(name.startswith("up-1.") for name in names)
    assert len(set(names)) == len(names)
    again = Namer()
    assert [again.name("up-1", tool).name for tool in tools] == names


def test_names_that_need_no_change_are_given_first() -> None:
    # in plain code-point order "read file" (' ' < '_') would take "fs.read_file" and push
    # the real read_file to "_2": a plain name is never taken by a renamed tool
    tools = ["write.file", "read file", "read_file", "write_file", "write-file", "read_file_2"]
    names = {tool: naming.name for tool, naming in Namer().names("fs", tools).items()}
    assert names == {
        "read_file": "fs.read_file",
        "read_file_2": "fs.read_file_2",
        "write-file": "fs.write-file",
        "write.file": "fs.write.file",
        "write_file": "fs.write_file",
        "read file": "fs.read_file_3",
    }
    assert Namer().names("fs", reversed(tools)) == Namer().names("fs", tools)
