/**
 * Lossless JSON for coderun-rpc (docs/child-protocol-wire.md §2.7), without any I/O.
 *
 * Every value that crosses the wire must survive a JSON round trip unchanged. JavaScript's own
 * `JSON.stringify` silently changes values (`NaN` → `null`, `-0` → `0`, `undefined` members
 * dropped, `Date` → string, `Map` → `{}`) and spells large integral doubles with rounded digits
 * (`2 ** 60` → `1152921504606847000`), which the daemon rightly refuses as an integer a double
 * does not hold. The serializer here refuses the first group with a reason and spells numbers
 * canonically (exact integer digits below 1e21, ECMAScript `Number::toString` otherwise).
 * It is iterative: nesting depth is bounded by memory, not by the call stack.
 */

/** A value that crosses the wire: JSON with numbers that are finite doubles other than -0. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** The inbound message cap of the daemon (docs/protocol.md §2): bodies above it are discarded unread. */
export const MAX_MESSAGE_BYTES = 67108864;

/** Prefix of every rejection of a binding result that is not lossless JSON (docs/protocol.md §9). */
export const LOSSLESS_PREFIX = 'binding resolution must be lossless JSON';

/** Ends every message this package had to cut (the daemon's marker, docs/child-protocol-daemon.md §4.7). */
export const TRUNCATION_MARKER = '… [truncated]';

const utf8 = new TextEncoder();

/** Longest detail (in UTF-16 units) quoted from a value that threw while being walked. */
const WALK_DETAIL_CHARS = 200;

/** Already-serialized canonical JSON text, spliced verbatim by {@link encodeMessage}. */
export class RawJson {
  constructor(readonly text: string) {}
}

export type SerializeResult =
  | { ok: true; text: string }
  | { ok: false; reason: string; path: string; tooLarge?: false }
  | { ok: false; reason: string; path: string; tooLarge: true };

export interface SerializeOptions {
  /**
   * Give up once the text is known to exceed this many UTF-8 bytes (checked on UTF-16 length,
   * a lower bound of the byte length, so the exact byte check stays with the caller).
   */
  maxLength?: number;
  /** Splice {@link RawJson} values verbatim (the message encoder); otherwise they are refused. */
  allowRaw?: boolean;
}

/** The canonical spelling of a finite, non-negative-zero double (docs/child-protocol-wire.md §2.7). */
export function canonicalNumber(x: number): string {
  if (Number.isInteger(x) && Math.abs(x) < 1e21 && !Number.isSafeInteger(x)) {
    return BigInt(x).toString();
  }
  return String(x);
}

type Frame =
  | { array: unknown[]; i: number; obj?: undefined }
  | { obj: Record<string, unknown>; keys: string[]; i: number; array?: undefined };

function describe(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return undefined;
    case 'number':
      if (Number.isNaN(value)) return 'NaN is not JSON';
      if (!Number.isFinite(value)) return `${value} is not JSON`;
      if (Object.is(value, -0)) return 'negative zero (-0) does not survive JSON';
      return undefined;
    case 'undefined':
      return 'undefined is not JSON (return null for "no value")';
    case 'bigint':
      return 'a bigint is not JSON (convert it to a number or a string)';
    case 'function':
      return 'a function is not JSON';
    case 'symbol':
      return 'a symbol is not JSON';
    default:
      return value === null ? undefined : describeObject(value as object);
  }
}

function describeObject(value: object): string | undefined {
  const proto: unknown = Object.getPrototypeOf(value);
  if (Array.isArray(value)) {
    return proto === Array.prototype ? undefined : 'an Array subclass is not plain JSON';
  }
  if (proto !== Object.prototype && proto !== null) {
    const ctor = (proto as { constructor?: { name?: unknown } } | null)?.constructor?.name;
    const name = typeof ctor === 'string' && ctor !== '' ? ctor : 'non-plain';
    return `a ${name} instance is not a plain object`;
  }
  for (const sym of Object.getOwnPropertySymbols(value)) {
    if (Object.prototype.propertyIsEnumerable.call(value, sym)) {
      return 'a symbol-keyed property is not JSON';
    }
  }
  return undefined;
}

