"""Typed binding functions (docs/child-protocol-wire.md §2.2 `signatures` and `typeError`, §3.5)."""

from conftest import run, ns, reply_ok, reply_err, echo, HIJACK_PRELUDE

SEARCH_DOC = "Search the web.\n\nArgs:\n    q: The query.\n    limit: How many results."
SEARCH_STUB = (
    "# keyword arguments, passed as **{...}: 'max-results': int = ..., 'class': str = ...\n"
    "async def search(self, q: str, limit: int = 10, lang: Literal['en', 'de'] = ..., "
    "**kwargs: Any) -> list[str]:\n"
    '    """Search the web.\n'
    "\n"
    "    Args:\n"
    "        q: The query.\n"
    "        limit: How many results.\n"
    '    """\n')


def param(name, required=False, default=None):
    p = {"name": name, "required": required}
    if default is not None:
        p["default"] = default
    return p


def sig(params, name="f", doc="", stub=None, kwargs=False):
    if stub is None:
        stub = "async def %s(self, %s) -> Any:\n    ...\n" % (
            name, ", ".join(p["name"] for p in params))
    s = {"params": params, "doc": doc, "stub": stub}
    if kwargs:
        s["kwargs"] = True
    return s


SEARCH = sig([param("q", True), param("limit", default="10"), param("lang"),
              param("max-results"), param("class")], doc=SEARCH_DOC, stub=SEARCH_STUB, kwargs=True)
PAIR = sig([param("a", True), param("b", True), param("c", True)], "pair")
ONE = sig([param("x", True)], "one")
OPTIONAL = sig([param("a", default="'x'"), param("b", default="1e100")], "optional")
NOTHING = sig([], "nothing")
BY_KEYWORD = sig([param("max-results", True), param("self", True)], "by_keyword")
TOOLS = [ns("tools", "search", "pair", "one", "optional", "nothing", "by_keyword", "plain",
            signatures=[SEARCH, PAIR, ONE, OPTIONAL, NOTHING, BY_KEYWORD, None])]


def test_arguments_map_onto_parameters_in_stub_order():
    prog = ("await tools.search('a', lang='de', zeta=1, alpha=2, limit=5)\n"
            "await tools.search(limit=3, q='x')\n"
            "await tools.search(**{'max-results': 7, 'q': 'y', 'class': 'c'})\n"
            "await tools.search('z', 4, 'en')\n"
            "await tools.nothing()\n"
            "await tools.optional()\n"
            "return await tools.pair(1, c=3, b=2)")
    res = run(prog, echo, TOOLS)
    assert res.value == {"a": 1, "b": 2, "c": 3}
    # given parameters in stub order, then other keywords in call order
    assert res.raw[1] == (b'{"type":"call","id":0,"global":"tools","name":"search",'
                          b'"args":{"q":"a","limit":5,"lang":"de","zeta":1,"alpha":2}}')
    assert [list(c["args"].items()) for c in res.calls] == [
        [("q", "a"), ("limit", 5), ("lang", "de"), ("zeta", 1), ("alpha", 2)],
        [("q", "x"), ("limit", 3)],
        [("q", "y"), ("max-results", 7), ("class", "c")],
        [("q", "z"), ("limit", 4), ("lang", "en")],
        [], [],
        [("a", 1), ("b", 2), ("c", 3)]]
    assert res.raw[5].endswith(b'"args":{}}')      # never null: always an object


