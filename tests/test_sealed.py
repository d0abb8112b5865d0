"""Sealed values (``_sealed``): minted only by their constructors, never subclassed or forged."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest

from opgate._sealed import Frozen, Seal, Sealed, is_genuine

SEAL = Seal()
OTHER = Seal()
built: list[int] = []  # every Token constructor call, by value


@SEAL.mints
class Token(Sealed):
    """A standalone sealed class, like ``Result``."""

    __slots__ = ("value",)

    _refusal = "Token cannot be subclassed"

    value: int

    def __init__(self, value: int) -> None:
        built.append(value)
        object.__setattr__(self, "value", value)
        SEAL.stamp(self)

    def _rebuild(self) -> tuple[Any, ...]:
        return (Token, (self.value,))


class _Shape(Sealed):
    """A family root, like the content blocks' ``_Block``: members in this module only."""

    __slots__ = ()

    _refusal = "{name}: shapes cannot be subclassed"
    _immutable = "{type} is immutable"

    def _rebuild(self) -> tuple[Any, ...]:
        return (type(self), dataclasses.astuple(self))  # type: ignore[call-overload]


@SEAL.mints
@dataclasses.dataclass(frozen=True, slots=True)
class Square(_Shape):
    side: int

    def __post_init__(self) -> None:
        SEAL.stamp(self)


@SEAL.mints
class Label(_Shape):
    """A member written by hand, like ``FormInput``: it raises the family's message."""

    __slots__ = ("text",)

    text: str

    def __init__(self, text: str) -> None:
        object.__setattr__(self, "text", text)
        SEAL.stamp(self)

    def _rebuild(self) -> tuple[Any, ...]:
        return (Label, (self.text,))


@SEAL.mints
@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Decision(Sealed):
    """Stamped by a factory only, like an outcome: ``Decision(...)`` itself is a forgery."""

    kind: str

    def _rebuild(self) -> tuple[Any, ...]:
        return (decide, (self.kind,))


def decide(kind: str) -> Decision:
    decision = Decision(kind)
    SEAL.stamp(decision)
    return decision


class Mixin:
    __slots__ = ()


class Point(Frozen):
    """Frozen without a seal, like ``Execute``: anyone may build or subclass it."""

    __slots__ = ("x",)

    def __init__(self, x: int) -> None:
        object.__setattr__(self, "x", x)


# --- minting ------------------------------------------------------------------------------


def test_constructed_values_are_genuine() -> None:
    assert is_genuine(Token(1))
    assert is_genuine(Square(2))
    assert is_genuine(Label("a"))
    assert is_genuine(decide("go"))


@pytest.mark.parametrize("cls", [Token, Square, Label, Decision])
def test_an_instance_its_constructor_did_not_complete_is_not_genuine(cls: type) -> None:
    assert not is_genuine(object.__new__(cls))
    assert not is_genuine(cls.__new__(cls))


def test_values_that_are_not_sealed_are_not_genuine() -> None:
    for value in (None, 1, "Token", Token, SEAL, Point(1), object()):
        assert not is_genuine(value)


def test_a_factory_kind_built_or_replaced_through_its_init_is_not_genuine() -> None:
    assert not is_genuine(Decision("go"))
    assert not is_genuine(dataclasses.replace(decide("go")))
    assert is_genuine(dataclasses.replace(Square(1)))  # its __post_init__ stamps it


def test_only_the_seal_of_its_own_class_makes_a_value_genuine() -> None:
    token = object.__new__(Token)
    OTHER.stamp(token)  # a seal that does not mint Token
    assert not is_genuine(token)
    root = object.__new__(_Shape)
    SEAL.stamp(root)  # the right seal, but _Shape is not one of its kinds
    assert not is_genuine(root)
    SEAL.stamp(token)
    assert is_genuine(token)  # the mark is what makes it: keep stamp() in constructors


def test_mints_refuses_a_closed_or_unsealed_class() -> None:
    with pytest.raises(TypeError, match="Token is not an open sealed class"):
        OTHER.mints(Token)
    with pytest.raises(TypeError, match="Point is not an open sealed class"):
        OTHER.mints(Point)  # type: ignore[type-var]
    assert not is_genuine(object.__new__(Point))


