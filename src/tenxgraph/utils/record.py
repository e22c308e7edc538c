"""`Record` and `FrozenRecord`: the repr and equality of a dataclass for a plain class with
`__slots__` and its own `__init__`.

A dataclass writes its methods as source and compiles them when the class is defined, which
costs about as much as the rest of a small module; the classes on `import tenxgraph`'s path
use these bases instead. Fields are the subclass's `__match_args__` (as a dataclass sets
them: its fields in order), which are also its `__slots__`.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import Any, ClassVar


class Record:
    """A mutable record: `repr` and `==` over its slots (unhashable, like a dataclass)."""

    __slots__: tuple[str, ...] = ()
    __match_args__: ClassVar[tuple[str, ...]] = ()
    __hash__: ClassVar[None]  # type: ignore[assignment]

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in type(self).__match_args__)

    def __repr__(self) -> str:
        names = type(self).__match_args__
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()


class FrozenRecord(Record):
    """An immutable record: assigning a field raises `FrozenInstanceError`; hashable.
    `__init__` sets the fields with `object.__setattr__`."""

    __slots__: tuple[str, ...] = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._values())

    def __getstate__(self) -> tuple[Any, ...]:
        return self._values()

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(type(self).__match_args__, state, strict=True):
            object.__setattr__(self, name, value)


__all__ = ["FrozenRecord", "Record"]