function pathOf(stack: Frame[]): string {
  let path = '$';
  for (const f of stack) {
    if (f.array !== undefined) path += `[${f.i - 1}]`;
    else {
      const key = f.keys[f.i - 1] as string;
      path += /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
    }
  }
  return path;
}

/**
 * Serializes `value` to canonical compact JSON, or explains why it is not lossless JSON.
 * Shared (acyclic) references are fine; a cycle is refused. Never throws: a getter or proxy
 * trap that throws while the value is walked is refused as `value could not be walked: <its
 * message, cut to 200 characters>`.
 */
export function serializeLossless(value: unknown, options: SerializeOptions = {}): SerializeResult {
  const maxLength = options.maxLength ?? Infinity;
  const allowRaw = options.allowRaw === true;
  const out: string[] = [];
  let length = 0;
  const stack: Frame[] = [];
  const onPath = new Set<object>();
  const fail = (reason: string): SerializeResult => ({ ok: false, reason, path: pathOf(stack) });
  const emit = (s: string): boolean => {
    out.push(s);
    length += s.length;
    return length <= maxLength;
  };

  let next: unknown = value;
  let pending = true; // `next` still has to be written
  try {
    for (;;) {
      if (pending) {
        pending = false;
        const v = next;
        const raw = allowRaw && v instanceof RawJson;
        const bad = raw ? undefined : describe(v);
        if (bad !== undefined) return fail(bad);
        let ok: boolean;
        if (raw) ok = emit(v.text);
        else if (v === null) ok = emit('null');
        else if (typeof v === 'string') ok = emit(JSON.stringify(v));
        else if (typeof v === 'number') ok = emit(canonicalNumber(v));
        else if (typeof v === 'boolean') ok = emit(v ? 'true' : 'false');
        else {
          const obj = v as object;
          if (onPath.has(obj)) return fail('a cycle is not JSON');
          onPath.add(obj);
          if (Array.isArray(obj)) {
            stack.push({ array: obj, i: 0 });
            ok = emit('[');
          } else {
            stack.push({ obj: obj as Record<string, unknown>, keys: Object.keys(obj), i: 0 });
            ok = emit('{');
          }
        }
        if (!ok) return { ok: false, reason: 'too large', path: pathOf(stack), tooLarge: true };
      }
      const top = stack[stack.length - 1];
      if (top === undefined) break;
      if (top.array !== undefined) {
        const arr = top.array;
        if (top.i < arr.length) {
          if (top.i > 0) emit(',');
          const i = top.i++;
          if (!(i in arr)) return fail('an array hole is not JSON');
          next = arr[i];
          pending = true;
          continue;
        }
        emit(']');
        onPath.delete(arr);
      } else {
        const { obj, keys } = top;
        if (top.i < keys.length) {
          const key = keys[top.i++] as string;
          emit((top.i > 1 ? ',' : '') + JSON.stringify(key) + ':');
          next = obj[key];
          pending = true;
          continue;
        }
        emit('}');
        onPath.delete(obj);
      }
      stack.pop();
    }
    return { ok: true, text: out.join('') };
  } catch (err) {
    return fail(`value could not be walked: ${cutMessage(messageOf(err), WALK_DETAIL_CHARS)}`);
  }
}

/** Exact UTF-8 byte length of a JS string (a lone surrogate counts as its 3-byte WTF-8 form). */
export function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/**
 * Turns a binding's resolved value into the `result` of its response: canonical JSON text, or
 * an `Error` whose message starts with {@link LOSSLESS_PREFIX} or names the message cap.
 * `budget` is the number of bytes the result may take (the cap minus the response envelope).
 */
export function bindingResult(value: unknown, budget: number = MAX_MESSAGE_BYTES): RawJson | Error {
  const r = serializeLossless(value, { maxLength: budget });
  if (r.ok) {
    const bytes = utf8Length(r.text);
    return bytes <= budget ? new RawJson(r.text) : new Error(tooLargeMessage(bytes));
  }
  if (r.tooLarge === true) return new Error(tooLargeMessage(undefined));
  return new Error(`${LOSSLESS_PREFIX}: ${r.reason} (at ${r.path})`);
}

