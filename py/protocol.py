"""The fd-3 protocol of coderun-rpc, child side (docs/child-protocol-wire.md §2, Appendix A).

Standard library only, and cheap to import: the bootstrap compiles this file in
every fresh child, so nothing here imports `typing`, `json` or `re` at run time (`re`
only once a string holding surrogates needs pair folding).

* Constants and marker texts mirror protocol/protocol.go (py/mirror_test.go
  keeps the two in step).
* The frame shapes are `TypedDict`s declared under `if TYPE_CHECKING:` (what a
  type checker reads). At run time they are built lazily, from that very block,
  the first time one is asked for (`protocol.BootMessage` ...), so the mirror
  test sees them while a run never imports `typing`.
* `compile_program()` wraps a program as the body of `async def __coderun_main__`
  (docs/child-protocol-child.md §3.2) and tells whether it needs a real event loop.
* `make_codec()` builds the lossless JSON codec (docs/child-protocol-wire.md §2.7) and `_cap_message` (docs/child-protocol-child.md §3.6 item 3),
  and `make_diagnostics()` the filtered-traceback renderer (docs/child-protocol-child.md §3.6 item 2), out of closures
  with every builtin captured when they are called: a program that rebinds globals of
  `__main__` or of this module afterwards cannot change them.
* Everything after the `COLD_SECTION` line (diagnostics, frame TypedDicts) is compiled
  by the bootstrap only on first use; `import protocol` sees one ordinary module.
"""

TYPE_CHECKING = False

# ---- constants (Appendix A) ---------------------------------------------------------------

PROTOCOL_FD = 3
FRAME_CAP = 67108864
FRAME_ENVELOPE = 64
BUDGET_CEILING = FRAME_CAP - FRAME_ENVELOPE
MIN_MAX_LOG_BYTES = 64
FRAGMENT_COALESCING = 1024
CALL_SLOTS = 1024
OUTPUT_BUDGET_MULTIPLE = 12
INTERPRETER_BASELINE = 67108864
CHILD_READ_SIZE = 65536
EXCEPTION_CHAIN_CAP = 100
NAME_CUT = 200
NAME_CUT_ = NAME_CUT
PROGRAM_FILENAME = "<program>"
WRAPPER_FUNCTION = "__coderun_main__"

FRAME_BOOT = "boot"
FRAME_RUN = "run"
FRAME_REPLY = "reply"
FRAME_BOOT_ACK = "boot-ack"
FRAME_CALL = "call"
FRAME_LOG = "log"
FRAME_DONE = "done"
FRAME_OUTPUT = "output"
OUTPUTS_MARKER_PREFIX = "[coderun] outputs truncated at "
OUTPUT_OVERHEAD = 32          # billed per output, beyond its MIME types and values
OUTPUT_ENTRY_OVERHEAD = 8     # billed per MIME entry of an output
MPL_BACKEND = "_coderun_mpl"   # the bootstrap's matplotlib backend module (plt.show() displays)
MAX_OUTPUT_ENTRIES = 64       # MIME types in one output
MAX_OUTPUTS = 10000           # outputs in one run
FRAME_FORK = "fork"
FRAME_FORKED = "forked"
FRAME_FORK_FAILED = "fork-failed"
FRAME_PROXY = "proxy"

KIND_EXCEPTION = "exception"
KIND_INVALID_OUTPUT = "invalid-output"
KIND_OUTPUT_LIMIT = "output-limit"

MESSAGE_MARKER = "\u2026 [truncated]"
CHAIN_MARKER = "[coderun] exception chain truncated at 100 links"
LOG_MARKER_PREFIX = "[coderun] log capture truncated at "
UNRENDERABLE_REJECTION = "<unrenderable rejection value>"
# The built-in exception types a host's failure may name (docs/child-protocol-wire.md §2.9).
HOST_ERROR_TYPES = ("BrokenPipeError ConnectionAbortedError ConnectionError ConnectionRefusedError "
                    "ConnectionResetError FileExistsError FileNotFoundError IndexError IsADirectoryError KeyError "
                    "LookupError NotADirectoryError NotImplementedError OSError PermissionError TimeoutError "
                    "TypeError ValueError")
FALLBACK_DONE_FRAME = '{"type":"done","error":{"kind":"exception","message":"<unrenderable>"}}'
RENDER_FAILED = "<diagnostic rendering failed>"
UNKNOWN_CLASS = "<unknown>"


def log_truncation_marker(max_log_bytes):
    """The marker ending a truncated log (docs/child-protocol-wire.md §2.6.3): `... truncated at <N> bytes`."""
    return LOG_MARKER_PREFIX + "%d" % max_log_bytes + " bytes"


# ---- compilation (docs/child-protocol-child.md §3.2) ------------------------------------------------------------------

def compile_program(src, bound_names=None):
    """Compile src as the body of `async def __coderun_main__():` in file `<program>`.

    Returns (code, needs_loop). needs_loop is false when the program cannot tell that no
    asyncio event loop runs: it never names asyncio (nor threads or dynamic imports) and
    imports only standard-library modules outside the asyncio family, so it can await
    nothing but its own coroutines and the bindings. Such a run is driven without asyncio
    (~60 ms of imports saved). Runs before the program: plain module globals are fine here.

    A session run passes bound_names (top_level_names, cold section): every name the
    program binds at its top level is then declared `global` in the wrapper, so it lives in
    the session's globals dict across runs (docs/child-protocol-sessions.md §6.2).
    """
    import _ast
    mod = compile(src, PROGRAM_FILENAME, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
    body = mod.body
    if body:
        ln, col = body[0].lineno, body[0].col_offset
    else:
        ln, col = 1, 0
        body = [_ast.Pass(lineno=1, col_offset=0, end_lineno=1, end_col_offset=0)]
    names = bound_names(_ast, body, src) if bound_names is not None else None
    if names:
        body = [_ast.Global(names=sorted(names), lineno=ln, col_offset=col, end_lineno=ln,
                            end_col_offset=col)] + body
    wrapper, fn = _wrapper or _make_wrapper(_ast)
    fn.body = body
    fn.lineno = fn.end_lineno = ln
    fn.col_offset = fn.end_col_offset = col
    try:
        code = compile(wrapper, PROGRAM_FILENAME, "exec", dont_inherit=True)
    finally:
        fn.body = _NO_BODY      # the program's tree is not kept past its compilation
    needs_loop = "asyncio" in src or not _loop_free(_ast, mod, src)
    return code, needs_loop


_wrapper = None
_NO_BODY = []


def _make_wrapper(_ast):
    """The `Module` holding the wrapper function, and the function: built once, and given
    each program's body and position by compile_program (the nodes are only read by
    compile; nothing compiled is kept)."""
    global _wrapper
    fn = _ast.AsyncFunctionDef(
        name=WRAPPER_FUNCTION,
        args=_ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                            kw_defaults=[], kwarg=None, defaults=[]),
        body=_NO_BODY, decorator_list=[], returns=None, type_comment=None,
        lineno=1, col_offset=0, end_lineno=1, end_col_offset=0)
    _wrapper = (_ast.Module(body=[fn], type_ignores=[]), fn)
    return _wrapper