def test_type_errors_match_cpython_for_the_same_def():
    """Each complaint is CPython's own for a def with the same parameters, named tools.x."""
    oracles = {"search": "def search(q, limit=0, lang=0, **kwargs): pass",
               "pair": "def pair(a, b, c): pass",
               "one": "def one(x): pass",
               "optional": "def optional(a=0, b=0): pass",
               "nothing": "def nothing(): pass"}
    cases = [("search", [], {}), ("search", [1, 2, 3, 4], {}), ("search", [1], {"q": 2}),
             ("search", [1, 2, 3, 4], {"q": 1}), ("search", [], {"limit": 1}),
             ("search", [1, 2], {"limit": 3, "lang": 4}),
             ("pair", [], {}), ("pair", [1], {}), ("pair", [1, 2, 3, 4], {}),
             ("pair", [1, 2], {"a": 1}), ("pair", [], {"c": 1}), ("pair", [1], {"c": 1}),
             ("one", [1, 2], {}), ("one", [], {}), ("optional", [1, 2, 3], {}),
             ("nothing", [1], {}), ("nothing", [1, 2], {}),
             ("pair", [1, 2, 3], {"bogus": 1}), ("one", [], {"x": 1, "y": 2}),
             ("optional", [], {"c": 1})]
    prog = ("oracles = {}\n"
            "for name, src in %r.items():\n"
            "    exec(src, oracles)\n"
            "    oracles[name].__qualname__ = 'tools.' + name\n"
            "def complaint(f, a, k):\n"
            "    try:\n"
            "        f(*a, **k)\n"
            "    except TypeError as e:\n"
            "        return str(e)\n"
            "out = []\n"
            "for name, a, k in %r:\n"
            "    out.append([complaint(oracles[name], a, k), complaint(tools[name], a, k)])\n"
            "return out" % (oracles, cases))
    res = run(prog, echo, TOOLS)
    for (want, got), case in zip(res.value, cases):
        assert want is not None and got == want, case
    assert res.calls == []
    assert [got for _, got in res.value][:3] == [
        "tools.search() missing 1 required positional argument: 'q'",
        "tools.search() takes from 1 to 3 positional arguments but 4 were given",
        "tools.search() got multiple values for argument 'q'"]
    assert res.value[6][1] == ("tools.pair() missing 3 required positional arguments: "
                               "'a', 'b', and 'c'")
    assert res.value[7][1] == "tools.pair() missing 2 required positional arguments: 'b' and 'c'"
    assert res.value[12][1] == "tools.one() takes 1 positional argument but 2 were given"
    assert res.value[15][1] == "tools.nothing() takes 0 positional arguments but 1 was given"
    # a keyword the stub does not declare, without additionalProperties, is refused
    assert res.value[17][1] == "tools.pair() got an unexpected keyword argument 'bogus'"
    assert res.value[19][1] == "tools.optional() got an unexpected keyword argument 'c'"


def test_names_that_are_not_parameters_travel_as_keywords():
    """Non-identifiers, keywords and `self` are never positional; a missing one is named."""
    prog = ("out = []\n"
            "for call in (lambda: tools.by_keyword(1),\n"
            "             lambda: tools.by_keyword(**{'self': 1}),\n"
            "             lambda: tools.by_keyword(**{'max-results': 1})):\n"
            "    try:\n"
            "        call()\n"
            "    except TypeError as e:\n"
            "        out.append(str(e))\n"
            "out.append(await tools.by_keyword(**{'self': 2, 'max-results': 1}))\n"
            "return out")
    res = run(prog, echo, TOOLS)
    assert res.value == [
        "tools.by_keyword() takes 0 positional arguments but 1 was given",
        "tools.by_keyword() missing required argument: 'max-results'",
        "tools.by_keyword() missing required argument: 'self'",
        {"max-results": 1, "self": 2}]
    assert list(res.calls[0]["args"]) == ["max-results", "self"]


def test_type_error_reply_raises_type_error_with_the_daemons_message():
    """A refused call used its id; it raises TypeError even where an errorClass is declared."""
    message = "tools.search(): invalid arguments: /limit: expected integer, but got string"

    def refuse_first(frame):
        if frame["id"] == 0:
            r = reply_err(frame, message)
            r["typeError"] = True
            return r
        return reply_ok(frame, "second")

    prog = ("try:\n"
            "    await tools.search('q', limit='ten')\n"
            "except ToolError:\n"
            "    return 'errorClass'\n"
            "except TypeError as e:\n"
            "    return [type(e).__name__, str(e), e.__cause__, e.__suppress_context__,\n"
            "            await tools.search('q')]")
    spaces = [ns("tools", "search", error_class=("ToolError", "tool"), signatures=[SEARCH])]
    res = run(prog, refuse_first, spaces)
    assert res.value == ["TypeError", message, None, True, "second"]
    assert [c["id"] for c in res.calls] == [0, 1]
    # the flag alone decides, as for an untyped function of the same namespace
    untyped = prog.replace("tools.search('q', limit='ten')", "tools.search({'limit': 'ten'})")
    res = run(untyped, refuse_first, [ns("tools", "search", error_class=("ToolError", "tool"))])
    assert res.value == ["TypeError", message, None, True, "second"]


