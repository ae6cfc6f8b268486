"""Python type hints as JSON Schema 2020-12, and back (I/O-free).

:func:`schema_for` turns a hint into the schema the daemon validates with; :func:`decode` turns
the validated JSON back into the hinted Python value (dataclasses are built from their objects);
:func:`plain` turns a host's result into JSON values (dataclass instances become objects).

Supported hints: ``str int float bool None``, ``list[T]``, ``dict[str, T]``, ``Literal[...]``
(of str, int, bool, None), ``Optional[T]`` and ``X | Y``, ``TypedDict`` and dataclasses (their
fields, nested), ``Annotated[T, ...]`` (as ``T``); ``Any``, ``object`` and a missing hint mean no
constraint (``{}``). Anything else raises :class:`UnsupportedHint`: a binding whose schema would
silently accept everything is worse than one that fails where it is declared.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

from . import _json

__all__ = ["UnsupportedHint", "schema_for", "decode", "plain", "is_json", "field_hints"]

_NONE = type(None)
_SCALARS: dict[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string", _NONE: "null"}
_WRAPPERS = {w for w in (getattr(typing, "Required", None), getattr(typing, "NotRequired", None)) if w is not None}
_UNIONS = (Union, types.UnionType)


class UnsupportedHint(TypeError):
    """A hint with no JSON Schema; the message names the hint (and the field it sits in)."""


def _strip(hint: Any) -> Any:
    """``Annotated[T, ...]``, ``Required[T]``, ``NotRequired[T]`` → ``T``."""
    while True:
        origin = get_origin(hint)
        if origin is typing.Annotated or origin in _WRAPPERS:
            hint = get_args(hint)[0]
        else:
            return hint


def _is_dataclass_type(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _name(hint: Any) -> str:
    return hint.__qualname__ if isinstance(hint, type) else repr(hint)


def field_hints(cls: type) -> dict[str, Any]:
    """The resolved hints of a TypedDict's keys or a dataclass's ``__init__`` fields."""
    try:
        hints = get_type_hints(cls, include_extras=True)
    except Exception as e:  # noqa: BLE001 - NameError for an unresolvable forward reference, …
        raise UnsupportedHint(f"cannot resolve the type hints of {_name(cls)}: {e}") from None
    if is_typeddict(cls):
        return hints
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls) if f.init}


def is_json(value: Any) -> bool:
    """Whether ``value`` can be a schema's ``default``: lossless JSON."""
    try:
        _json.encode(value)
    except (ValueError, RecursionError):
        return False
    return True


def schema_for(hint: Any) -> dict[str, Any]:
    """The JSON Schema of ``hint``; raises :class:`UnsupportedHint`."""
    return _schema(hint, ())


def _schema(hint: Any, seen: tuple[type, ...]) -> dict[str, Any]:
    hint = _strip(hint)
    if hint is Any or hint is object or hint is inspect.Parameter.empty:
        return {}
    if hint is None:
        hint = _NONE
    if isinstance(hint, type) and hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        return _literal(args)
    if origin in _UNIONS:
        members = [_schema(a, seen) for a in args]
        return {} if {} in members else {"anyOf": members}
    if hint is list or origin is list:
        return {"type": "array", **({"items": _schema(args[0], seen)} if args else {})}
    if hint is dict or origin is dict:
        if args and _strip(args[0]) is not str:
            raise UnsupportedHint(f"{hint!r}: JSON object keys are strings, so the key type must be str")
        return {"type": "object", **({"additionalProperties": _schema(args[1], seen)} if args else {})}
    if is_typeddict(hint) or _is_dataclass_type(hint):
        if hint in seen:
            raise UnsupportedHint(f"{_name(hint)} refers to itself; recursive types have no derived schema")
        return _object(hint, (*seen, hint))
    raise UnsupportedHint(f"{_name(hint)} has no JSON Schema")


def _literal(values: tuple[Any, ...]) -> dict[str, Any]:
    for v in values:
        if v is not None and not isinstance(v, (str, int, bool)):
            raise UnsupportedHint(f"Literal value {v!r} is not a JSON string, number, boolean or null")
    if all(isinstance(v, str) for v in values):
        return {"type": "string", "enum": list(values)}
    return {"enum": list(values)}


