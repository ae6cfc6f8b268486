"""Typed bindings: what the daemon is told about a host function, and how it is called.

A host callable becomes a :class:`Binding` when a run (or ``describe``) is submitted, or earlier
with :func:`binding`. Its declaration is derived from the callable:

* the JSON Schema of its arguments from its signature and type hints (see ``_schema`` for the
  supported hints), a parameter's default becoming the schema's ``default`` and the parameter
  optional; ``**kwargs: T`` allows further arguments of type ``T``; ``*args`` has no schema;
* its description from the docstring's prose, each argument's from a Google-style ``Args:``
  block, and the result's schema from the return annotation (``Returns:`` as its description).

A hint with no JSON Schema raises ``TypeError`` naming the function and the parameter when the
binding is made: pass ``parameters=`` / ``returns=`` to :func:`binding` to declare it yourself.

Compatibility: a callable with exactly one positional parameter and no annotation on it keeps the
untyped behaviour — it is declared by name only and receives the call's one JSON value. Any
other callable is typed: the program's arguments arrive by name, validated by the daemon, and are
passed as keywords (positional-only parameters positionally), objects for dataclass parameters
rebuilt as instances. A typed function's result may contain dataclass instances: they are sent
as JSON objects of their fields.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, Callable, Collection, Mapping, Optional, TypeVar, Union, get_type_hints, overload

from ._docstring import Docstring, parse_docstring
from ._schema import UnsupportedHint, decode, is_json, plain, schema_for

__all__ = ["Binding", "binding", "resolve"]

_F = TypeVar("_F", bound=Callable[..., Any])
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
Schema = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Binding:
    """A host function and its declaration. Calling it calls the function unchanged, so a
    function decorated with :func:`binding` stays usable in host code."""

    fn: Callable[..., Any]
    description: Optional[str] = None
    parameters: Optional[Schema] = None
    returns: Optional[Schema] = None
    by_name: bool = False
    signature: Optional[inspect.Signature] = dataclasses.field(default=None, repr=False, compare=False)
    hints: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def declaration(self, name: str) -> Union[str, dict[str, Any]]:
        """The ``functions`` entry of this binding under ``name``: the bare name when nothing is
        declared (the untyped form), else ``{"name", "description"?, "parameters"?, "returns"?}``."""
        entry: dict[str, Any] = {"name": name}
        for key in ("description", "parameters", "returns"):
            value = getattr(self, key)
            if value is not None:
                entry[key] = dict(value) if key != "description" else value
        return name if len(entry) == 1 else entry

    def arguments(self, args: Any) -> tuple[list[Any], dict[str, Any]]:
        """The positional and keyword arguments for a ``binding/call``'s ``args``."""
        if not self.by_name or self.signature is None:
            return [args], {}
        if not isinstance(args, dict):
            raise TypeError(f"{_label(self.fn)}: arguments arrived as {type(args).__name__}, not an object")
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        gap: Optional[str] = None
        named = [p for p in self.signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        for p in named:
            if p.name not in args:
                gap = gap or (p.name if p.kind is p.POSITIONAL_ONLY else None)
                continue
            value = decode(self.hints.get(p.name, Any), args[p.name])
            if p.kind is not p.POSITIONAL_ONLY:
                keywords[p.name] = value
            elif gap is None:
                positional.append(value)
            else:
                raise TypeError(f"{_label(self.fn)}: positional-only {p.name!r} given without {gap!r}")
        extra_hint = self.hints.get(_var_keyword(self.signature) or "", Any)
        names = {p.name for p in named}
        keywords.update((k, decode(extra_hint, v)) for k, v in args.items() if k not in names)
        return positional, keywords

    def result(self, value: Any) -> Any:
        """The function's value as JSON: dataclass instances become objects (typed only)."""
        return plain(value) if self.by_name else value


@overload
def binding(fn: Callable[..., Any], /) -> Binding: ...


@overload
def binding(
    fn: Callable[..., Any],
    /,
    *,
    parameters: Optional[Schema] = None,
    returns: Optional[Schema] = None,
    description: Optional[str] = None,
) -> Binding: ...


@overload
def binding(
    *,
    parameters: Optional[Schema] = None,
    returns: Optional[Schema] = None,
    description: Optional[str] = None,
) -> Callable[[Callable[..., Any]], Binding]: ...


def binding(
    fn: Optional[Callable[..., Any]] = None,
    /,
    *,
    parameters: Optional[Schema] = None,
    returns: Optional[Schema] = None,
    description: Optional[str] = None,
) -> Union[Binding, Callable[[Callable[..., Any]], Binding]]:
    """Declare a host function, deriving what is not given (see the module doc).

    ``parameters`` (an object schema), ``returns`` and ``description`` replace the derived
    ones; a given schema is not derived at all, so it also covers hints with no JSON Schema.
    Usable as ``binding(fn, …)``, ``@binding`` and ``@binding(description=…)``; applied to a
    :class:`Binding` it replaces the given parts. Raises ``TypeError`` for a hint with no
    schema (naming the function and parameter) and for overrides of the wrong type.
    """
    for key, schema in (("parameters", parameters), ("returns", returns)):
        if schema is not None and not isinstance(schema, Mapping):
            raise TypeError(f"{key} must be a JSON Schema object (a mapping), not {type(schema).__name__}")
    if description is not None and not isinstance(description, str):
        raise TypeError(f"description must be a str, not {type(description).__name__}")

    def make(f: Callable[..., Any]) -> Binding:
        if not callable(f):
            raise TypeError(f"a binding must be callable, not {type(f).__name__}")
        given: dict[str, Any] = {"parameters": parameters, "returns": returns, "description": description}
        overrides = {k: v for k, v in given.items() if v is not None}
        if isinstance(f, Binding):
            return dataclasses.replace(f, **overrides)
        return dataclasses.replace(_derive(f, skip=overrides.keys()), **overrides)

    return make if fn is None else make(fn)


def resolve(fn: Callable[..., Any]) -> Binding:
    """``fn`` as a :class:`Binding` (derived when it is a plain callable)."""
    return fn if isinstance(fn, Binding) else binding(fn)


def _derive(fn: Callable[..., Any], skip: Collection[str]) -> Binding:
    """The Binding derived from ``fn``'s signature, hints and docstring (``skip``: overridden)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have none: they can only be untyped
        return Binding(fn)
    params = list(sig.parameters.values())
    if len(params) == 1 and params[0].kind in _POSITIONAL and params[0].annotation is inspect.Parameter.empty:
        return Binding(fn)
    hints = _hints(fn)
    doc = parse_docstring(inspect.getdoc(_unwrapped(fn)))
    return Binding(
        fn,
        description=doc.description or None,
        parameters=None if "parameters" in skip else _parameters(fn, sig, hints, doc),
        returns=None if "returns" in skip else _returns(fn, hints, doc),
        by_name=True,
        signature=sig,
        hints=hints,
    )


def _parameters(fn: Callable[..., Any], sig: inspect.Signature, hints: Mapping[str, Any], doc: Docstring) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    extra: Any = False
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            raise TypeError(f"{_label(fn)}: *{p.name} cannot be declared; arguments travel by name")
        schema = _hint_schema(fn, p.name, hints.get(p.name, Any))
        if p.kind is p.VAR_KEYWORD:
            extra = schema
            continue
        if p.name in doc.params:
            schema["description"] = doc.params[p.name]
        if p.default is p.empty:
            required.append(p.name)
        elif is_json(p.default):
            schema["default"] = p.default
        properties[p.name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = extra
    return out


def _returns(fn: Callable[..., Any], hints: Mapping[str, Any], doc: Docstring) -> Optional[dict[str, Any]]:
    schema = _hint_schema(fn, "return", hints.get("return", Any))
    if doc.returns:
        schema["description"] = doc.returns
    return schema or None


def _hint_schema(fn: Callable[..., Any], where: str, hint: Any) -> dict[str, Any]:
    try:
        return dict(schema_for(hint))
    except UnsupportedHint as e:
        what = "the return annotation" if where == "return" else f"parameter {where!r}"
        raise TypeError(
            f"{_label(fn)}: {what} has no JSON Schema ({e}); use a supported hint or declare it with "
            "coderun.binding(fn, parameters=..., returns=...)"
        ) from None


def _unwrapped(fn: Callable[..., Any]) -> Callable[..., Any]:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The resolved hints of ``fn`` (a function, method, partial, class or callable object);
    string annotations (``from __future__ import annotations``) are evaluated in its module."""
    target: Any = _unwrapped(fn)
    if isinstance(target, type):
        target = getattr(target, "__init__")  # a class: its __init__ (mypy refuses the attribute)
    elif not (inspect.isfunction(target) or inspect.ismethod(target) or inspect.isbuiltin(target)):
        target = type(target).__call__
    try:
        return get_type_hints(target, include_extras=True)
    except Exception as e:  # noqa: BLE001 - NameError for a forward reference it cannot resolve, …
        raise TypeError(f"{_label(fn)}: cannot resolve its type hints: {e}") from None


def _label(fn: Callable[..., Any]) -> str:
    name = getattr(_unwrapped(fn), "__qualname__", None)
    return f"{name}()" if isinstance(name, str) else repr(fn)


def _var_keyword(sig: inspect.Signature) -> Optional[str]:
    return next((p.name for p in sig.parameters.values() if p.kind is p.VAR_KEYWORD), None)