def test_ordinary_failure_reply_on_a_typed_function():
    """Without typeError a failure is the namespace's errorClass, else RuntimeError, as before."""
    prog = ("try:\n"
            "    await tools.search('q')\n"
            "except %s as e:\n"
            "    return [type(e).__name__, str(e)]")
    message = "tools.search(): the host's result did not match the declared schema: /0"

    def fail(frame):
        return reply_err(frame, message)
    typed = [ns("tools", "search", error_class=("ToolError", "tool"), signatures=[SEARCH])]
    assert run(prog % "ToolError", fail, typed).value == ["ToolError", message]
    typed = [ns("tools", "search", signatures=[SEARCH])]
    assert run(prog % "RuntimeError", fail, typed).value == ["RuntimeError", message]


def test_introspection_shows_the_stub():
    prog = ("import inspect, sys, io\n"
            "f = tools.search\n"
            "s = inspect.signature(f)\n"
            "before = sys.stdout\n"
            "sys.stdout = buf = io.StringIO()\n"
            "help(tools.search)\n"
            "sys.stdout = before\n"
            "help(tools.search)\n"
            "defaults = [None if p.default is p.empty else p.default\n"
            "            for p in s.parameters.values()][:2]\n"
            "return [f.__doc__, str(s), defaults,\n"
            "        repr(s.parameters['lang'].default), buf.getvalue(), dir(tools),\n"
            "        f.__name__, f.__qualname__, repr(f), s is inspect.signature(f),\n"
            "        str(inspect.signature(tools.pair)), str(inspect.signature(tools.by_keyword)),\n"
            "        str(inspect.signature(tools.optional)),\n"
            "        inspect.signature(tools.optional).parameters['a'].default,\n"
            "        tools.plain.__doc__, hasattr(f, '__wrapped__'), callable(f)]")
    res = run(prog, echo, TOOLS)
    (doc, text, defaults, lang, helped, names, name, qualname, rep, cached, pair, by_kw,
     optional, optional_a, plain_doc, wrapped, is_callable) = res.value
    assert doc == SEARCH_DOC
    assert text == ("(q: 'str', limit: 'int' = 10, lang: \"Literal['en', 'de']\" = ..., "
                    "**kwargs: 'Any') -> 'list[str]'")
    assert defaults == [None, 10] and lang == "..."
    assert helped == SEARCH_STUB
    assert "\n".join(res.logs) + "\n" == SEARCH_STUB    # help() prints through the log
    assert names == sorted(["search", "pair", "one", "optional", "nothing", "by_keyword",
                            "plain"])
    assert (name, qualname, rep) == ("search", "tools.search", "<typed binding tools.search>")
    assert cached is True
    assert pair == "(a, b, c) -> 'Any'"
    assert by_kw == "(**kwargs)"        # a stub without a parsable def: no annotations
    # a default is its value when that prints back as the stub's text, else the text
    assert optional == "(a='x', b=1e100) -> 'Any'" and optional_a == "x"
    assert plain_doc is None and wrapped is False and is_callable is True
    assert res.calls == []


def test_untyped_functions_beside_typed_ones_keep_their_rules():
    prog = ("out = [await tools.plain(5), await tools.plain(), await tools.plain(q=1)]\n"
            "try:\n"
            "    tools.plain(1, 2)\n"
            "except TypeError as e:\n"
            "    out.append(str(e))\n"
            "return out")
    res = run(prog, echo, TOOLS)
    assert res.value == [5, None, {"q": 1},
                         "tools.plain() takes at most 1 positional argument (2 given)"]


