"""Unit tests of protocol.py: constants, marker, the codec's closures (docs/child-protocol-wire.md §2.7, docs/child-protocol-child.md §3.6 item 3)."""

import json
import subprocess
import sys

import protocol
from conftest import PY_DIR, PYTHON

C = protocol.make_codec()
OK, OVER, BAD = protocol.OK, protocol.OVER_BUDGET, protocol.NOT_LOSSLESS


def test_marker_and_constants():
    """C195, C220 (Python side)."""
    assert protocol.log_truncation_marker(65536) == "[coderun] log capture truncated at 65536 bytes"
    assert protocol.log_truncation_marker(1) == "[coderun] log capture truncated at 1 bytes"
    assert protocol.PROTOCOL_FD == 3
    assert len(protocol.MESSAGE_MARKER.encode()) == 15 and len(protocol.MESSAGE_MARKER) == 13
    assert json.loads(protocol.FALLBACK_DONE_FRAME) == {
        "type": "done", "error": {"kind": "exception", "message": "<unrenderable>"}}


def test_importing_protocol_is_cheap():
    code = ("import sys\nsys.path.insert(0, %r)\nbefore = set(sys.modules)\nimport protocol\n"
            "protocol.make_codec()\n"
            "print(sorted(set(sys.modules) - before))" % PY_DIR)
    out = subprocess.run([PYTHON, "-I", "-S", "-c", code], capture_output=True,
                         text=True, check=True).stdout
    assert eval(out) == ["_json", "math", "protocol"] or set(eval(out)) <= {
        "_json", "math", "protocol"}


def test_typed_dicts_are_lazy_and_complete():
    fields = protocol.frame_fields()
    assert fields["LogMessage"] == {"required": ["text", "type"], "optional": ["open", "truncated"]}
    assert fields["Namespace"] == {"required": ["global", "names"],
                                   "optional": ["errorClass", "signatures"]}
    assert fields["Param"] == {"required": ["name", "required"], "optional": ["default"]}
    assert fields["ReplyErr"]["optional"] == ["exceptionType", "typeError"]
    assert fields["CallMessage"]["required"] == ["args", "global", "id", "name", "type"]
    assert protocol.DoneMessage.__optional_keys__ == frozenset({"error", "value"})


def test_canonical_float_spelling():
    """C217 (child speller)."""
    cases = {1.0: "1", 100.0: "100", 1e-7: "1e-7", 1e-6: "0.000001", 1e-5: "0.00001",
             1e21: "1e+21", -2.5e-8: "-2.5e-8", 5e-324: "5e-324",
             1.7976931348623157e308: "1.7976931348623157e+308", 2.0: "2", 0.1: "0.1",
             123.456: "123.456", float(2 ** 60): "1152921504606846976", 1e20: "100000000000000000000",
             1.5e-10: "1.5e-10", 123456789012345680000.0: "123456789012345683968",
             -0.000001: "-0.000001", 1.2345e21: "1.2345e+21", 0.5: "0.5"}
    for x, want in cases.items():
        assert C.spell_float(x) == want, x
        assert float(want) == x


def test_spelling_round_trips_randomly():
    import random
    rnd = random.Random(7)
    for _ in range(20000):
        x = rnd.choice([rnd.uniform(-1e6, 1e6), rnd.random() * 10 ** rnd.randint(-30, 30),
                        rnd.getrandbits(64) * 1.0, 2.0 ** rnd.randint(-1070, 1020)])
        s = C.spell_float(x)
        assert float(s) == x, (x, s)
        assert "e" not in s or "." not in s.split("e")[0] or s.split("e")[0][-1] != "0"


def test_string_encoding():
    assert C.string("a\"b\\\x00\x1f\x7f\u2028é😀") == \
        b'"a\\"b\\\\\\u0000\\u001f\x7f\xe2\x80\xa8\xc3\xa9\xf0\x9f\x98\x80"'
    assert C.string("a\ud800b\udfff") == b'"a\\ud800b\\udfff"'
    assert C.string("\ud83d\ude00") == "\"😀\"".encode()
    assert C.string("\ud800", escape_lone=False) == b'"?"'
    big = "é" * 200000 + "\ud83d" + "\ude00" + "x"
    assert C.string(big) == ('"' + "é" * 200000 + "😀x\"").encode()


def test_quoted_plain_ascii_is_the_encoders_output():
    """quoted's shortcut (ASCII with nothing to escape) against _json.encode_basestring."""
    import _json
    import random
    rnd = random.Random(7)
    pool = [chr(c) for c in range(128)] + ["é", "\ud800", "😀"]
    texts = [""] + [c * k for c in pool for k in (1, 9)] + \
        ["x" * 40 + c + "y" * 3 for c in pool] + \
        ["".join(rnd.choice(pool[32:] if k % 2 else pool) for _ in range(rnd.randint(1, 60)))
         for k in range(400)]
    for t in texts:
        for lone in (True, False):
            want = C.fold(_json.encode_basestring(t)).encode(
                "utf-8", "backslashreplace" if lone else "replace")
            assert C.quoted(t, None, lone) == want, t
            assert C.quoted(t, len(want), lone) == want and C.quoted(t, len(want) - 1) is None


