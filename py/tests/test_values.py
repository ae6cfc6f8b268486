"""Completion values: lossless validation, metering and canonical encoding (docs/child-protocol-wire.md §2.7, docs/child-protocol-child.md §3.6 item 1)."""

from conftest import run, MIB

LOSSLESS = "program completion must be lossless JSON (%s)"


def invalid(reason):
    return {"kind": "invalid-output", "message": LOSSLESS % reason}


def core(error):
    """An error's kind and message (the refusal's path and hint left out)."""
    return {k: error[k] for k in ("kind", "message")}


def over(n):
    return {"kind": "output-limit", "message": "completion value exceeded %d bytes" % n}


def test_rejections():
    """C58, C60, C61, C146, C147, C177 and the other reasons."""
    assert core(run('return {1: "first", "1": "second"}').error) == invalid("non-string dict key (int)")
    assert core(run("return {1, 2, 3}").error) == invalid("unsupported type (set)")
    assert core(run('return float("nan")').error) == invalid("non-finite float")
    assert core(run('return [float("-inf")]').error) == invalid("non-finite float")
    assert core(run("return -0.0").error) == invalid("negative zero")
    assert core(run("return 2**53 + 1").error) == invalid(
        "integer not exactly representable as a double")
    assert core(run("return 10**400").error) == invalid(
        "integer not exactly representable as a double")
    assert core(run("from collections import namedtuple\nP = namedtuple('P', 'x')\nreturn P(1)").error) == \
        invalid("unsupported type (P)")
    assert core(run("x = []\nx.append(x)\nreturn x").error) == invalid("circular reference")
    assert core(run("x = {}\nx['a'] = [x]\nreturn x").error) == invalid("circular reference")
    assert core(run('return {"\\ud83d\\ude00": 1, "\\U0001f600": 2}').error) == invalid(
        "duplicate dict key after surrogate-pair combining")
    sneaky = ("class Sneaky(dict):\n"
              "    def items(self): return iter([])\n"
              "    def keys(self): return iter([])\n"
              "    def __iter__(self): return iter([])\n"
              "    def __len__(self): return 0\n"
              "return Sneaky(secret=[1, 2])")
    assert core(run(sneaky).error) == invalid("unsupported type (Sneaky)")
    assert core(run("class L(list):\n    pass\nreturn L([1])").error) == invalid("unsupported type (L)")
    assert core(run("class S(str):\n    pass\nreturn {S('k'): 1}").error) == invalid(
        "non-string dict key (S)")
    assert core(run("import enum\nclass E(enum.IntEnum):\n    A = 1\nreturn E.A").error) == \
        invalid("unsupported type (E)")
    assert core(run("return object()").error) == invalid("unsupported type (object)")
    assert run('return {"secret": [1, 2]}').value == {"secret": [1, 2]}


def test_refusals_say_where_and_how():
    """The first refused value's JSON path, and a hint a model can act on."""
    cases = [
        ('return {"rows": [{"a": 1}, {"a": {1}}]}', '$["rows"][1]["a"]',
         "a set has no JSON form: return sorted(list(...)) instead"),
        ('return {1: "x"}', "$", "dict keys must be text: use str(key)"),
        ('return [0, {"k": {2: 3}}]', '$[1]["k"]', "dict keys must be text: use str(key)"),
        ("async def f():\n    return 1\nreturn [f()]", "$[0]",
         "a coroutine is not a value: did you forget await?"),
        ("import datetime\nreturn {'when': datetime.date(2026, 1, 2)}", '$["when"]', "return x.isoformat()"),
        ("return (1, b'x')", "$[1]", "decode bytes to text (b.decode()) or base64-encode them"),
        ('return [float("nan")]', "$[0]", "NaN and infinity have no JSON form: return None or a string"),
        ("return object()", "$", None),
    ]
    for program, path, hint in cases:
        error = run(program).error
        assert error["kind"] == "invalid-output", (program, error)
        assert error["path"] == path, (program, error)
        assert error.get("hint") == hint, (program, error)


def test_tuples_are_arrays():
    assert run("return 1, 2").value == [1, 2]
    assert run("return {'t': (1, ('a', None), ())}").value == {"t": [1, ["a", None], []]}
    assert run("return tuple(range(3000))").value == list(range(3000))
    assert core(run("return (1, float('inf'))").error) == invalid("non-finite float")


def test_shared_references_are_not_cycles():
    assert run("a = [1]\nreturn [a, a, {'x': a}]").value == [[1], [1], {"x": [1]}]


def test_canonical_numbers():
    """C66, C146, C90."""
    prog = ("return [1.0, 100.0, 1.5, 0.1, 1e-7, 1e-6, 1e-5, 123.456, -2.5e-8, 1e21,\n"
            "        float(2**60), 5e-324, 1.7976931348623157e308, 2**53, 2**60, True, False,\n"
            "        None, -7, 10**21 * 4]")
    res = run(prog)
    assert res.raw_value == (b"[1,100,1.5,0.1,1e-7,0.000001,0.00001,123.456,-2.5e-8,1e+21,"
                             b"1152921504606846976,5e-324,1.7976931348623157e+308,"
                             b"9007199254740992,1152921504606846976,true,false,null,-7,4e+21]")
    prog = ("from decimal import getcontext, Inexact\n"
            "getcontext().prec = 2\n"
            "getcontext().traps[Inexact] = True\n"
            "return 1.2345678901234567")
    assert run(prog).raw_value == b"1.2345678901234567"