def test_forgotten_await_names_the_typed_binding():
    res = run("tools.search('q')\nreturn 1", echo, TOOLS)
    assert res.value == 1 and res.calls == []
    assert "RuntimeWarning: coroutine 'tools.search' was never awaited" in res.logs[0]


def test_lossless_check_still_applies():
    prog = ("try:\n"
            "    await tools.search({1, 2})\n"
            "except RuntimeError as e:\n"
            "    return str(e)")
    res = run(prog, echo, TOOLS)
    assert res.value == ('binding arguments must be lossless JSON (unsupported type (set)) at $["q"]; '
                         "a set has no JSON form: return sorted(list(...)) instead")
    assert res.calls == []


def test_typed_calls_on_an_event_loop_and_from_a_thread():
    prog = ("import asyncio, threading\n"
            "a = await asyncio.gather(tools.one(1), tools.one(x=2))\n"
            "box = []\n"
            "t = threading.Thread(target=lambda: box.append(asyncio.run(tools.pair(1, 2, 3))))\n"
            "t.start()\n"
            "while t.is_alive():\n"
            "    await asyncio.sleep(0.01)\n"
            "return [a, box]")
    res = run(prog, echo, TOOLS)
    assert res.value == [[{"x": 1}, {"x": 2}], [{"a": 1, "b": 2, "c": 3}]]


def test_typed_dispatch_survives_rebound_globals():
    """docs/child-protocol-child.md §3.7: the typed path reads nothing the program can rebind."""
    prog = HIJACK_PRELUDE + (
        "import inspect\n"
        "try:\n"
        "    tools.pair(1)\n"
        "except TypeError as e:\n"
        "    msg = str(e)\n"
        "return [await tools.pair(1, 2, c=3), msg, str(inspect.signature(tools.one))]")
    res = run(prog, echo, TOOLS)
    assert res.value == [{"a": 1, "b": 2, "c": 3},
                         "tools.pair() missing 2 required positional arguments: 'b' and 'c'",
                         "(x) -> 'Any'"]


def test_help_of_anything_else_is_pydoc():
    prog = ("import sys, io\n"
            "sys.stdout = buf = io.StringIO()\n"
            "help(len)\n"
            "sys.stdout = sys.__stdout__\n"
            "return [buf.getvalue(), repr(help)]")
    res = run(prog, echo, TOOLS)
    text, rep = res.value
    assert "len(obj, /)" in text
    assert rep.startswith("Type help() for interactive help")


def test_an_untyped_boot_frame_builds_nothing_typed():
    """Without `signatures` the typed factory never runs: help() and the functions as before."""
    prog = "import builtins\nreturn [type(builtins.help).__name__, type(tools.x).__name__]"
    assert run(prog, echo, [ns("tools", "x")]).value == ["_Helper", "function"]
    assert run(prog, echo, [ns("tools", "x", signatures=[None])]).value == [
        "_Helper", "function"]


def test_members_built_on_first_access_are_the_same_object():
    """Members are built lazily: still one object per name, all listed, help() saved early works."""
    prog = ("import io, sys\n"
            "h = help\n"
            "names = dir(tools)\n"
            "first = tools.one\n"
            "same = [first is tools.one, tools['one'] is first, tools.plain is tools['plain']]\n"
            "before = sys.stdout\n"
            "sys.stdout = buf = io.StringIO()\n"
            "h(tools.search)\n"
            "sys.stdout = before\n"
            "return [names, same, buf.getvalue(), await tools.one(7), await tools.plain(8)]")
    names, same, helped, one, plain = run(prog, echo, TOOLS).value
    assert names == sorted(["search", "pair", "one", "optional", "nothing", "by_keyword", "plain"])
    assert same == [True, True, True]
    assert helped == SEARCH_STUB
    assert one == {"x": 7} and plain == 8
