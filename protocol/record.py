"""Plain value classes for the modules a command line loads on every call.

Owns ``record``: a class decorator that gives a class of annotated fields
an ``__init__`` (positional or keyword, class-level defaults), ``__repr__``,
``__eq__``, ``__hash__`` and, with ``frozen=True``, immutability; the
subset of ``dataclasses`` the store's rows, ``Paths`` and the bundle's
reports use. ``dataclasses`` itself costs about 15 ms of every
``status --json`` (its import pulls in ``inspect``, and each class runs
its machinery at import time), a fifth of the command; this costs well
under a millisecond for all of them. Defaults are plain values (no
factories): a field's default must be immutable. Imports nothing from the
package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")


class FrozenInstanceError(AttributeError):
    """An assignment to a field of a frozen record."""


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _init_source(names: tuple[str, ...], defaults: dict[str, Any], frozen: bool) -> str:
    params = ", ".join(f"{n}=_d_{n}" if n in defaults else n for n in names)
    assign = "_set(self, {0!r}, {0})" if frozen else "self.{0} = {0}"
    body = "\n".join(f"    {assign.format(n)}" for n in names) or "    pass"
    return f"def __init__(self, {params}):\n{body}\n" if names else \
        f"def __init__(self):\n{body}\n"


def _build(cls: type[T], frozen: bool) -> type[T]:
    # Not inspect.get_annotations: importing inspect is the cost this module avoids.
    names = tuple(cls.__dict__.get("__annotations__", {}))  # noqa: RUF063
    defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
    seen_default = False
    for name in names:
        if name in defaults:
            seen_default = True
        elif seen_default:
            raise TypeError(f"{cls.__name__}: field {name!r} without a default follows one"
                            " with a default")
    scope: dict[str, Any] = {f"_d_{n}": v for n, v in defaults.items()}
    scope["_set"] = object.__setattr__
    exec(_init_source(names, defaults, frozen), scope)  # one small function per class
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"

    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"{type(self).__qualname__}({inner})"

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in names)

    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, n) for n in names))

    methods: dict[str, Any] = {"__init__": init, "__repr__": __repr__, "__eq__": __eq__,
                               "__match_args__": names, "__record_fields__": names}
    if frozen:
        methods.update(__hash__=__hash__, __setattr__=_frozen_setattr,
                       __delattr__=_frozen_delattr)
    else:
        methods["__hash__"] = None  # mutable and compared by value
    for name, value in methods.items():
        setattr(cls, name, value)
    return cls


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, frozen: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform()
def record(cls: type[T] | None = None, /, *,
           frozen: bool = False) -> type[T] | Callable[[type[T]], type[T]]:
    """``@record`` or ``@record(frozen=True)`` on a class of annotated fields."""
    if cls is not None:
        return _build(cls, frozen)
    return lambda c: _build(c, frozen)

