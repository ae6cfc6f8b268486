import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  bindingResult,
  canonicalNumber,
  encodeMessage,
  LOSSLESS_PREFIX,
  MAX_MESSAGE_BYTES,
  RawJson,
  serializeLossless,
  utf8Length,
} from '../src/index.js';
import { fitMessage, TRUNCATION_MARKER } from '../src/json.js';

function text(v: unknown): string {
  const r = serializeLossless(v);
  assert.ok(r.ok, `expected lossless: ${JSON.stringify(r)}`);
  return r.text;
}

function reason(v: unknown): string {
  const r = serializeLossless(v);
  assert.ok(!r.ok, 'expected a refusal');
  return `${r.reason} at ${r.path}`;
}

describe('canonical numbers (docs/child-protocol-wire.md §2.7)', () => {
  const cases: [number, string][] = [
    [1.0, '1'],
    [100, '100'],
    [1e-7, '1e-7'],
    [1e-6, '0.000001'],
    [1e-5, '0.00001'],
    [1e21, '1e+21'],
    [-2.5e-8, '-2.5e-8'],
    [5e-324, '5e-324'],
    [1.7976931348623157e308, '1.7976931348623157e+308'],
    [2 ** 60, '1152921504606846976'],
    [2 ** 53, '9007199254740992'],
    [2 ** 64, '18446744073709551616'],
    [-(2 ** 64), '-18446744073709551616'],
    [Number.MAX_SAFE_INTEGER, '9007199254740991'],
    [0, '0'],
    [0.1, '0.1'],
  ];
  for (const [x, want] of cases) {
    test(`${want}`, () => assert.equal(canonicalNumber(x), want));
  }
  test('inside structures', () => {
    assert.equal(text({ a: [2 ** 60, 1.5, -3] }), '{"a":[1152921504606846976,1.5,-3]}');
  });
});

describe('lossless values are serialized compactly', () => {
  test('scalars and containers', () => {
    assert.equal(text(null), 'null');
    assert.equal(text(true), 'true');
    assert.equal(text('a"b\\'), '"a\\"b\\\\"');
    assert.equal(text([]), '[]');
    assert.equal(text({}), '{}');
    assert.equal(text({ a: 1, b: [null, 'x', { c: false }] }), '{"a":1,"b":[null,"x",{"c":false}]}');
    assert.equal(text(Object.assign(Object.create(null), { k: 1 })), '{"k":1}');
  });
  test('strings: controls escaped lowercase, non-ASCII raw, lone surrogates escaped', () => {
    assert.equal(text('\u0000\u001f\n'), '"\\u0000\\u001f\\n"');
    assert.equal(text('é中😀\u2028'), '"é中😀\u2028"');
    assert.equal(text('\ud800a'), '"\\ud800a"');
  });
  test('shared (acyclic) references are fine', () => {
    const shared = { x: 1 };
    assert.equal(text([shared, shared]), '[{"x":1},{"x":1}]');
  });
  test('100 000 levels deep, no stack overflow', () => {
    let v: unknown = 0;
    for (let i = 0; i < 100_000; i++) v = [v];
    const t = text(v);
    assert.equal(t.length, 200_001);
    assert.ok(t.startsWith('[[[') && t.endsWith(']]]'));
  });
});

describe('non-lossless values are refused with a reason and a path', () => {
  const cases: [string, unknown, RegExp][] = [
    ['NaN', { a: NaN }, /NaN is not JSON at \$\.a$/],
    ['Infinity', [1, Infinity], /Infinity is not JSON at \$\[1\]$/],
    ['-Infinity', -Infinity, /-Infinity is not JSON at \$$/],
    ['-0', { x: [0, -0] }, /negative zero/],
    ['undefined at top', undefined, /undefined is not JSON/],
    ['undefined member', { a: undefined }, /undefined is not JSON .* at \$\.a$/],
    ['function', { f() {} }, /a function is not JSON at \$\.f$/],
    ['bigint', { n: 1n }, /bigint/],
    ['symbol', Symbol('s'), /symbol/],
    ['Date', new Date(0), /a Date instance is not a plain object/],
    ['Map', new Map(), /a Map instance/],
    ['class instance', new (class Point {})(), /a Point instance/],
    ['boxed number', Object(1), /a Number instance/],
    ['array hole', [1, , 3], /array hole is not JSON at \$\[1\]$/],
    ['array subclass', new (class Arr extends Array {})(), /Array subclass/],
    ['odd key path', { 'my key': [NaN] }, /at \$\["my key"\]\[0\]$/],
    ['symbol key', { [Symbol('k')]: 1 }, /symbol-keyed/],
    ['toJSON is not honoured', { toJSON: () => 1 }, /function/],
  ];
  for (const [name, v, re] of cases) {
    test(name, () => assert.match(reason(v), re));
  }
  test('cycles', () => {
    const a: Record<string, unknown> = {};
    a['self'] = a;
    assert.match(reason(a), /a cycle is not JSON at \$\.self$/);
    const arr: unknown[] = [];
    arr.push([arr]);
    assert.match(reason(arr), /cycle/);
  });
  test('a getter or proxy trap that throws is refused with its message, cut short', () => {
    assert.equal(reason({ get a() { throw new Error('boom'); } }), 'value could not be walked: boom at $.a');
    const keys = new Proxy({}, { ownKeys() { throw 'no keys'; } });
    assert.equal(reason([1, keys]), 'value could not be walked: no keys at $[1]');
    const long = reason({ get a() { throw new Error('z'.repeat(1000)); } });
    assert.equal(long, `value could not be walked: ${'z'.repeat(200)}… [truncated] at $.a`);
    const pair = reason({ get a() { throw new Error(`${'z'.repeat(199)}😀😀`); } });
    assert.equal(pair, `value could not be walked: ${'z'.repeat(199)}… [truncated] at $.a`, 'never half a pair');
  });
  test('RawJson is spliced only when allowed', () => {
    assert.match(reason(new RawJson('1')), /RawJson instance/);
    const r = serializeLossless({ a: new RawJson('[1]') }, { allowRaw: true });
    assert.deepEqual(r, { ok: true, text: '{"a":[1]}' });
  });
});