def test_a_seal_names_its_kinds() -> None:
    assert repr(SEAL) == "Seal(Decision, Label, Square, Token)"
    assert repr(OTHER) == "Seal()"


# --- subclass refusal ---------------------------------------------------------------------


def test_a_minted_class_cannot_be_subclassed() -> None:
    with pytest.raises(TypeError, match=r"^Token cannot be subclassed$"):
        type("Sub", (Token,), {})
    with pytest.raises(TypeError, match=r"^Sneaky: shapes cannot be subclassed$"):
        type("Sneaky", (Square,), {"__slots__": ()})
    with pytest.raises(TypeError, match=r"^Sub: sealed values cannot be subclassed$"):
        type("Sub", (Decision,), {})


def test_a_family_takes_members_from_its_own_module_only() -> None:
    with pytest.raises(TypeError, match=r"^Circle: shapes cannot be subclassed$"):
        type("Circle", (_Shape,), {"__module__": "elsewhere"})
    with pytest.raises(TypeError, match=r"^Circle: shapes cannot be subclassed$"):
        type("Circle", (_Shape, Mixin), {})  # one base only
    member = type("Circle", (_Shape,), {"__slots__": ()})  # here: a new, open member
    assert issubclass(member, _Shape)
    assert not is_genuine(object.__new__(member))  # never minted, never genuine


# --- forgery refusal: copies, pickles, state ----------------------------------------------


MAKERS = [lambda: Token(3), lambda: Square(3), lambda: Label("a"), lambda: decide("go")]


@pytest.mark.parametrize("make", MAKERS)
def test_copies_are_the_value_and_pickles_rebuild_it(make: Any) -> None:
    value = make()
    assert copy.copy(value) is value
    assert copy.deepcopy(value) is value
    clone = pickle.loads(pickle.dumps(value))
    assert clone is not value
    assert type(clone) is type(value)
    assert is_genuine(clone)


def test_a_pickle_goes_through_the_constructor() -> None:
    token = Token(7)
    built.clear()
    assert pickle.loads(pickle.dumps(token)).value == 7
    assert built == [7]


@pytest.mark.parametrize("cls", [Token, Square, Label, Decision])
def test_a_forgery_cannot_be_pickled_or_restored(cls: Any) -> None:
    forged = object.__new__(cls)
    with pytest.raises(TypeError, match=f"^an unconstructed {cls.__name__} cannot be copied$"):
        pickle.dumps(forged)
    assert copy.copy(forged) is forged  # never a genuine copy of a forgery
    assert not is_genuine(copy.deepcopy(forged))
    with pytest.raises(TypeError, match="can only be built by its constructor"):
        forged.__setstate__((None, {"_seal": SEAL}))
    assert not is_genuine(forged)


@pytest.mark.parametrize("make", MAKERS)
def test_the_state_of_a_sealed_value_cannot_be_read(make: Any) -> None:
    # dataclass(slots=True) adds state accessors of its own; a sealed class keeps ours.
    with pytest.raises(TypeError, match="has no state to copy"):
        make().__getstate__()


# --- frozen -------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "name"), [(Token(1), "value"), (Point(1), "x")])
def test_frozen_values_refuse_assignment_like_a_frozen_dataclass(value: Any, name: str) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"^cannot assign to field '{name}'$"):
        setattr(value, name, 2)
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"^cannot delete field '{name}'$"):
        delattr(value, name)
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"^cannot assign to field 'new'$"):
        value.new = 2
    assert getattr(value, name) == 1


def test_a_frozen_class_may_name_its_own_message() -> None:
    label = Label("a")
    for attempt in (lambda: setattr(label, "text", "b"), lambda: delattr(label, "text")):
        with pytest.raises(AttributeError, match=r"^Label is immutable$") as refused:
            attempt()
        assert type(refused.value) is AttributeError
    assert label.text == "a"


def test_frozen_without_a_seal_stays_open_to_subclasses() -> None:
    sub = type("Sub", (Point,), {"__slots__": ()})
    point = sub(4)
    assert point.x == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 5
