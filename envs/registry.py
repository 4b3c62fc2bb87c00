"""One registry helper for scorers, decoders, policies and datasets.

Why: a registry is a dict, a decorator and a getter (verl's ``core_algos`` pattern), with one rule
for duplicates: registering the *same* object under a name again is a no-op, while a *different*
object claiming a taken name raises, so two plugins can never overwrite each other silently.
Names may be restricted to an enum's values (a ``StrEnum``) to avoid spelling errors, and an
unknown name raises :class:`UnknownNameError` listing the known ones.

    DECODERS: Registry[type[VideoDecoder]] = Registry("video decoder")

    @DECODERS.register("pyav")
    class PyAVDecoder: ...

    DECODERS["pyav"]          # the class; DECODERS["x"] raises UnknownNameError
    "pyav" in DECODERS, list(DECODERS), DECODERS.names()
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from enum import Enum
from typing import Generic, TypeVar

__all__ = ["DuplicateNameError", "Registry", "UnknownNameError"]

T = TypeVar("T")


class UnknownNameError(KeyError, ValueError):
    """A name nobody registered. A ``KeyError`` and, for callers that caught it before, a ``ValueError``."""

    def __str__(self) -> str:  # KeyError would show the message quoted
        return str(self.args[0]) if self.args else ""


class DuplicateNameError(ValueError):
    """A different object claimed a name that is already registered."""


class Registry(Mapping[str, T], Generic[T]):
    """Name -> object, filled by :meth:`register`; read like a dict (``reg[name]``, ``in``, iteration).

    ``kind`` names what is registered, for error messages; ``names`` (an enum) restricts the names
    that may be registered to its values.
    """

    def __init__(self, kind: str, names: type[Enum] | None = None) -> None:
        self.kind = kind
        self.allowed = names
        self._entries: dict[str, T] = {}

    def _key(self, name: str | Enum) -> str:
        key = str(name.value) if isinstance(name, Enum) else str(name)
        if self.allowed is not None and key not in {str(m.value) for m in self.allowed}:
            known = ", ".join(str(m.value) for m in self.allowed)
            raise UnknownNameError(f"{key!r} is not a {self.kind} name of {self.allowed.__name__} ({known})")
        return key

    def add(self, name: str | Enum, obj: T) -> T:
        """Register ``obj`` under ``name``; the same object again is a no-op, another one raises."""
        key = self._key(name)
        held = self._entries.get(key)
        if held is not None and held is not obj:
            raise DuplicateNameError(f"{self.kind} {key!r} is already registered to {held!r}, not {obj!r}")
        self._entries[key] = obj
        return obj

    def register(self, name: str | Enum) -> Callable[[T], T]:
        """Decorator form of :meth:`add`; returns the object unchanged."""

        def decorate(obj: T) -> T:
            return self.add(name, obj)

        return decorate

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._entries)

    def __getitem__(self, name: str | Enum) -> T:
        key = str(name.value) if isinstance(name, Enum) else str(name)
        try:
            return self._entries[key]
        except KeyError:
            known = ", ".join(self.names()) or "none registered"
            raise UnknownNameError(f"unknown {self.kind} {key!r}; known: {known}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"
