"""Tests of ``opgate._operation``: an ``Operation`` definition and the name rule.

Names are 1 to 128 characters of ``[A-Za-z0-9_.-]``, case-sensitive; the summary is
nonblank; every text is valid UTF-8 and kept as a plain ``str``; examples are a
sequence of strings, kept as a tuple; the handler must be callable. (What a
``Registry`` checks of a whole catalog is ``test_catalog.py``.)
"""

from __future__ import annotations

import pytest

from opgate import ConfigurationError, Operation
from opgate._operation import check_name
from registry_support import op, registry


@pytest.mark.parametrize("name", ["", "a b", "x" * 129, "naïve", "a/b", "a\n"])
def test_invalid_names_rejected(name: str) -> None:
    with pytest.raises(ConfigurationError, match="operation name"):
        op(name)


def test_name_boundaries_and_case_sensitivity() -> None:
    reg = registry([op("x" * 128), op("A.b-c_9"), op("a.b-c_9")])
    assert len(reg) == 3


@pytest.mark.parametrize("summary", ["", "   ", "\n\t"])
def test_blank_summary_rejected(summary: str) -> None:
    with pytest.raises(ConfigurationError, match="summary"):
        op("a", summary)


def test_summary_must_be_valid_utf8() -> None:
    with pytest.raises(ConfigurationError, match="UTF-8"):
        op("a", "bad \ud800 summary")


def test_handler_must_be_callable() -> None:
    with pytest.raises(TypeError, match="handler"):
        Operation("a", "s", "not callable")  # type: ignore[arg-type]


def test_a_name_must_be_a_str() -> None:
    with pytest.raises(TypeError, match="must be a str"):
        check_name(b"orders.refund")
    assert check_name("orders.refund") == "orders.refund"


@pytest.mark.parametrize("field", ["description", "group", "source"])
def test_every_text_must_be_valid_utf8(field: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"{field} must be valid UTF-8"):
        op("a", **{field: "bad \udc80 text"})
    with pytest.raises(TypeError, match=rf"{field} must be a str"):
        op("a", **{field: 7})


def test_examples_are_a_sequence_of_str_kept_as_a_tuple() -> None:
    assert op("a", examples=["refund order 7", "refund order 8"]).examples == (
        "refund order 7",
        "refund order 8",
    )
    with pytest.raises(TypeError, match="examples must be a sequence of str"):
        op("a", examples="refund order 7")
    with pytest.raises(ConfigurationError, match="example 1 must be valid UTF-8"):
        op("a", examples=["fine", "bad \ud800"])


def test_texts_are_kept_as_plain_str() -> None:
    class Loud(str):
        def __str__(self) -> str:
            return self.upper()

    operation = op("a", Loud("refund an order"), description=Loud("money back"))
    assert type(operation.summary) is str
    assert type(operation.description) is str
    assert (operation.summary, operation.description) == ("refund an order", "money back")