export function tooLargeMessage(bytes: number | undefined): string {
  const size = bytes === undefined ? 'is too large' : `of ${bytes} bytes is too large`;
  return `binding resolution ${size}: a response must fit the daemon's ${MAX_MESSAGE_BYTES}-byte message limit`;
}

/**
 * `message` whose JSON string body (quotes excluded) takes at most `room` UTF-8 bytes: as is
 * when it fits, else cut and ended with {@link TRUNCATION_MARKER}. `room` is at least 15 (the
 * marker's bytes).
 */
export function fitMessage(message: string, room: number): string {
  let text = message.length > room ? cutMessage(message, room - utf8Length(TRUNCATION_MARKER)) : message;
  for (;;) {
    const bytes = utf8.encode(JSON.stringify(text)).byteLength - 2;
    if (bytes <= room) return text;
    const keep = Math.floor(((text.length * room) / bytes) * 0.95) - TRUNCATION_MARKER.length;
    text = keep > 0 ? cutMessage(message, keep) : TRUNCATION_MARKER;
  }
}

/** The first `chars` UTF-16 units of `s` (never half a surrogate pair) plus the marker, if `s` is longer. */
export function cutMessage(s: string, chars: number): string {
  if (s.length <= chars) return s;
  const c = s.charCodeAt(chars - 1);
  const end = c >= 0xd800 && c <= 0xdbff ? chars - 1 : chars;
  return s.slice(0, Math.max(0, end)) + TRUNCATION_MARKER;
}

/** The message of a thrown value (an `Error`'s `message`, a string as is). Never throws. */
/** The built-in Python exception types a failed binding call may name (docs/protocol.md §4.2). */
const PYTHON_ERROR_TYPES = new Set([
  'BrokenPipeError', 'ConnectionAbortedError', 'ConnectionError', 'ConnectionRefusedError',
  'ConnectionResetError', 'FileExistsError', 'FileNotFoundError', 'IndexError', 'IsADirectoryError',
  'KeyError', 'LookupError', 'NotADirectoryError', 'NotImplementedError', 'OSError',
  'PermissionError', 'TimeoutError', 'TypeError', 'ValueError',
]);

/** Node system error codes and the Python type a program gets for them. */
const ERRNO_TYPES: Record<string, string> = {
  ECONNREFUSED: 'ConnectionRefusedError',
  ECONNRESET: 'ConnectionResetError',
  ECONNABORTED: 'ConnectionAbortedError',
  EPIPE: 'BrokenPipeError',
  ETIMEDOUT: 'TimeoutError',
  ENOENT: 'FileNotFoundError',
  EEXIST: 'FileExistsError',
  EACCES: 'PermissionError',
  EPERM: 'PermissionError',
  EISDIR: 'IsADirectoryError',
  ENOTDIR: 'NotADirectoryError',
};

/**
 * `error.data.type` of a failed binding call: the Python type the program raises. An error whose
 * `name` is one of the built-in types keeps it (`TypeError`, `TimeoutError` from
 * `AbortSignal.timeout`, or a class of the host's own named `KeyError`); a Node system error maps
 * by its `code`; anything else is `undefined` (the program gets `RuntimeError`).
 */
export function pythonTypeOf(err: unknown): string | undefined {
  try {
    const { name, code } = (err ?? {}) as { name?: unknown; code?: unknown };
    if (typeof name === 'string' && PYTHON_ERROR_TYPES.has(name)) return name;
    if (typeof code === 'string' && Object.hasOwn(ERRNO_TYPES, code)) return ERRNO_TYPES[code];
  } catch {
    // a hostile getter: no type
  }
  return undefined;
}

export function messageOf(err: unknown): string {
  try {
    if (typeof err === 'string') return err;
    const message = (err as { message?: unknown } | null | undefined)?.message;
    return typeof message === 'string' ? message : String(err);
  } catch {
    return '<unrenderable rejection value>';
  }
}
