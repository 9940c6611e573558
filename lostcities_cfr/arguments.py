"""Constructor arguments with their ranges in their types, checked the same way from a config
and from Python.

A constructor states what it accepts in its annotations: jsonargparse's restricted numbers
(``PositiveInt``, ``NonNegativeInt``, ``PositiveFloat``, ``NonNegativeFloat``,
``ClosedUnitInterval``, ``OpenUnitInterval``, and the two half-open intervals below) and
``Literal[...]``. LightningCLI reads them, so ``--help`` and ``--print_config`` show each
range and a bad value in a config fails while it is parsed, with the field named, before
anything is built.

jsonargparse checks nothing when a class is called directly (a notebook, a test), so a
constructor that takes such arguments is decorated with :func:`checked`, which applies the
same types (their own validation, jsonargparse's) to the values it is called with: a bad
value raises one :class:`~lostcities_cfr.errors.ConfigError` naming the class, the field
and the range. Checked values reach the constructor as plain ``int``/``float`` (a value
parsed by jsonargparse is an instance of the restricted type), so hyperparameters and
checkpoints hold plain data. Checks that relate two arguments stay in the constructor.
"""

from __future__ import annotations

import functools
import inspect
import operator
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from jsonargparse.typing import (
    ClosedUnitInterval,
    NonNegativeFloat,
    NonNegativeInt,
    OpenUnitInterval,
    PositiveFloat,
    PositiveInt,
    restricted_number_type,
)

from lostcities_cfr.errors import ConfigError

__all__ = [
    "ClosedUnitInterval",
    "LeftOpenUnitInterval",
    "NonNegativeFloat",
    "NonNegativeInt",
    "OpenUnitInterval",
    "PositiveFloat",
    "PositiveInt",
    "RightOpenUnitInterval",
    "checked",
]

LeftOpenUnitInterval = restricted_number_type(
    "LeftOpenUnitInterval", float, [(">", 0), ("<=", 1)], docstring="float in (0, 1]"
)
RightOpenUnitInterval = restricted_number_type(
    "RightOpenUnitInterval", float, [(">=", 0), ("<", 1)], docstring="float in [0, 1)"
)

Init = TypeVar("Init", bound=Callable[..., None])
_SYMBOLS = {operator.gt: ">", operator.ge: ">=", operator.lt: "<", operator.le: "<="}


def checked(init: Init) -> Init:
    """Decorate an ``__init__``: its arguments are checked against their annotated types.

    An argument is checked when its annotation is a restricted number type or a ``Literal``,
    optionally ``| None`` or inside a ``Sequence[...]``; other annotations are left to the
    constructor. ``inspect.signature`` and jsonargparse see the undecorated signature.
    """
    signature = inspect.signature(init)

    @functools.wraps(init)
    def checked_init(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        owner = type(self).__name__
        for name, value in list(bound.arguments.items())[1:]:
            annotation = _hints(init).get(name)
            if annotation is not None:
                bound.arguments[name] = _checked(owner, name, value, annotation)
        init(*bound.args, **bound.kwargs)

    return typing.cast(Init, checked_init)


@functools.cache
def _hints(function: Callable[..., Any]) -> dict[str, Any]:
    # Resolved at the first call, once every name the annotations use is defined.
    return typing.get_type_hints(function)


def _checked(owner: str, name: str, value: Any, annotation: Any) -> Any:
    """``value`` as its plain type where ``annotation`` constrains it; ConfigError if out of
    range, naming ``owner`` and ``name``."""
    allowed = get_args(annotation) if _is_union(annotation) else (annotation,)
    if value is None and type(None) in allowed:
        return None
    constraint = [a for a in allowed if a is not type(None)]
    if len(constraint) != 1:
        return value
    kind = constraint[0]
    if _is_restricted(kind):
        try:
            return kind._type(kind(value))
        except (TypeError, ValueError):
            raise ConfigError(
                f"{owner} {name}={value!r}; expected {_describe(kind, allowed)}"
            ) from None
    if get_origin(kind) is Literal:
        if value not in get_args(kind):
            raise ConfigError(f"{owner} {name}={value!r}; expected {_describe(kind, allowed)}")
        return value
    if get_origin(kind) in (Sequence, list, tuple) and not isinstance(value, str | bytes):
        items = [a for a in get_args(kind) if a is not Ellipsis]
        if len(items) == 1 and (_is_restricted(items[0]) or get_origin(items[0]) is Literal):
            checked_items = [
                _checked(owner, f"{name}[{i}]", item, items[0]) for i, item in enumerate(value)
            ]
            return type(value)(checked_items) if isinstance(value, list | tuple) else checked_items
    return value


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _is_restricted(annotation: Any) -> bool:
    return isinstance(annotation, type) and hasattr(annotation, "_restrictions")


def _describe(kind: Any, allowed: tuple[Any, ...]) -> str:
    """``an int > 0``, ``a float >= 0 and <= 1``, ``one of ['eager', 'compiled']``..."""
    if get_origin(kind) is Literal:
        text = f"one of {list(get_args(kind))}"
    else:
        number = "an int" if kind._type is int else "a number"
        bounds = " and ".join(f"{_SYMBOLS[op]} {ref}" for op, ref in kind._restrictions)
        text = f"{number} {bounds}"
    return f"{text}, or None" if type(None) in allowed else text