_LOOP_FLAGS = ("thread", "__import__", "importlib", "concurrent", "multiprocessing")
_LOOP_MODULES = frozenset({"asyncio", "_asyncio", "threading", "_thread", "concurrent",
                           "multiprocessing", "importlib", "unittest", "test", "idlelib",
                           "tkinter", "turtle", "turtledemo", "pydoc", "pdb", "runpy"})


def _loop_free(_ast, mod, src):
    """Only standard-library imports outside the asyncio family, no dynamic imports."""
    import sys
    for flag in _LOOP_FLAGS:
        if flag in src:
            return False
    stdlib = getattr(sys, "stdlib_module_names", None)
    if stdlib is None:
        return False
    if "import" not in src:     # no import statement can be written without the keyword
        return True
    for node in _statements(_ast, mod.body):
        if isinstance(node, _ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, _ast.ImportFrom):
            if node.level or not node.module:
                return False
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.partition(".")[0]
            if top not in stdlib or top in _LOOP_MODULES:
                return False
    return True


def _statements(_ast, body):
    """Every statement of body and of the blocks nested in it, functions' and classes'
    included: an import is a statement, and an expression never holds one, so expressions
    are not walked."""
    blocks = (_ast.stmt, _ast.excepthandler, _ast.match_case)
    stack = list(body)
    while stack:
        node = stack.pop()
        yield node
        for field in node._fields:
            v = getattr(node, field, None)
            if type(v) is list and v and isinstance(v[0], blocks):
                stack.extend(v)


# ---- the lossless JSON codec (docs/child-protocol-wire.md §2.7) ------------------------------------------------------

OK, OVER_BUDGET, NOT_LOSSLESS = 0, 1, 2