def test_strings_on_the_wire():
    """C136: lone surrogates as \\udxxx, pairs folded, only " \\ and C0 escaped."""
    res = run('return {"lone": "a\\ud800b", "spelled": "\\ud83d\\ude00"}')
    assert res.raw_value == '{"lone":"a\\ud800b","spelled":"😀"}'.encode()
    res = run('return "q\\"b\\\\\\x00\\x1f\\x7f\\u2028<>&\\n\\t"')
    assert res.raw_value == b'"q\\"b\\\\\\u0000\\u001f\x7f\xe2\x80\xa8<>&\\n\\t"'


def test_metering_is_exact():
    """C62, C65, C137, C139."""
    assert run('return "V" * 5000', maxValueBytes=64).error == over(64)
    assert run("return 1.0", maxValueBytes=1).value == 1
    assert run("return 1e-7", maxValueBytes=4).raw_value == b"1e-7"
    assert run("return 1.5", maxValueBytes=2).error == over(2)
    assert run('return "\\ud800"', maxValueBytes=8).raw_value == b'"\\ud800"'
    assert run('return "\\ud800"', maxValueBytes=7).error == over(7)
    assert run('return "é"', maxValueBytes=4).value == "é"
    assert run('return "éx"', maxValueBytes=4).error == over(4)
    assert run('return "\\x00"', maxValueBytes=8).value == "\x00"
    assert run('return "\\x00"', maxValueBytes=7).error == over(7)
    assert run('return [1, "x", None]', maxValueBytes=12).value == [1, "x", None]
    assert run('return [1, "x", None]', maxValueBytes=11).error == over(11)
    assert run('return {"a": [1, 2], "b": {"c": "d"}}', maxValueBytes=25).value
    assert run('return {"a": [1, 2], "b": {"c": "d"}}', maxValueBytes=24).error == over(24)


def test_dense_values_are_metered_without_copies():
    """C63, C64, C138, C150."""
    res = run('return "\\x00" * 8_000_000', maxValueBytes=16777216, timeout=30)
    assert res.error == over(16777216)
    res = run("return {str(i): 0 for i in range(2000000)}", maxValueBytes=64,
              addressSpaceBytes=256 * MIB, timeout=30)
    assert res.error == over(64)
    res = run('return "\\ud800" * 3000000', maxValueBytes=18000002, timeout=30)
    assert res.raw_value == b'"' + b"\\ud800" * 3000000 + b'"'
    res = run('return "\\ud800" * 3000000', maxValueBytes=18000001, timeout=30)
    assert res.error == over(18000001)
    res = run('return "x" * (100 * 1024 * 1024)', maxValueBytes=1024,
              addressSpaceBytes=384 * MIB, timeout=30)
    assert res.error == over(1024)


def test_wide_completion_in_bounded_memory():
    """C167."""
    res = run("return [0] * 6_000_000", maxValueBytes=20971520, addressSpaceBytes=384 * MIB,
              timeout=60)
    assert res.raw_value == b"[" + b",".join([b"0"] * 6_000_000) + b"]"


def test_deep_completion():
    """10 000-deep completions are validated and encoded without recursion."""
    prog = "v = []\nfor _ in range(9999):\n    v = [v]\nreturn v"
    res = run(prog)
    assert res.raw_value == b"[" * 10000 + b"]" * 10000
    prog = "v = {}\nfor _ in range(9999):\n    v = {'k': v}\nreturn v"
    res = run(prog, maxValueBytes=1 << 20)
    assert res.raw_value == b'{"k":' * 9999 + b"{}" + b"}" * 9999


def test_first_violation_met_wins():
    """Over-budget vs invalid: whichever the walk meets first (child side)."""
    assert run('return ["x" * 200, {1}]', maxValueBytes=100).error == over(100)
    assert core(run('return [{1}, "x" * 200]', maxValueBytes=100).error) == invalid(
        "unsupported type (set)")


def test_value_encoded_at_once():
    """The done frame is the literal success prefix with the compact value."""
    res = run('return {"a": [1, 2.5, "s"], "b": None}')
    assert res.done_raw == b'{"type": "done", "value": {"a":[1,2.5,"s"],"b":null}}'


def test_huge_rejection_message_is_capped():
    """C76."""
    res = run('return type("N" * (70 * 1024 * 1024), (), {})()', timeout=60)
    err = res.error
    assert err["kind"] == "invalid-output"
    assert err["message"].startswith(LOSSLESS.split("(")[0] + "(unsupported type (NNN")
    assert err["message"].endswith("… [truncated]")
    import json
    assert len(json.dumps(err["message"], ensure_ascii=False).encode()) <= 32768

