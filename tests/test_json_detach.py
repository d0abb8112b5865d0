"""Detached copies (``detach``, and the fresh values ``parse`` and ``from_python`` return).

Every container is copied and none is shared with the original, type for type (trees
holding many ``Decimal`` values take another path than plain ones); only immutable
scalars are shared.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from json_support import FAST, same, walk
from opgate._json import detach, from_python, parse


def test_from_python_returns_a_detached_copy() -> None:
    original: dict[str, Any] = {"a": [1, {"b": [2]}], "c": {"d": "e"}}
    copy = from_python(original)
    assert copy == original
    assert isinstance(copy, dict)
    copy["a"][1]["b"].append(3)
    copy["c"]["new"] = 1
    copy["z"] = 0
    assert original == {"a": [1, {"b": [2]}], "c": {"d": "e"}}
    original["a"].append("later")
    assert copy["a"] == [1, {"b": [2, 3]}]
    shared = [part for part in walk(copy) if isinstance(part, list | dict)]
    originals = {id(part) for part in walk(original) if isinstance(part, list | dict)}
    assert not {id(part) for part in shared} & originals


def test_parse_hands_out_fresh_values() -> None:
    text = '{"a": [1], "b": {"c": 2}}'
    first = parse(text)
    assert isinstance(first, dict)
    first["a"].append(2)  # type: ignore[union-attr]
    assert parse(text) == {"a": [1], "b": {"c": 2}}


def test_detach_copies_every_container() -> None:
    value = parse('{"a": [1, {"b": [2, 3]}], "c": "x", "d": 1.5}')
    copy = detach(value)
    assert same(copy, value)
    assert isinstance(copy, dict)
    copy["a"][1]["b"].clear()  # type: ignore[index]
    copy["c"] = "changed"
    assert same(value, parse('{"a": [1, {"b": [2, 3]}], "c": "x", "d": 1.5}'))
    assert detach(None) is None
    assert detach("s") == "s"


def _containers(value: object) -> list[object]:
    found: list[object] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict | list):
            found.append(item)
            stack.extend(item.values() if isinstance(item, dict) else item)
    return found


_DECIMAL_TREES = st.recursive(
    st.sampled_from([Decimal("0.5"), Decimal("-1.25"), 3, "s", None, True]),
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.sampled_from("abcd"), inner, max_size=4)
    ),
    max_leaves=40,
)


@FAST
@given(_DECIMAL_TREES)
def test_detach_copies_every_container_of_trees_with_decimals(value: object) -> None:
    # Trees holding Decimals are copied by pickle or, when Decimals outnumber the
    # containers, level by level: either way equal, type for type, with no container
    # shared with the original.
    if not isinstance(value, dict | list):
        return
    copy = detach(value)  # type: ignore[arg-type]
    assert same(copy, value)
    originals = {id(item) for item in _containers(value)}
    assert originals.isdisjoint(id(item) for item in _containers(copy))


def test_detach_of_many_decimals_shares_only_the_numbers() -> None:
    value = parse("[" + ",".join(f"0.{i + 1}" for i in range(2000)) + ',{"a":[0.5]}]')
    assert isinstance(value, list)
    copy = detach(value)
    assert isinstance(copy, list)
    assert same(copy, value)
    assert copy is not value
    assert copy[-1] is not value[-1]
    copy[-1]["a"].append(1)  # type: ignore[index]
    assert value[-1] == {"a": [Decimal("0.5")]}