describe('bindingResult', () => {
  test('a lossless value becomes raw JSON', () => {
    const r = bindingResult({ n: 2 ** 60 });
    assert.ok(r instanceof RawJson);
    assert.equal(r.text, '{"n":1152921504606846976}');
  });
  test('a lossy value becomes an error starting with the contract prefix', () => {
    const r = bindingResult({ n: NaN });
    assert.ok(r instanceof Error);
    assert.ok(r.message.startsWith(LOSSLESS_PREFIX));
    assert.match(r.message, /NaN is not JSON \(at \$\.n\)/);
  });
  test('a value over the budget names the cap', () => {
    const r = bindingResult('x'.repeat(100), 50);
    assert.ok(r instanceof Error);
    assert.match(r.message, /67108864-byte/);
    const multi = bindingResult('é'.repeat(30), 50); // 62 bytes, 32 code units
    assert.ok(multi instanceof Error);
    assert.match(multi.message, /of 62 bytes/);
  });
});

describe('utf8Length', () => {
  test('matches Buffer.byteLength for well-formed strings', () => {
    for (const s of ['', 'abc', 'é', '中', '😀', 'a😀é中']) assert.equal(utf8Length(s), Buffer.byteLength(s));
  });
  test('lone surrogates count 3 bytes', () => {
    assert.equal(utf8Length('\ud800'), 3);
    assert.equal(utf8Length('\udc00\ud800'), 6);
  });
});

describe('encodeMessage', () => {
  const dec = new TextDecoder();
  test('undefined members are left out, raw results spliced', () => {
    const bytes = encodeMessage({ jsonrpc: '2.0', id: 3, result: new RawJson('{"a":1}') } as never);
    assert.equal(dec.decode(bytes), '{"jsonrpc":"2.0","id":3,"result":{"a":1}}');
    const req = encodeMessage({ jsonrpc: '2.0', id: 1, method: 'shutdown', params: undefined } as never);
    assert.equal(dec.decode(req), '{"jsonrpc":"2.0","id":1,"method":"shutdown"}');
  });
  test('a response over the cap becomes an error for the same id', () => {
    const big = new RawJson(`"${'x'.repeat(MAX_MESSAGE_BYTES)}"`);
    const out = JSON.parse(dec.decode(encodeMessage({ jsonrpc: '2.0', id: 7, result: big } as never)));
    assert.equal(out.id, 7);
    assert.equal(out.result, undefined);
    assert.match(out.error.message, /67108864-byte message limit/);
  });
  test('a response exactly at the cap is sent as is', () => {
    const envelope = '{"jsonrpc":"2.0","id":7,"result":""}'.length;
    const fits = new RawJson(`"${'x'.repeat(MAX_MESSAGE_BYTES - envelope)}"`);
    const bytes = encodeMessage({ jsonrpc: '2.0', id: 7, result: fits } as never);
    assert.equal(bytes.byteLength, MAX_MESSAGE_BYTES);
  });
});

describe('fitMessage: the message of an error response over the cap', () => {
  const body = (m: string) => Buffer.byteLength(JSON.stringify(m)) - 2;
  test('a message that fits is unchanged', () => {
    assert.equal(fitMessage('é"x', 5), 'é"x');
  });
  test('a cut message fits its room, is a prefix, ends with the marker, never splits a pair', () => {
    const messages = ['y'.repeat(1000), '😀'.repeat(100), 'é😀"\u0001'.repeat(100), '\u0001'.repeat(500)];
    for (const m of messages) {
      for (const room of [15, 16, 20, 43, 100, 999]) {
        const fit = fitMessage(m, room);
        if (body(m) <= room) {
          assert.equal(fit, m);
          continue;
        }
        assert.ok(body(fit) <= room, `${JSON.stringify(fit)} > ${room}`);
        assert.ok(fit.endsWith(TRUNCATION_MARKER), fit);
        const kept = fit.slice(0, -TRUNCATION_MARKER.length);
        assert.ok(m.startsWith(kept));
        assert.doesNotMatch(kept, /[\ud800-\udbff]$/, `half a pair at room ${room}`);
      }
    }
    assert.equal(fitMessage('y'.repeat(1000), 100), `${'y'.repeat(85)}${TRUNCATION_MARKER}`, 'ASCII fills its room');
  });
});