def test_flat_objects_encode_as_the_walk_does():
    """A flat object of plain values takes the C encoder; its bytes and verdicts are the
    walk's (the same object inside a list is walked), budgets and refusals included."""
    import random
    rnd = random.Random(7)
    pieces = ["x", "", "é", "\n", '"', "\\", "\x00", "\x1f", "\u2028", "\U0001f600", "\ud800",
              "\udc00", "\ud83d\ude00", "a" * 70000]
    values = [None, True, False, 0, -1, 2 ** 53, -2 ** 53, 2 ** 53 + 1, 10 ** 30, 1.5, 1.0,
              [1], {"a": 1}, (1,)]
    for _ in range(3000):
        d = {}
        for _ in range(rnd.randrange(0, 5)):
            k = "".join(rnd.choice(pieces[:13]) for _ in range(rnd.randrange(0, 3)))
            v = rnd.choice(values + ["".join(rnd.choice(pieces) for _ in range(2))] * 4)
            d[k if rnd.random() < 0.95 else rnd.choice([1, None])] = v
        walked = C.encode([d])
        want = (OK, walked[1][1:-1]) if walked[0] == OK else walked
        assert C.encode(d) == want, d
        if walked[0] == OK:
            n = len(want[1])
            assert C.encode(d, n) == want and C.encode(d, n - 1) == (OVER, None), d


def test_metering_matches_encoding():
    """C210/C212 analogues: exact length, one byte less is over budget."""
    values = [None, True, False, 0, -1.5, 'a"b\\', [], {}, [1, "x", None],
              {"a": [1, 2], "b": {"c": "d"}}, "\x00", "é", "😀", "\ud800", "\ud800a", "中",
              ["x" * 70000, "\x00" * 70000, "\ud800" * 70000]]
    for v in values:
        st, b = C.encode(v)
        assert st == OK
        assert C.encode(v, len(b)) == (OK, b)
        assert C.encode(v, len(b) - 1) == (OVER, None), v
        assert json.loads(b) == v or isinstance(v, str) and "\ud800" in v or \
            isinstance(v, list) and v and isinstance(v[-1], str)


def test_reasons():
    assert C.encode({1: 2}) == (BAD, "non-string dict key (int)")
    assert C.encode(float("inf")) == (BAD, "non-finite float")
    assert C.encode(-0.0) == (BAD, "negative zero")
    assert C.encode([2 ** 53 + 1]) == (BAD, "integer not exactly representable as a double")
    assert C.encode(2 ** 64) == (OK, b"18446744073709551616")
    assert C.encode(-(2 ** 64)) == (OK, b"-18446744073709551616")
    assert C.encode(10 ** 22) == (OK, b"1e+22")
    assert C.encode([[1] * 3000, (1,)]) == (OK, b"[[" + b",".join([b"1"] * 3000) + b"],[1]]")
    st, why = C.encode([[1] * 3000, {1}])
    assert (st, why, why.path, why.refused) == (BAD, "unsupported type (set)", "$[1]", ("set", "builtins"))
    x = {}
    x["self"] = x
    assert C.encode(x) == (BAD, "circular reference")


def test_wide_and_deep_values():
    st, b = C.encode([0] * 100000 + [2 ** 60, True, None, 1.5, "s"] + ["t"] * 3000)
    assert st == OK and json.loads(b)[100000:100005] == [2 ** 60, True, None, 1.5, "s"]
    v = []
    for _ in range(100000):
        v = [v]
    st, b = C.encode(v)
    assert st == OK and b == b"[" * 100001 + b"]" * 100001
    assert C.decode(b.decode())is not None
    d = C.decode("[" * 100000 + "1" + "]" * 100000)
    for _ in range(100000):
        d = d[0]
    assert d == 1


def test_iterative_decoder_matches_json():
    texts = ['{"a":[1,2.5,"x\\u00e9\\ud800",true,false,null,{}],"b":{"c":[]},"":-3e-5}',
             '[1e+21,-0.5,"\\"\\\\",[[[]]],{"k":{"k":{}}}]', '"s"', "12", "null",
             ' { "sp" : [ 1 , 2 ] } ']
    for t in texts:
        assert C.decode_deep(t) == json.loads(t)
        assert C.decode(t) == json.loads(t)


def test_cap_message():
    """docs/child-protocol-child.md §3.6 item 3: the child's cap is by serialized cost, the marker inside it."""
    T = protocol.MESSAGE_MARKER
    assert C.cap_message("中文中文中文", 64) == "中文中文中文"
    assert C.cap_message("E" * 1000, 64) == "E" * 47 + T
    assert C.cap_message("E" * 62, 64) == "E" * 62
    assert C.cap_message("E" * 63, 64) == "E" * 47 + T
    assert C.cap_message("R" * 500, 4) == T
    assert C.cap_message("R" * 500, 16) == T
    assert C.cap_message("R" * 500, 17) == T
    assert C.cap_message("R" * 500, 18) == "R" + T
    assert C.cap_message("\x00" * 100, 40) == "\x00" * 3 + T       # 18 + 15 + 2 <= 40
    assert C.cap_message("E" + "😀" * 2000, 66) == "E" + "😀" * 12 + T
    assert C.cap_message("a\ud800", 64) == "a?"
    for cap in range(17, 200, 7):
        for msg in ("x" * 1000, "\x00\"" * 300, "é😀中" * 100):
            out = C.cap_message(msg, cap)
            assert len(json.dumps(out, ensure_ascii=False).encode()) <= cap