def make_codec():
    """Return a `Codec` of closures; see the class for what each member does."""
    import _json
    import builtins as B
    import math as _math
    # Captured now: nested functions see these cells, never a later rebinding.
    (len, type, str, int, float, bool, list, dict, tuple, bytes, bytearray, memoryview, set,
     frozenset, iter, next, id, abs, repr, range, getattr, BaseException, UnicodeEncodeError,
     RecursionError, OverflowError, IndexError) = (
        B.len, B.type, B.str, B.int, B.float, B.bool, B.list, B.dict, B.tuple, B.bytes,
        B.bytearray, B.memoryview, B.set, B.frozenset, B.iter, B.next, B.id, B.abs, B.repr,
        B.range, B.getattr, B.BaseException, B.UnicodeEncodeError, B.RecursionError,
        B.OverflowError, B.IndexError)
    import sys as _sys
    modules = _sys.modules
    copysign = _math.copysign
    OK_, OVER_, BAD_, MARKER_ = OK, OVER_BUDGET, NOT_LOSSLESS, MESSAGE_MARKER
    encode_basestring = _json.encode_basestring
    # The ASCII characters encode_basestring escapes (C0 controls, '"', '\\'), for
    # str.translate to delete.
    escaped = dict.fromkeys((*range(32), 34, 92))
    join = b"".join
    scanstring = _json.scanstring
    inf = float("inf")
    chunk_chars = 1 << 16
    two53 = 1 << 53
    e21 = 10 ** 21

    class _Ctx:
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = None
        memo = {}
    scan_once = _json.make_scanner(_Ctx())

    def type_attr(x, attr):
        """type(x)'s __name__ or __module__, or "?" when it is not a str (or fails)."""
        try:
            n = getattr(type(x), attr)
            return n if type(n) is str else "?"
        except BaseException:
            return "?"

    def type_name(x):
        return type_attr(x, "__name__")

    numpy_exact = [None, frozenset()]     # [the numpy module seen, its exact scalar types]

    def numpy_scalars():
        """The exact scalar types of numpy (integers, unsigned, floats, bool_) when the
        program has imported numpy, else an empty set. Exact types only: a subclass can
        lie about its value."""
        np = modules.get("numpy")
        if np is not numpy_exact[0]:
            names = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                     "float16", "float32", "float64", "bool_", "longlong", "ulonglong",
                     "intc", "uintc")
            try:
                found = frozenset(t for t in (getattr(np, n, None) for n in names)
                                  if type(t) is type)
            except BaseException:
                found = frozenset()
            numpy_exact[:] = [np, found]
        return numpy_exact[1]

    class Refusal(str):
        """Why a value is not lossless JSON (the text), and where: .path is the JSON path
        of the refused value ($, then ["key"] and [index] steps); .refused is the refused
        value's (type name, module), or ("dict key", type name) for a key."""

    def refusal(reason, stack, refused, key=False):
        r = Refusal(reason)
        r.path = path_of(stack, key)
        r.refused = ("dict key", type_name(refused)) if key else (
            type_name(refused), type_attr(refused, "__module__"))
        return r

    def path_of(stack, key):
        """The JSON path of the value the walk is at: each container's current step. For a
        refused key (key=True) the path is the dict's own. At most 512 characters."""
        steps = ["$"]
        size = 1
        for frame in (stack[:-1] if key else stack):
            if frame[1]:
                k = frame[5]
                step = "[" + (string(k if len(k) <= 100 else k[:100] + "...").decode("utf-8")
                              if type(k) is str else "?") + "]"
            else:
                step = "[%d]" % (frame[5] - 1)
            size += len(step)
            if size > 512:
                steps.append("...")
                break
            steps.append(step)
        return "".join(steps)

    pair_re = []

    def fold(s):
        """Combine surrogate pairs held as two code points into one astral character."""
        if not pair_re:
            import re
            pair_re.append(re.compile("[\ud800-\udbff][\udc00-\udfff]").search)
        if pair_re[0](s) is None:
            return s
        return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")

    def enc_chunk(esc, escape_lone):
        try:
            return esc.encode("utf-8")
        except UnicodeEncodeError:
            return fold(esc).encode("utf-8", "backslashreplace" if escape_lone else "replace")

    def quoted(s, room=None, escape_lone=True):
        """s as a JSON string, quotes included, or None once its serialized cost (its
        length) is known to exceed room (None = unbounded).

        Up to 64 Ki characters it is the encoder's own bytes object (no copy); a longer
        string is built chunk by chunk into a bytearray (never a full escaped copy).
        """
        if len(s) > chunk_chars:
            out = bytearray()
            return out if put_string(out, s, room, escape_lone) >= 0 else None
        n = len(s)
        if room is not None and n + 2 > room:
            return None
        if s.isascii() and len(s.translate(escaped)) == n:
            # Nothing the encoder would escape: its output is the text in quotes. (Two
            # C-speed passes instead of its per-character escape loop.)
            return join((b'"', s.encode(), b'"'))
        b = enc_chunk(encode_basestring(s), escape_lone)
        return b if room is None or len(b) <= room else None

    def put_string(out, s, room, escape_lone=True):
        """Append s as a JSON string to out (a bytearray, or None to only meter).

        Returns the serialized cost, or -1 as soon as it is known to exceed room
        (None = unbounded). Works in 64 Ki-character chunks: never a full escaped copy.
        """
        n = len(s)
        if n <= chunk_chars:
            b = quoted(s, room, escape_lone)
            if b is None:
                return -1
            if out is not None:
                out += b
            return len(b)
        if room is not None and n + 2 > room:
            return -1
        total = 2
        if out is not None:
            out += b'"'
        i = 0
        while i < n:
            j = i + chunk_chars
            if j < n and "\ud800" <= s[j - 1] <= "\udbff":
                j += 1
            b = enc_chunk(encode_basestring(s[i:j]), escape_lone)
            total += len(b) - 2
            if room is not None and total > room:
                return -1
            if out is not None:
                out += memoryview(b)[1:-1]
            i = j
        if out is not None:
            out += b'"'
        return total

    def string(s, escape_lone=True):
        return bytes(quoted(s, None, escape_lone))

    def spell_float(x):
        """ECMAScript Number::toString, exact digits for integral |x| < 1e21 (finite x)."""
        if x == 0:
            return "0"
        if x.is_integer() and -e21 < x < e21:
            return "%d" % x
        r = repr(x)
        sign = ""
        if r[0] == "-":
            sign, r = "-", r[1:]
        m, _, e = r.partition("e")
        exp = int(e) if e else 0
        ip, _, fp = m.partition(".")
        d = ip + fp
        n = len(ip) + exp
        stripped = d.lstrip("0")
        n -= len(d) - len(stripped)
        d = stripped.rstrip("0")
        k = len(d)
        if k <= n <= 21:
            s = d + "0" * (n - k)
        elif 0 < n <= 21:
            s = d[:n] + "." + d[n:]
        elif -6 < n <= 0:
            s = "0." + "0" * (-n) + d
        else:
            e = n - 1
            es = ("+" if e >= 0 else "-") + "%d" % abs(e)
            s = (d if k == 1 else d[0] + "." + d[1:]) + "e" + es
        return sign + s

    def scalar(x, t):
        """(bytes, None) for a lossless scalar, (None, reason) otherwise."""
        if x is None:
            return b"null", None
        if t is bool:
            return (b"true" if x else b"false"), None
        if t is int:
            if -two53 <= x <= two53:
                return (b"%d" % x), None
            try:
                f = float(x)
            except OverflowError:
                return None, "integer not exactly representable as a double"
            if int(f) != x:
                return None, "integer not exactly representable as a double"
            return (("%d" % x) if abs(x) < e21 else spell_float(f)).encode(), None
        if t is float:
            if x != x or x == inf or x == -inf:
                return None, "non-finite float"
            if x == 0 and copysign(1.0, x) < 0:
                return None, "negative zero"
            return spell_float(x).encode(), None
        return None, "unsupported type (%s)" % type_name(x)

    str_join = ",".join
    map_, set_, min_, max_, sum_ = map, set, min, max, sum

    def batch_piece(batch):
        """Encoded batch of plain ints or plain strs (no surrogates), or None."""
        kinds = set_(map_(type, batch))
        if len(kinds) != 1:
            return None
        if int in kinds:
            if min_(batch) >= -two53 and max_(batch) <= two53:
                return repr(batch)[1:-1].replace(", ", ",").encode()
            return None
        if str in kinds and sum_(map_(len, batch)) <= 1 << 20:
            try:
                return str_join(map_(encode_basestring, batch)).encode("utf-8")
            except UnicodeEncodeError:
                return None
        return None

    def key_collision(d):
        keys = set()
        count = 0
        for k in d:
            if type(k) is str:
                count += 1
                keys.add(fold(k))
        return len(keys) != count

    try:
        flat_encoder = _json.make_encoder(None, None, encode_basestring, None, ":", ",",
                                          False, False, False)
    except BaseException:       # an interpreter whose C encoder takes other arguments
        flat_encoder = None
    str_concat = "".join

    def flat(d):
        """d's encoding when it is a flat object of plain values (str keys; str, bool,
        None and safe-integer values), else None. Then the C encoder writes exactly
        what the walk below would (same escapes, "%d" integers), at C speed: binding
        arguments are mostly such an object. A string with a lone surrogate (which the
        walk escapes, or combines when paired) fails the UTF-8 encoding: None."""
        for k, v in d.items():
            t = type(v)
            if type(k) is not str or not (t is str or v is None or t is bool or (
                    t is int and -two53 <= v <= two53)):
                return None
        try:
            return str_concat(flat_encoder(d, 0)).encode()
        except UnicodeEncodeError:
            return None

    def encode(root, budget=None):
        """Validate, meter and encode in one bounded walk; O(depth) extra memory.

        Returns (OK, bytes), (OVER_BUDGET, None) or (NOT_LOSSLESS, reason).
        budget None = no byte cap (binding arguments).
        """
        if type(root) is dict and flat_encoder is not None and len(root) <= 64:
            b = flat(root)
            if b is not None:
                if budget is not None and len(b) > budget:
                    return OVER_, None
                return OK_, b
        out = bytearray()
        stack = []          # [iterator, is_dict, first, container]
        open_ids = set()
        value = root
        while True:
            room = None if budget is None else budget - len(out)
            t = type(value)
            if t is str:
                if put_string(out, value, room) < 0:
                    return OVER_, None
            elif t is list or t is dict or t is tuple:
                i = id(value)
                if i in open_ids:
                    return BAD_, refusal("circular reference", stack, value)
                if room is not None and room < 2:
                    return OVER_, None
                if t is dict:
                    out += b"{"
                    stack.append([iter(value.items()), True, True, value, False, None])
                else:
                    out += b"["
                    stack.append([None, False, True, value, False, 0])
                open_ids.add(i)
            else:
                b, reason = scalar(value, t)
                if b is None and t in numpy_scalars():
                    plain = value.item()
                    b, reason = scalar(plain, type(plain))
                if b is None:
                    return BAD_, refusal(reason, stack, value)
                if room is not None and len(b) > room:
                    return OVER_, None
                out += b
            # advance to the next value
            while True:
                if not stack:
                    if budget is not None and len(out) > budget:
                        return OVER_, None
                    return OK_, bytes(out)
                top = stack[-1]
                if top[0] is None:      # a list, walked by index, scalars in batches
                    lst = top[3]
                    i = top[5]
                    if i < len(lst):
                        batch = lst[i:i + 1024]
                        if type(batch) is tuple:
                            batch = list(batch)
                        piece = batch_piece(batch)
                        if piece is not None:
                            if not top[2]:
                                out += b","
                            top[2] = False
                            if budget is not None and len(out) + len(piece) > budget:
                                return OVER_, None
                            out += piece
                            top[5] = i + len(batch)
                            continue
                        top[5] = i + 1
                        try:
                            item = lst[i]
                        except IndexError:  # another thread shrank the list meanwhile
                            item = stack
                    else:
                        item = stack
                else:
                    item = next(top[0], stack)
                if item is stack:
                    out += b"}" if top[1] else b"]"
                    open_ids.discard(id(top[3]))
                    stack.pop()
                    if budget is not None and len(out) > budget:
                        return OVER_, None
                    continue
                if top[2]:
                    top[2] = False
                else:
                    out += b","
                if top[1]:
                    k, value = item
                    top[5] = k
                    if type(k) is not str:
                        return BAD_, refusal("non-string dict key (%s)" % type_name(k), stack,
                                             k, key=True)
                    if not top[4] and not k.isascii():
                        try:
                            k.encode("utf-8")
                        except UnicodeEncodeError:
                            top[4] = True
                            if key_collision(top[3]):
                                return BAD_, refusal(
                                    "duplicate dict key after surrogate-pair combining",
                                    stack, k, key=True)
                    room = None if budget is None else budget - len(out)
                    if put_string(out, k, room) < 0:
                        return OVER_, None
                    out += b":"
                else:
                    value = item
                break

    def decode_deep(s):
        """Iterative JSON decoder (trusted, daemon-canonical text) for any depth."""
        n = len(s)
        i = 0
        stack = []      # (container, key or None)
        ws = " \t\n\r"
        numch = "+-0123456789.eE"
        while True:
            while s[i] in ws:
                i += 1
            c = s[i]
            if c == "[" or c == "{":
                i += 1
                while s[i] in ws:
                    i += 1
                if c == "[":
                    if s[i] == "]":
                        i += 1
                        value = []
                    else:
                        stack.append([[], None])
                        continue
                else:
                    if s[i] == "}":
                        i += 1
                        value = {}
                    else:
                        key, i = scanstring(s, i + 1, True)
                        while s[i] in ws:
                            i += 1
                        i += 1  # ':'
                        stack.append([{}, key])
                        continue
            elif c == '"':
                value, i = scanstring(s, i + 1, True)
            elif c == "t":
                value, i = True, i + 4
            elif c == "f":
                value, i = False, i + 5
            elif c == "n":
                value, i = None, i + 4
            else:
                j = i
                while j < n and s[j] in numch:
                    j += 1
                tok = s[i:j]
                i = j
                if "." in tok or "e" in tok or "E" in tok:
                    value = float(tok)
                else:
                    value = int(tok)
            # attach value to the enclosing containers
            while True:
                if not stack:
                    return value
                top = stack[-1]
                if top[1] is None:
                    top[0].append(value)
                else:
                    top[0][top[1]] = value
                while i < n and s[i] in ws:
                    i += 1
                if s[i] == ",":
                    i += 1
                    if top[1] is not None:
                        while s[i] in ws:
                            i += 1
                        top[1], i = scanstring(s, i + 1, True)
                        while s[i] in ws:
                            i += 1
                        i += 1  # ':'
                    break
                i += 1  # ']' or '}'
                value = top[0]
                stack.pop()

    def decode(s):
        """Decode one JSON text (a str) from the daemon; any nesting depth."""
        try:
            return scan_once(s, len(s) - len(s.lstrip(" \t\n\r")))[0]
        except RecursionError:
            return decode_deep(s)

    def cost_bytes(b):
        """JSON string cost (quotes included) of UTF-8 bytes b, per docs/child-protocol-wire.md §2.6.1."""
        c = len(b) + 2 + b.count(b'"') + b.count(b"\\")
        for ch in range(32):
            k = b.count(bytes((ch,)))
            if k:
                c += k * (1 if ch in (8, 9, 10, 12, 13) else 5)
        return c

    def byte_cost(x):
        if x == 34 or x == 92 or x in (8, 9, 10, 12, 13):
            return 2
        return 6 if x < 32 else 1

    def cap_message(message, cap):
        """docs/child-protocol-child.md §3.6 item 3: cap a diagnostic by serialized cost, marker inside the cap."""
        if len(message) > cap:
            message = message[:cap + 1]     # every character costs >= 1 byte: same result
        try:
            b = message.encode("utf-8")
        except UnicodeEncodeError:
            b = fold(message).encode("utf-8", "replace")
        if cost_bytes(b) <= cap:
            return b.decode("utf-8")
        if cap < 17:
            return MARKER_
        room = cap - 2 - 15
        # find the longest prefix whose cost fits room: whole 4 KiB blocks first
        k = 0
        n = len(b)
        used = 0
        while k < n:
            blk = b[k:k + 4096]
            bc = cost_bytes(blk) - 2
            if used + bc > room:
                break
            used += bc
            k += len(blk)
        while k < n:
            bc = byte_cost(b[k])
            if used + bc > room:
                break
            used += bc
            k += 1
        if k < n:
            while k > 0 and (b[k] & 0xC0) == 0x80:
                k -= 1
        return b[:k].decode("utf-8") + MARKER_

    return _Bag({"encode": encode, "decode": decode, "decode_deep": decode_deep,
                 "string": string, "quoted": quoted, "put_string": put_string,
                 "spell_float": spell_float, "cap_message": cap_message,
                 "type_name": type_name, "fold": fold, "cost_bytes": cost_bytes})


