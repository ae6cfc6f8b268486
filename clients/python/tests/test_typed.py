"""Deriving a binding's declaration from the callable, and calling it by name (no daemon).

This module uses ``from __future__ import annotations``, so every hint below is a string the
derivation must resolve; :func:`test_evaluated_annotations` covers hints that are objects.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from typing import Annotated, Any, Literal, Optional, TypedDict, Union

import pytest

from coderun import Binding, binding
from coderun._docstring import parse_docstring
from coderun.typed import resolve


def params(fn: Any) -> Any:
    b = resolve(fn)
    assert b.by_name
    return b.parameters


def prop(fn: Any, name: str) -> Any:
    return params(fn)["properties"][name]


# --------------------------------------------------------------------------- hint kinds


def scalars(s: str, i: int, f: float, b: bool, n: None) -> None: ...


def containers(xs: list[int], m: dict[str, float], bare_list: list, bare_dict: dict, nested: list[dict[str, list[str]]]) -> None: ...  # type: ignore[type-arg]


def unions(a: Optional[str], b: int | str, c: Union[int, None, bool], d: int | Any) -> None: ...


def literals(mode: Literal["fast", "deep"], level: Literal[1, 2, True, None]) -> None: ...


def anything(a: Any, b: object, c, d: Annotated[int, "meta"]) -> None: ...  # type: ignore[no-untyped-def]


def test_scalars() -> None:
    assert params(scalars) == {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "f": {"type": "number"},
            "b": {"type": "boolean"},
            "n": {"type": "null"},
        },
        "required": ["s", "i", "f", "b", "n"],
        "additionalProperties": False,
    }


def test_containers() -> None:
    assert prop(containers, "xs") == {"type": "array", "items": {"type": "integer"}}
    assert prop(containers, "m") == {"type": "object", "additionalProperties": {"type": "number"}}
    assert prop(containers, "bare_list") == {"type": "array"}
    assert prop(containers, "bare_dict") == {"type": "object"}
    assert prop(containers, "nested") == {
        "type": "array",
        "items": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
    }


def test_unions_and_optional() -> None:
    assert prop(unions, "a") == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert prop(unions, "b") == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert prop(unions, "c") == {"anyOf": [{"type": "integer"}, {"type": "null"}, {"type": "boolean"}]}
    assert prop(unions, "d") == {}, "a union with Any constrains nothing"


def test_literals() -> None:
    assert prop(literals, "mode") == {"type": "string", "enum": ["fast", "deep"]}
    assert prop(literals, "level") == {"enum": [1, 2, True, None]}


def test_any_object_missing_and_annotated() -> None:
    p = params(anything)
    assert p["properties"] == {"a": {}, "b": {}, "c": {}, "d": {"type": "integer"}}
    assert p["required"] == ["a", "b", "c", "d"]


def test_evaluated_annotations() -> None:
    def f(x, y=2):  # type: ignore[no-untyped-def]
        return x

    f.__annotations__ = {"x": list[int], "y": int, "return": Optional[str]}
    b = resolve(f)
    assert b.parameters == {
        "type": "object",
        "properties": {"x": {"type": "array", "items": {"type": "integer"}}, "y": {"type": "integer", "default": 2}},
        "required": ["x"],
        "additionalProperties": False,
    }
    assert b.returns == {"anyOf": [{"type": "string"}, {"type": "null"}]}


# --------------------------------------------------------------------------- TypedDict and dataclass


class Point(TypedDict):
    x: float
    y: float


class Box(TypedDict, total=False):
    corner: Point
    label: str


@dataclasses.dataclass
class Tag:
    name: str
    weight: float = 1.0
    aliases: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Doc:
    title: str
    tags: list[Tag]
    origin: Optional[Point] = None
    cached: bool = dataclasses.field(default=False, init=False)


def shapes(box: Box, doc: Doc) -> Doc:
    return doc


POINT = {
    "type": "object",
    "title": "Point",
    "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
    "required": ["x", "y"],
    "additionalProperties": False,
}
TAG = {
    "type": "object",
    "title": "Tag",
    "properties": {
        "name": {"type": "string"},
        "weight": {"type": "number", "default": 1.0},
        "aliases": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name"],
    "additionalProperties": False,
}
DOC = {
    "type": "object",
    "title": "Doc",
    "properties": {
        "title": {"type": "string"},
        "tags": {"type": "array", "items": TAG},
        "origin": {"anyOf": [POINT, {"type": "null"}], "default": None},
    },
    "required": ["title", "tags"],
    "additionalProperties": False,
}


if sys.version_info >= (3, 11):
    from typing import NotRequired, Required


class Mixed(TypedDict, total=False):
    must: Required[Annotated[int, "meta"]]
    may: str


class Opt(TypedDict):
    need: str
    skip: NotRequired[list[int]]


def mixed(m: Mixed, o: Opt) -> None: ...


@pytest.mark.skipif(sys.version_info < (3, 11), reason="typing.NotRequired is 3.11+")
def test_typeddict_required_and_not_required_keys() -> None:
    b = resolve(mixed)
    assert b.parameters is not None
    m, o = b.parameters["properties"]["m"], b.parameters["properties"]["o"]
    assert m["properties"] == {"must": {"type": "integer"}, "may": {"type": "string"}} and m["required"] == ["must"]
    assert o["properties"]["skip"] == {"type": "array", "items": {"type": "integer"}} and o["required"] == ["need"]


def test_nested_typeddict() -> None:
    assert prop(shapes, "box") == {
        "type": "object",
        "title": "Box",
        "properties": {"corner": POINT, "label": {"type": "string"}},
        "additionalProperties": False,
    }


def test_nested_dataclass_and_returns() -> None:
    assert prop(shapes, "doc") == DOC, "init=False fields are not arguments"
    assert resolve(shapes).returns == DOC


def test_dataclass_arguments_are_rebuilt_and_results_flattened() -> None:
    b = resolve(shapes)
    wire = {"title": "t", "tags": [{"name": "a"}, {"name": "b", "weight": 2}], "origin": {"x": 1, "y": 2}}
    positional, keywords = b.arguments({"box": {"corner": {"x": 0, "y": 0}}, "doc": wire})
    assert positional == []
    assert keywords["box"] == {"corner": {"x": 0, "y": 0}}
    doc = keywords["doc"]
    assert doc == Doc("t", [Tag("a"), Tag("b", 2)], {"x": 1, "y": 2})
    assert b.result(doc) == {**wire, "tags": [{"name": "a", "weight": 1.0, "aliases": []}, {"name": "b", "weight": 2, "aliases": []}], "cached": False}


@dataclasses.dataclass
class Circle:
    r: float


@dataclasses.dataclass
class Rect:
    w: float
    h: float


def area(shape: Circle | Rect | None, shapes: dict[str, Rect]) -> float:
    return 0.0


def test_union_of_dataclasses_picks_the_matching_member() -> None:
    b = resolve(area)
    _, kw = b.arguments({"shape": {"w": 1, "h": 2}, "shapes": {"a": {"w": 3, "h": 4}}})
    assert kw == {"shape": Rect(1, 2), "shapes": {"a": Rect(3, 4)}}
    assert b.arguments({"shape": {"r": 1}, "shapes": {}})[1]["shape"] == Circle(1)
    assert b.arguments({"shape": None, "shapes": {}})[1]["shape"] is None


class Tree(TypedDict):
    children: list[Tree]


def recursive(t: Tree) -> None: ...


def test_recursive_type_is_refused_at_registration() -> None:
    with pytest.raises(TypeError, match=r"recursive\(\): parameter 't'.*Tree refers to itself"):
        binding(recursive)


# --------------------------------------------------------------------------- defaults, docstrings, signatures


def search(query: str, limit: int = 10, *, mode: Literal["fast", "deep"] = "fast", since: Optional[Tag] = None, sink: object = object()) -> list[str]:
    """Search the corpus.

    Matches whole words only.

    Args:
        query: What to look for.
        limit (int): At most this many
            hits.
        mode: How hard to look.
        unknown: Not a parameter; ignored.

    Returns:
        Document ids, best first.

    Raises:
        LookupError: never shown to the model.
    """
    return []


def test_defaults_and_docstring() -> None:
    b = resolve(search)
    assert b.description == "Search the corpus.\n\nMatches whole words only."
    assert b.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "description": "At most this many hits.", "default": 10},
            "mode": {"type": "string", "enum": ["fast", "deep"], "description": "How hard to look.", "default": "fast"},
            "since": {**TAG_OR_NULL, "default": None},
            "sink": {},
        },
        "required": ["query"],
        "additionalProperties": False,
    }, "a default that is not JSON is left out, the parameter stays optional"
    assert b.returns == {"type": "array", "items": {"type": "string"}, "description": "Document ids, best first."}


TAG_OR_NULL = {"anyOf": [TAG, {"type": "null"}]}


def test_docstring_parser() -> None:
    doc = parse_docstring("Summary.\n\nArguments:\n    *names: Several.\n    **kw: More\n      and more.\nReturns:\n    x\nTrailing prose.")
    assert doc.description == "Summary.\n\nTrailing prose."
    assert doc.params == {"names": "Several.", "kw": "More and more."}
    assert doc.returns == "x"
    assert parse_docstring(None).description == ""


def no_args() -> str:
    return "now"


def kwargs_only(**extra: int) -> None: ...


def positional_only(a: int, b: int = 0, /, c: int = 0) -> list[int]:
    return [a, b, c]


def test_signature_shapes() -> None:
    assert params(no_args) == {"type": "object", "properties": {}, "additionalProperties": False}
    assert resolve(no_args).arguments({}) == ([], {})
    assert params(kwargs_only) == {"type": "object", "properties": {}, "additionalProperties": {"type": "integer"}}
    assert resolve(kwargs_only).arguments({"a": 1, "b-c": 2, "extra": 3}) == ([], {"a": 1, "b-c": 2, "extra": 3})
    b = resolve(positional_only)
    assert b.arguments({"a": 1, "c": 3}) == ([1], {"c": 3})
    assert b.arguments({"a": 1, "b": 2}) == ([1, 2], {})
    with pytest.raises(TypeError, match="positional-only 'b' given without 'a'"):
        b.arguments({"b": 2})


def test_bound_method_partial_and_callable_object() -> None:
    class Store:
        def get(self, key: str) -> int:
            """Read a key."""
            return 1

        def __call__(self, key: str, n: int) -> int:
            return n

    store = Store()
    assert params(store.get)["properties"] == {"key": {"type": "string"}}
    assert resolve(store.get).description == "Read a key."
    assert params(store)["required"] == ["key", "n"]
    part = functools.partial(positional_only, 1)
    assert list(params(part)["properties"]) == ["b", "c"]


def variadic(*items: int) -> None: ...


class Opaque:
    pass


def opaque(when: Opaque) -> None: ...


def bad_keys(m: dict[int, str]) -> None: ...


def bad_return() -> set[int]:
    return set()


def test_unsupported_hints_name_the_function_and_parameter() -> None:
    with pytest.raises(TypeError, match=r"opaque\(\): parameter 'when' has no JSON Schema \(Opaque has no JSON Schema\)"):
        binding(opaque)
    with pytest.raises(TypeError, match=r"bad_keys\(\): parameter 'm'.*key type must be str"):
        binding(bad_keys)
    with pytest.raises(TypeError, match=r"bad_return\(\): the return annotation has no JSON Schema"):
        binding(bad_return)
    with pytest.raises(TypeError, match=r"variadic\(\): \*items cannot be declared"):
        binding(variadic)


def test_unresolvable_forward_reference_is_an_error() -> None:
    def f(x: NotDefinedAnywhere) -> None: ...  # type: ignore[name-defined] # noqa: F821

    with pytest.raises(TypeError, match=r"f\(\): cannot resolve its type hints.*NotDefinedAnywhere"):
        binding(f)


# --------------------------------------------------------------------------- overrides and compatibility


def test_overrides_replace_what_is_derived() -> None:
    schema = {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}}
    b = binding(opaque, parameters=schema, returns={"type": "null"}, description="Opaque.")
    assert (b.parameters, b.returns, b.description, b.by_name) == (schema, {"type": "null"}, "Opaque.", True)
    assert b.declaration("o") == {"name": "o", "description": "Opaque.", "parameters": schema, "returns": {"type": "null"}}
    again = binding(b, description="Again.")
    assert again.description == "Again." and again.parameters == schema


def test_decorator_forms_keep_the_function_callable() -> None:
    @binding
    def double(n: int) -> int:
        return n * 2

    @binding(description="Triple it.")
    def triple(n: int) -> int:
        return n * 3

    assert isinstance(double, Binding) and double(4) == 8
    assert triple.description == "Triple it." and triple(2) == 6
    assert resolve(double) is double


def test_override_types_are_checked() -> None:
    with pytest.raises(TypeError, match="parameters must be a JSON Schema object"):
        binding(no_args, parameters="object")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="description must be a str"):
        binding(no_args, description=1)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="must be callable"):
        binding(1)  # type: ignore[call-overload]


def test_one_unannotated_positional_parameter_stays_untyped() -> None:
    def legacy(args):  # type: ignore[no-untyped-def]
        return args

    for fn in (legacy, lambda a: a, lambda a=None: a, len):
        b = resolve(fn)
        assert not b.by_name and b.declaration("f") == "f"
        assert b.arguments({"x": 1}) == ([{"x": 1}], {}), "the call's one value, unchanged"
        assert b.result(Tag("t")) == Tag("t"), "no conversion: untyped results are as before"


def test_anything_else_is_typed() -> None:
    def annotated(args: Any) -> Any:
        return args

    def keyword_only(*, args):  # type: ignore[no-untyped-def]
        return args

    def two(a, b):  # type: ignore[no-untyped-def]
        return a

    for fn in (annotated, keyword_only, two):
        assert resolve(fn).by_name, fn
    assert resolve(annotated).arguments({"args": 5}) == ([], {"args": 5})


def test_untyped_with_declared_parameters_receives_the_object() -> None:
    b = binding(lambda a: a, parameters={"type": "object", "properties": {"q": {"type": "string"}}})
    assert not b.by_name
    assert b.declaration("f") == {"name": "f", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}
    assert b.arguments({"q": "x"}) == ([{"q": "x"}], {})
