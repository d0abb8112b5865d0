"""Sealed values: instances that only their own module's constructors complete.

Some values are trusted for how they were made: a ``Result`` was sized by its
constructor, a ``FormInput`` passed the form profile, an ``InputResponse`` was read
once, an outcome came from ``finish``, ``fail`` or ``await_input``. A forgery —
``object.__new__``, ``dataclasses.replace``, a subclass overriding the checks, a copy
restored slot by slot — must never pass for one. One mechanism serves them all:

* ``Seal()`` is a module's private mark. ``@seal.mints`` declares a final class whose
  instances carry it, ``seal.stamp(value)`` is the last step of their constructors,
  and ``is_genuine(value)`` holds only for a value stamped by the seal of its own,
  exact class;
* ``Sealed`` is their base: immutable (``Frozen``), never subclassed outside the
  family its module declares (``TypeError`` with the class's ``_refusal``), copied as
  itself, pickled by rebuilding it through its constructor (``_rebuild``; an
  instance that is not genuine refuses), and without state accessors that would copy
  the mark (``__getstate__`` and ``__setstate__`` raise ``TypeError``).

The mark guards against accidents and ordinary APIs, not against code that sets
private slots with ``object.__setattr__`` on purpose.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import FrozenInstanceError
from typing import Any, ClassVar, TypeVar, final

__all__ = ["Frozen", "Seal", "Sealed", "is_genuine"]


class Frozen:
    """Base of immutable values whose constructors set their slots with ``object.__setattr__``.

    Assignment and deletion raise ``FrozenInstanceError`` naming the field, as a frozen
    dataclass does; a class that sets ``_immutable`` raises ``AttributeError`` with that
    message instead (``{type}`` is its class name).
    """

    __slots__ = ()

    _immutable: ClassVar[str | None] = None

    def __setattr__(self, name: str, value: object) -> None:
        raise self._refuse(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise self._refuse(f"cannot delete field {name!r}")

    def _refuse(self, message: str) -> AttributeError:
        if self._immutable is None:
            return FrozenInstanceError(message)
        return AttributeError(self._immutable.format(type=type(self).__name__))


class Sealed(Frozen):
    """Base of values only their own constructors complete (see the module docstring).

    A class deriving from ``Sealed`` directly starts a family; its module may add
    members (single inheritance, same module) until ``Seal.mints`` closes them. Every
    other subclass raises ``TypeError(_refusal)``, ``{name}`` being the subclass's name.
    Subclasses implement ``_rebuild``: how pickling calls the constructor again.
    """

    __slots__ = ("_seal",)

    _refusal: ClassVar[str] = "{name}: sealed values cannot be subclassed"
    _closed: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__bases__:
            if base is Sealed or not issubclass(base, Sealed):
                continue
            if base._closed or base.__module__ != cls.__module__ or len(cls.__bases__) > 1:
                raise TypeError(base._refusal.format(name=cls.__name__))
        # In the class's own namespace, so ``dataclass(slots=True)`` adds no state
        # accessors of its own (it adds them only where the class defines none).
        cls.__getstate__ = Sealed.__getstate__  # type: ignore[method-assign]
        cls.__setstate__ = Sealed.__setstate__  # type: ignore[method-assign]

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Any:
        return self

    def __getstate__(self) -> Any:
        raise TypeError(f"{type(self).__name__} has no state to copy; construct a new one")

    def __setstate__(self, state: object) -> None:
        raise TypeError(f"{type(self).__name__} can only be built by its constructor")

    def __reduce__(self) -> tuple[Any, ...]:
        if not is_genuine(self):
            raise TypeError(f"an unconstructed {type(self).__name__} cannot be copied")
        return self._rebuild()

    def _rebuild(self) -> tuple[Callable[..., object], tuple[object, ...]]:
        """A callable and its arguments that construct this value again."""
        raise NotImplementedError  # pragma: no cover - every sealed class has one


_S = TypeVar("_S", bound=type[Sealed])


@final
class Seal:
    """One module's private mark of the values its constructors completed."""

    __slots__ = ("_kinds",)

    _kinds: frozenset[type[Sealed]]

    def __init__(self) -> None:
        self._kinds = frozenset()

    def __repr__(self) -> str:
        names = ", ".join(sorted(kind.__name__ for kind in self._kinds))
        return f"Seal({names})"

    def mints(self, cls: _S) -> _S:
        """Class decorator: ``cls`` is final and its constructors stamp this seal.

        Put it above ``@dataclass``, which replaces the class it decorates.
        """
        if not issubclass(cls, Sealed) or cls._closed:
            raise TypeError(f"{cls.__name__} is not an open sealed class")
        cls._closed = True
        self._kinds = self._kinds | {cls}
        return cls

    def stamp(self, value: Sealed) -> None:
        """Mark ``value`` as complete: the last step of its constructor."""
        object.__setattr__(value, "_seal", self)


def is_genuine(value: object) -> bool:
    """Whether ``value`` was completed by a constructor of its own class (never a forgery)."""
    seal = getattr(value, "_seal", None)
    return type(seal) is Seal and type(value) in seal._kinds