class _Bag:
    """A bag of the codec's closures (attribute access only)."""

    def __init__(self, ns):
        self.__dict__.update(ns)


# ==== cold section =========================================================================
# Everything below is needed only on the exception path or by tools (the mirror test, type
# checkers). The bootstrap compiles the file only up to the line above and compiles the
# rest on first use (compile time is most of a fresh child's own start-up cost); a normal
# `import protocol` sees one ordinary module.
COLD_SECTION = "# ==== cold section"


# ---- session programs (docs/child-protocol-sessions.md §6.2) --------------------------------------------------------------

def top_level_names(_ast, body, src=None):
    """The names a program's top level binds: the scope of the wrapper function's body.

    Assignment, augmented and annotated assignment targets, `del` targets, `for` and `with`
    targets, imports, `def` and `class` names, `except ... as`, match captures, type aliases,
    and walrus targets at the top level or inside a top-level comprehension (PEP 572 binds
    those in the enclosing scope). Nested functions, lambdas and class bodies are their own
    scopes and are not entered (their decorators, defaults and bases are); comprehension
    targets are the comprehension's own.

    A global name cannot be annotated, so an annotated assignment to a plain name is
    rewritten in place, in body, as the assignment alone (a function never evaluates a
    local annotation either), and a bare annotation as `pass`.

    The walk visits statements (blocks entered, function and class bodies not), their targets
    and their match patterns. Only a walrus binds from inside an expression, so expressions are
    searched (_walrus_names) only when src, the program's text, holds `:=` (or is not given).
    """
    walrus = src is None or ":=" in src
    names = set()
    scopes = (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef)
    imports = (_ast.Import, _ast.ImportFrom)
    blocks = (_ast.stmt, _ast.excepthandler, _ast.match_case)
    expr, withitem, pattern = _ast.expr, _ast.withitem, _ast.pattern
    lists = [body]
    while lists:
        stmts = lists.pop()
        _plain_assignments(_ast, stmts)
        for node in stmts:
            if isinstance(node, scopes):
                names.add(node.name)
                if walrus:
                    _walrus_names(_ast, _definition_exprs(_ast, node), names)
                continue
            if isinstance(node, imports):
                _add_imported(node, names)
                continue
            _add_captures(node, names)
            for field in node._fields:
                v = getattr(node, field, None)
                if type(v) is not list:
                    v = (v,)
                elif v and isinstance(v[0], blocks):
                    lists.append(v)
                    continue
                for x in v:
                    if isinstance(x, withitem):
                        if walrus:
                            _walrus_names(_ast, (x.context_expr,), names)
                        x = x.optional_vars
                    if isinstance(x, expr):
                        _target_names(_ast, x, names)
                        if walrus:
                            _walrus_names(_ast, (x,), names)
                    elif isinstance(x, pattern):
                        _pattern_names(_ast, x, names)
    return names