def _object(cls: type, seen: tuple[type, ...]) -> dict[str, Any]:
    """A TypedDict or dataclass as a closed object schema titled with the class name."""
    properties: dict[str, Any] = {}
    for key, hint in field_hints(cls).items():
        try:
            properties[key] = _schema(hint, seen)
        except UnsupportedHint as e:
            raise UnsupportedHint(f"{_name(cls)}.{key}: {e}") from None
    for key, default in _json_defaults(cls).items():
        properties[key]["default"] = default
    required = _required(cls)
    schema: dict[str, Any] = {"type": "object", "title": cls.__name__, "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _required(cls: type) -> list[str]:
    """The keys a TypedDict requires, or the ``__init__`` fields of a dataclass without a default."""
    if is_typeddict(cls):
        keys: frozenset[str] = cls.__required_keys__  # type: ignore[attr-defined]
        return [k for k, hint in field_hints(cls).items() if _marked_required(hint, k in keys)]
    return [
        f.name
        for f in dataclasses.fields(cls)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]


def _marked_required(hint: Any, otherwise: bool) -> bool:
    """A TypedDict key's ``Required`` / ``NotRequired`` marker, else ``otherwise``: under
    ``from __future__ import annotations`` the class cannot see the markers in its string
    annotations, so ``__required_keys__`` alone would be wrong."""
    while get_origin(hint) is typing.Annotated:
        hint = get_args(hint)[0]
    origin = get_origin(hint)
    if origin is not None and origin is getattr(typing, "Required", None):
        return True
    if origin is not None and origin is getattr(typing, "NotRequired", None):
        return False
    return otherwise


def _json_defaults(cls: type) -> dict[str, Any]:
    """The defaults of a dataclass's ``__init__`` fields that are JSON (none for a TypedDict)."""
    if is_typeddict(cls):
        return {}
    return {
        f.name: f.default
        for f in dataclasses.fields(cls)
        if f.init and f.default is not dataclasses.MISSING and is_json(f.default)
    }


def decode(hint: Any, value: Any) -> Any:
    """``value`` (JSON the daemon validated against ``schema_for(hint)``) as the hinted Python
    value: objects for dataclasses become instances, inside lists, dicts, TypedDicts and
    unions too; everything else is returned as it is."""
    hint = _strip(hint)
    origin, args = get_origin(hint), get_args(hint)
    if _is_dataclass_type(hint) and isinstance(value, dict):
        hints = field_hints(hint)
        return hint(**{k: decode(hints.get(k, Any), v) for k, v in value.items()})
    if is_typeddict(hint) and isinstance(value, dict):
        hints = field_hints(hint)
        return {k: decode(hints.get(k, Any), v) for k, v in value.items()}
    if origin is list and args and isinstance(value, list):
        return [decode(args[0], v) for v in value]
    if origin is dict and len(args) == 2 and isinstance(value, dict):
        return {k: decode(args[1], v) for k, v in value.items()}
    if origin in _UNIONS:
        for member in args:
            if _accepts(member, value):
                return decode(member, value)
    return value


def _accepts(hint: Any, value: Any) -> bool:
    """Whether ``value`` has the JSON shape of ``hint`` (picks the member of a union)."""
    hint = _strip(hint)
    origin = get_origin(hint)
    if hint is None or hint is _NONE:
        return value is None
    if isinstance(hint, type) and hint in _SCALARS:
        if hint is float:
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        return isinstance(value, hint) and (hint is bool or not isinstance(value, bool))
    if origin is Literal:
        return value in get_args(hint)
    if hint is list or origin is list:
        return isinstance(value, list)
    if _is_dataclass_type(hint) or is_typeddict(hint):
        return isinstance(value, dict) and _fits_fields(hint, value)
    if hint is dict or origin is dict:
        return isinstance(value, dict)
    if origin in _UNIONS:
        return any(_accepts(m, value) for m in get_args(hint))
    return True


def _fits_fields(cls: type, value: dict[str, Any]) -> bool:
    return value.keys() <= field_hints(cls).keys() and set(_required(cls)) <= value.keys()


def plain(value: Any) -> Any:
    """``value`` with every dataclass instance in it turned into an object of its fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