def _definition_exprs(_ast, node):
    """What a def or class statement evaluates in the enclosing scope: its decorators, and
    its defaults or its bases and keywords."""
    if isinstance(node, _ast.ClassDef):
        return node.decorator_list + node.bases + node.keywords
    return node.decorator_list + node.args.defaults + node.args.kw_defaults


def _walrus_names(_ast, roots, names):
    """Add the walrus targets in the expressions roots (None ignored) that bind in the
    enclosing scope: inside comprehensions too, not in a lambda's body (its defaults are
    evaluated here)."""
    stack = [r for r in roots if r is not None]
    while stack:
        x = stack.pop()
        if type(x) is _ast.NamedExpr:
            names.add(x.target.id)
        elif type(x) is _ast.Lambda:
            stack.extend(d for d in x.args.defaults + x.args.kw_defaults if d is not None)
            continue
        for field in x._fields:
            v = getattr(x, field, None)
            if type(v) is list:
                stack.extend(e for e in v if isinstance(e, _ast.AST))
            elif isinstance(v, _ast.AST):
                stack.append(v)


def _target_names(_ast, x, names):
    """Add the names an expression binds as a target (a name stored or deleted, in tuples,
    lists and starred items); an expression that is read binds nothing."""
    stack = [x]
    while stack:
        x = stack.pop()
        if isinstance(getattr(x, "ctx", None), _ast.Load) or not hasattr(x, "ctx"):
            continue
        t = type(x)
        if t is _ast.Name:
            names.add(x.id)
        elif t is _ast.Tuple or t is _ast.List:
            stack.extend(x.elts)
        elif t is _ast.Starred:
            stack.append(x.value)


def _pattern_names(_ast, p, names):
    """Add the capture names of a match pattern and its sub-patterns."""
    stack = [p]
    while stack:
        p = stack.pop()
        _add_captures(p, names)
        for field in p._fields:
            v = getattr(p, field, None)
            if type(v) is list:
                stack.extend(x for x in v if isinstance(x, _ast.pattern))
            elif isinstance(v, _ast.pattern):
                stack.append(v)


def _add_imported(node, names):
    """Add the names an import statement binds (a star import binds none we can know)."""
    for alias in node.names:
        if alias.name != "*":
            names.add(alias.asname or alias.name.partition(".")[0])


def _add_captures(node, names):
    """Add the plain-string names node binds (_CAPTURES: except-as, match captures)."""
    for attr in _CAPTURES.get(type(node).__name__, ()):
        name = getattr(node, attr, None)
        if type(name) is str:
            names.add(name)


def _plain_assignments(_ast, stmts):
    """Replace each `name: T = v` in the list stmts by `name = v` (`name: T` by pass)."""
    for i, node in enumerate(stmts):
        if isinstance(node, _ast.AnnAssign) and isinstance(node.target, _ast.Name):
            if node.value is None:
                new = _ast.Pass()
            else:
                new = _ast.Assign(targets=[node.target], value=node.value, type_comment=None)
            new.lineno, new.col_offset = node.lineno, node.col_offset
            new.end_lineno, new.end_col_offset = node.end_lineno, node.end_col_offset
            stmts[i] = new


# Nodes that bind a plain string attribute rather than a Name (match captures, except-as).
_CAPTURES = {"ExceptHandler": ("name",), "MatchAs": ("name",), "MatchStar": ("name",),
             "MatchMapping": ("rest",)}


# ---- hints for refused values (docs/child-protocol-wire.md §2.7) --------------------------------------

# (type name, module prefix or None for any) -> the one line a model can act on.
_HINTS = {
    ("coroutine", None): "a coroutine is not a value: did you forget await?",
    ("set", "builtins"): "a set has no JSON form: return sorted(list(...)) instead",
    ("frozenset", "builtins"): "a set has no JSON form: return sorted(list(...)) instead",
    ("DataFrame", "pandas"): 'return df.to_dict("records") (or df.to_dict("list"))',
    ("Series", "pandas"): "return s.tolist() (or s.to_dict())",
    ("ndarray", "numpy"): "return a.tolist()",
    ("datetime", "datetime"): "return x.isoformat()",
    ("date", "datetime"): "return x.isoformat()",
    ("time", "datetime"): "return x.isoformat()",
    ("Timestamp", "pandas"): "return x.isoformat()",
    ("bytes", "builtins"): "decode bytes to text (b.decode()) or base64-encode them",
    ("bytearray", "builtins"): "decode bytes to text (b.decode()) or base64-encode them",
    ("Decimal", "decimal"): "return str(x) (exact) or float(x)",
}
_REASON_HINTS = {
    "non-finite float": "NaN and infinity have no JSON form: return None or a string",
    "integer not exactly representable as a double": "return str(n) to keep every digit",
    "duplicate dict key after surrogate-pair combining":
        "two keys are the same text once surrogate pairs are combined: keep one",
}


def refusal_hint(refusal):
    """One line a model can act on for a codec refusal (its .refused and text), or None."""
    hint = _REASON_HINTS.get(str(refusal))
    if hint is not None:
        return hint
    what, where = getattr(refusal, "refused", ("?", "?"))
    if what == "dict key":
        return "dict keys must be text: use str(key)"
    for (name, module), text in _HINTS.items():
        if what == name and (module is None or where == module or where.startswith(module + ".")):
            return text
    return None


# ---- diagnostics (docs/child-protocol-child.md §3.6 item 2) ----------------------------------------------------------------

def make_diagnostics():
    """Return diagnose(exc, limit) -> (message, exceptionType or None, line or None).

    The message is the traceback filtered to `<program>` frames across __cause__/__context__
    chains and exception groups (at most 100 links, then the chain marker), bounded to about
    `limit` characters, with the fallbacks of docs/child-protocol-child.md §3.6 item 2 when rendering itself raises.
    """
    import builtins as B
    (len, type, str, int, list, tuple, isinstance, getattr, max, set, id, range, any,
     enumerate, reversed, BaseException, TypeError, SyntaxError) = (
        B.len, B.type, B.str, B.int, B.list, B.tuple, B.isinstance, B.getattr, B.max, B.set,
        B.id, B.range, B.any, B.enumerate, B.reversed, B.BaseException, B.TypeError,
        B.SyntaxError)
    BaseExceptionGroup = getattr(B, "BaseExceptionGroup", None)
    PROGRAM, CHAIN_CAP, NAME_CUT = PROGRAM_FILENAME, EXCEPTION_CHAIN_CAP, NAME_CUT_
    RENDER_FAILED_, UNKNOWN_CLASS_, CHAIN_MARKER_ = RENDER_FAILED, UNKNOWN_CLASS, CHAIN_MARKER

    def class_label(t):
        q = t.__qualname__
        m = t.__module__
        if type(q) is not str or type(m) is not str:
            raise TypeError("class name")
        if m not in ("__main__", "builtins"):
            q = m + "." + q
        return q

    def exception_only(e, add):
        t = type(e)
        if isinstance(e, SyntaxError):
            # As CPython renders it: a location only when there is a line
            # number, else the file (if any) after the message.
            fn = e.filename
            ln = e.lineno
            where = ""
            if ln is not None:
                add('  File "%s", line %s\n' % (fn if type(fn) is str else "<string>", ln))
            elif type(fn) is str:
                where = " (%s)" % fn
            text = e.text
            if type(text) is str:
                stripped = text.rstrip("\n")
                lead = len(stripped) - len(stripped.lstrip())
                add("    " + stripped.strip() + "\n")
                off = e.offset
                if type(off) is int and off >= 1:
                    end = e.end_offset
                    width = end - off if type(end) is int and end > off and \
                        e.end_lineno == ln else 1
                    add("    " + " " * max(0, off - 1 - lead) + "^" * width + "\n")
            msg = e.msg
            add("%s: %s%s\n" % (class_label(t), msg if type(msg) is str else "", where))
            return
        s = str(e)
        if type(s) is not str:
            raise TypeError("__str__")
        label = class_label(t)
        add(label + (": " + s if s else "") + "\n")
        notes = getattr(e, "__notes__", None)
        if type(notes) in (list, tuple):
            for note in notes:
                add((note if type(note) is str else "<note str() failed>") + "\n")

    def program_frames(e):
        frames = []
        tb = e.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename == PROGRAM:
                frames.append((tb.tb_lineno, code.co_name))
            tb = tb.tb_next
        return frames

    def chain_of(e, budget, truncated):
        """e's __cause__/__context__ chain, newest first, as (exc, link to the older one)."""
        chain = []
        seen = set()
        cur = e
        while cur is not None and id(cur) not in seen:
            if budget[0] <= 0:
                truncated[0] = True
                break
            budget[0] -= 1
            seen.add(id(cur))
            if cur.__cause__ is not None:
                chain.append((cur, "cause"))
                cur = cur.__cause__
            elif cur.__context__ is not None and not cur.__suppress_context__:
                chain.append((cur, "context"))
                cur = cur.__context__
            else:
                chain.append((cur, None))
                cur = None
        return chain

    def render(root, limit):
        """Filtered traceback (program frames only) over chains and groups, bounded."""
        budget = [CHAIN_CAP]
        truncated = [False]
        units = []
        stack = [("chain", root, 0)]
        while stack:
            item = stack.pop()
            if item[0] != "chain":
                units.append(item)
                continue
            _, e, depth = item
            chain = chain_of(e, budget, truncated)
            todo = []
            n = len(chain)
            for k in range(n - 1, -1, -1):        # oldest first
                exc = chain[k][0]
                sep = chain[k][1] if k < n - 1 else None     # how it follows the older one
                todo.append(("exc", exc, depth, program_frames(exc), sep))
                if BaseExceptionGroup is not None and isinstance(exc, BaseExceptionGroup):
                    for j, m in enumerate(exc.exceptions):
                        if len(stack) + len(todo) > 2 * CHAIN_CAP or budget[0] <= 0:
                            truncated[0] = True
                            break
                        todo.append(("header", depth + 1, j + 1))
                        todo.append(("chain", m, depth + 1))
            stack.extend(reversed(todo))
        parts = []
        size = [0]

        def add(s):
            if size[0] > limit:
                return
            if size[0] + len(s) > limit + 1:
                s = s[:limit + 1 - size[0]]
            parts.append(s)
            size[0] += len(s)

        if not any(u[0] == "exc" and u[3] for u in units):
            exception_only(root, add)
        else:
            for u in units:
                if size[0] > limit:
                    break
                if u[0] == "header":
                    add("| " * (u[1] - 1) + "+---------------- %d ----------------\n" % u[2])
                    continue
                _, exc, depth, frames, sep = u
                pre = "| " * depth
                if sep == "cause":
                    add(pre + "\n" + pre + "The above exception was the direct cause of the "
                        "following exception:\n" + pre + "\n")
                elif sep == "context":
                    add(pre + "\n" + pre + "During handling of the above exception, another "
                        "exception occurred:\n" + pre + "\n")
                if frames:
                    add(pre + "Traceback (most recent call last):\n")
                    add_frames(frames, pre, add, size, limit)
                if pre:
                    sub = []
                    exception_only(exc, sub.append)
                    for s in "".join(sub).splitlines(True):
                        add(pre + s)
                else:
                    exception_only(exc, add)
        if truncated[0]:
            add(CHAIN_MARKER_ + "\n")
        text = "".join(parts)
        return text[:-1] if text.endswith("\n") else text

    def add_frames(frames, pre, add, size, limit):
        last = None
        repeat = 0
        for ln, name in frames:
            if size[0] > limit:
                return
            if (ln, name) == last:
                repeat += 1
                if repeat >= 3:
                    continue
            else:
                if repeat >= 3:
                    add(pre + "  [Previous line repeated %d more times]\n" % (repeat - 2))
                repeat = 0
            last = (ln, name)
            add(pre + '  File "%s", line %d, in %s\n' % (PROGRAM, ln, name))
        if repeat >= 3:
            add(pre + "  [Previous line repeated %d more times]\n" % (repeat - 2))

    def diagnose(e, limit):
        try:
            message = render(e, limit)
        except BaseException:
            try:
                n = type(e).__name__
                if type(n) is not str:
                    raise TypeError("name")
                message = n[:NAME_CUT] + ": " + RENDER_FAILED_
            except BaseException:
                try:
                    message = UNKNOWN_CLASS_ + ": " + RENDER_FAILED_
                except BaseException:
                    message = RENDER_FAILED_
        exc_type = None
        try:
            n = type(e).__name__
            if type(n) is str:
                exc_type = n[:NAME_CUT]
        except BaseException:
            pass
        line_no = None
        try:
            for ln, _ in program_frames(e):
                line_no = ln
            if line_no is None and isinstance(e, SyntaxError) and type(e.lineno) is int:
                line_no = e.lineno
            if type(line_no) is not int or not 1 <= line_no <= 2147483647:
                line_no = None
        except BaseException:
            line_no = None
        return message, exc_type, line_no

    return diagnose


# ---- typed bindings' signatures (docs/child-protocol-child.md §3.5) --------------------------------

def binding_signature(params, positional, stub):
    """The inspect.Signature a typed binding shows: its stub's, without `self`.

    `params` (the boot frame's Signature.params) give the parameters, their order and
    defaults; `positional(name)` tells which are real parameters (the others travel as
    **kwargs, as in the stub); the stub's `def` gives the annotations, as their source text.
    Imports `ast` and `inspect`, hence only on the first read of `__signature__`.
    """
    import ast
    import inspect
    Parameter = inspect.Parameter
    notes, kwarg = _stub_annotations(ast, stub)
    out = []
    for p in params:
        name = p["name"]
        if positional(name):
            default = Parameter.empty if p["required"] else _default(ast, p.get("default", "..."))
            out.append(Parameter(name, Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                 annotation=notes.get(name, Parameter.empty)))
    if len(out) < len(params):
        out.append(Parameter(kwarg, Parameter.VAR_KEYWORD,
                             annotation=notes.get("**", Parameter.empty)))
    return inspect.Signature(out, return_annotation=notes.get("return", Parameter.empty))


def _stub_annotations(ast, stub):
    """The stub def's annotations as source text, by parameter name ("return" for the return,
    "**" for **kwargs), and the name of its **kwargs parameter.

    A stub without a def (a function whose name is not an identifier is shown as a comment)
    has no annotations.
    """
    notes, kwarg = {}, "kwargs"
    try:
        body = ast.parse(stub).body
    except (SyntaxError, ValueError):
        body = []
    for node in body:
        if isinstance(node, (ast.AsyncFunctionDef, ast.FunctionDef)):
            args = node.args
            noted = [(a.arg, a.annotation) for a in args.args + args.kwonlyargs]
            noted.append(("return", node.returns))
            if args.kwarg is not None:
                kwarg = args.kwarg.arg
                noted.append(("**", args.kwarg.annotation))
            for key, annotation in noted:
                if annotation is not None:
                    notes[key] = ast.get_source_segment(stub, annotation)
            break
    return notes, kwarg


class _Literal:
    """A default shown exactly as the stub spells it (`...` for an optional without one)."""
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def _default(ast, text):
    """The default's value when its repr is the stub's text, else the text itself."""
    try:
        value = ast.literal_eval(text)
    except Exception:
        return _Literal(text)
    return value if repr(value) == text else _Literal(text)


# ---- frame shapes (docs/child-protocol-wire.md §2.2) ------------------------------------------------------------------
# Optional keys live in `total=False` classes so that this file also imports on 3.10.

FRAME_TYPES = (
    "BootMessage", "Namespace", "ErrorClass", "Signature", "Param", "RunMessage", "ReplyOk",
    "ReplyErr", "BootAckMessage", "CallMessage", "LogMessage", "DoneErrorField", "DoneMessage",
    "OutputMessage",
    "ForkMessage", "ForkedMessage", "ForkFailedMessage", "ProxyMessage",
)

if TYPE_CHECKING:
    from typing import Any, Dict, List, Literal, Optional, TypedDict

    class _ErrorClassOptional(TypedDict, total=False):
        attributes: Dict[str, str]

    class ErrorClass(_ErrorClassOptional):
        name: str
        memberNameProperty: str

    class _ParamOptional(TypedDict, total=False):
        default: str

    class Param(_ParamOptional):
        name: str
        required: bool

    class _SignatureOptional(TypedDict, total=False):
        kwargs: Literal[True]

    class Signature(_SignatureOptional):
        params: List[Param]
        doc: str
        stub: str

    _NamespaceRequired = TypedDict("_NamespaceRequired", {"global": str, "names": List[str]})

    class Namespace(_NamespaceRequired, total=False):
        errorClass: ErrorClass
        signatures: List[Optional[Signature]]

    class _BootOptional(TypedDict, total=False):
        session: Literal[True]
        fileSizeBytes: int
        sysPath: List[str]
        egressNote: str
        env: Dict[str, str]

    class BootMessage(_BootOptional):
        type: Literal["boot"]
        cpuSeconds: int
        addressSpaceBytes: int
        maxLogBytes: int
        maxValueBytes: int
        maxOutputBytes: int
        namespaces: List[Namespace]

    class _RunOptional(TypedDict, total=False):
        cpuSeconds: int
        maxLogBytes: int
        maxValueBytes: int
        maxOutputBytes: int
        namespaces: List[Namespace]
        egressNote: str

    class RunMessage(_RunOptional):
        type: Literal["run"]
        program: str

    class ForkMessage(TypedDict):
        type: Literal["fork"]
        dir: str

    class ProxyMessage(TypedDict):
        type: Literal["proxy"]
        url: str

    class ForkedMessage(TypedDict):
        type: Literal["forked"]
        pid: int

    class ForkFailedMessage(TypedDict):
        type: Literal["fork-failed"]
        message: str

    class ReplyOk(TypedDict):
        type: Literal["reply"]
        id: int
        ok: Literal[True]
        value: Any

    class _ReplyErrOptional(TypedDict, total=False):
        typeError: Literal[True]
        exceptionType: str

    class ReplyErr(_ReplyErrOptional):
        type: Literal["reply"]
        id: int
        ok: Literal[False]
        message: str

    class BootAckMessage(TypedDict):
        type: Literal["boot-ack"]

    CallMessage = TypedDict("CallMessage", {
        "type": Literal["call"], "id": int, "global": str, "name": str, "args": Any})

    class _LogOptional(TypedDict, total=False):
        truncated: Literal[True]
        open: Literal[True]

    class LogMessage(_LogOptional):
        type: Literal["log"]
        text: str

    class _DoneErrorOptional(TypedDict, total=False):
        exceptionType: str
        line: int
        path: str
        hint: str

    class DoneErrorField(_DoneErrorOptional):
        kind: str
        message: str

    class _DoneOptional(TypedDict, total=False):
        value: Any
        error: DoneErrorField

    class DoneMessage(_DoneOptional):
        type: Literal["done"]

    class _OutputOptional(TypedDict, total=False):
        data: Dict[str, str]
        truncated: Literal[True]

    class OutputMessage(_OutputOptional):
        type: Literal["output"]


def __getattr__(name):
    """Build the TypedDicts on first use, from the `if TYPE_CHECKING:` block above."""
    if name not in FRAME_TYPES:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    import ast
    with open(__file__, "rb") as f:
        tree = ast.parse(f.read(), __file__)
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            block = ast.Module(body=node.body, type_ignores=[])
            exec(compile(block, __file__, "exec", dont_inherit=True), globals())
            break
    return globals()[name]


def frame_fields():
    """{type name: {"required": [...], "optional": [...]}} for the mirror test."""
    out = {}
    for name in FRAME_TYPES:
        td = __getattr__(name) if name not in globals() else globals()[name]
        out[name] = {"required": sorted(td.__required_keys__ - td.__optional_keys__),
                     "optional": sorted(td.__optional_keys__)}
    return out
