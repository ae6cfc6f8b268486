/**
 * Typed bindings in the core client, against an in-process peer: what goes on the wire for each
 * kind of `functions` entry, the `bindings/describe` request, its errors, and the types that
 * `defineFunction` infers (checked by tsc when the tests build).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ResponseError } from 'vscode-jsonrpc/node';
import {
  ClientClosedError,
  CodeRunClient,
  ConnectionLostError,
  defineFunction,
  InvalidParamsError,
  ProtocolError,
} from '../src/index.js';
import type { ArgsOf, Binding, JsonValue, ResultOf, SchemaType, TypedFunction } from '../src/index.js';
import { pair } from './mem-pair.js';

const stats = { wallMs: 0, cpuMs: 0, maxRssKb: 0, queueMs: 0, bindingCalls: 1, logBytes: 0 };

const searchParameters = {
  type: 'object',
  properties: {
    q: { type: 'string', description: 'what to look for' },
    limit: { type: 'integer', default: 5 },
  },
  required: ['q'],
} as const;

const searchReturns = { type: 'array', items: { type: 'string' } } as const;

/** `true` only when A and B are the same type (a compile-time assertion). */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

// Compile-time checks: a wrong inference fails `npm test` at the tsc step.
const argsOfSearch: Equal<ArgsOf<typeof searchParameters>, { q: string; limit?: number }> = true;
const resultOfSearch: Equal<ResultOf<typeof searchReturns>, string[]> = true;
const noParameters: Equal<ArgsOf<undefined>, JsonValue> = true;
const unions: Equal<
  SchemaType<{ anyOf: [{ type: 'string' }, { type: 'null' }] } | { type: readonly ['boolean', 'integer'] }>,
  string | null | boolean | number
> = true;
const literals: Equal<SchemaType<{ enum: readonly ['a', 'b'] }>, 'a' | 'b'> = true;
const objects: Equal<
  SchemaType<{ type: 'object'; properties: { tags: { type: 'array'; items: { type: 'object' } } }; required: ['tags'] }>,
  { tags: { [key: string]: JsonValue }[] }
> = true;
void [argsOfSearch, resultOfSearch, noParameters, unions, literals, objects];
// An inline schema needs no `as const`; a handler whose result breaks `returns` does not compile.
defineFunction({
  parameters: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
  handler: (args): number => args.n + 1,
});
defineFunction({
  returns: searchReturns,
  // @ts-expect-error a number is not string[]
  handler: () => 1,
});

describe('typed bindings in the core client', () => {
  test('typed entries are sent as declarations, bare handlers as names; calls reach the handler', async () => {
    const { transport, server } = pair();
    const received: JsonValue[] = [];
    const search = defineFunction({
      description: 'Search the docs.',
      parameters: searchParameters,
      returns: searchReturns,
      handler: (args) => {
        received.push(args);
        // `args.q` is a string and `args.limit` an optional number, by inference.
        return [args.q.toUpperCase(), String(args.limit ?? 'none')];
      },
    });
    const inline: TypedFunction = { handler: (args) => ({ inline: args }), description: undefined };
    const bindings: Binding[] = [
      { global: 'tools', functions: { search, echo: (args) => args, inline } },
      { global: 'web', functions: new Map([['__proto__', { handler: () => 1, returns: { type: 'integer' } }]]) },
    ];
    let params: unknown;
    server.onRequest('run', async (p: { bindings: unknown }) => {
      params = p;
      const call = (ns: string, fn: string, args: JsonValue) =>
        server.sendRequest('binding/call', { runId: 1, namespace: ns, function: fn, args });
      const value = [await call('tools', 'search', { q: 'x' }), await call('tools', 'inline', [1]), await call('web', '__proto__', {})];
      return { value, logs: [], stats };
    });
    const c = await CodeRunClient.connect(transport);
    const r = await c.run({ program: 'p', bindings });
    assert.deepEqual(params, {
      program: 'p',
      bindings: [
        {
          global: 'tools',
          functions: [
            { name: 'search', description: 'Search the docs.', parameters: searchParameters, returns: searchReturns },
            'echo',
            { name: 'inline' },
          ],
        },
        { global: 'web', functions: [{ name: '__proto__', returns: { type: 'integer' } }] },
      ],
    });
    assert.deepEqual(r.value, [['X', 'none'], { inline: [1] }, 1]);
    assert.deepEqual(received, [{ q: 'x' }]);
    await c.close();
    server.dispose();
  });

  test('describe sends bindings/describe with the run shape and returns the stubs text', async () => {
    const { transport, server } = pair();
    let params: unknown;
    server.onRequest('bindings/describe', (p: unknown) => {
      params = p;
      return { stubs: 'class Tools:\n    ...\n' };
    });
    const c = await CodeRunClient.connect(transport);
    let called = false;
    const stubs = await c.describe({
      bindings: [{ global: 'tools', functions: { search: { handler: () => (called = true), parameters: searchParameters } } }],
      limits: { maxWallMs: 1000 },
    });
    assert.equal(stubs, 'class Tools:\n    ...\n');
    assert.deepEqual(params, {
      bindings: [{ global: 'tools', functions: [{ name: 'search', parameters: searchParameters }] }],
      limits: { maxWallMs: 1000 },
    });
    assert.equal(called, false, 'describe never calls a handler');
    await c.close();
    server.dispose();
  });

  test('-32602 from describe and from run rejects with InvalidParamsError, as sent', async () => {
    const { transport, server } = pair();
    const refuse = () => {
      throw new ResponseError(-32602, 'bindings[0].functions[0].parameters: "type" must be "object"');
    };
    server.onRequest('bindings/describe', refuse);
    server.onRequest('run', refuse);
    const c = await CodeRunClient.connect(transport);
    const bindings = [{ global: 'tools', functions: { f: { handler: () => 1, parameters: { type: 'object' } as const } } }];
    for (const call of [() => c.describe({ bindings }), () => c.run({ program: 'x', bindings })]) {
      await assert.rejects(call, (e: unknown) => {
        assert.ok(e instanceof InvalidParamsError, String(e));
        assert.equal(e.code, -32602);
        assert.equal(e.message, 'bindings[0].functions[0].parameters: "type" must be "object"');
        return true;
      });
    }
    await c.close();
    server.dispose();
  });

  test('a describe answer without stubs text is a ProtocolError; a closed client refuses describe', async () => {
    const { transport, server } = pair();
    server.onRequest('bindings/describe', () => ({ stubs: 5 }));
    const c = await CodeRunClient.connect(transport);
    await assert.rejects(c.describe({ bindings: [] }), (e: unknown) => e instanceof ProtocolError && /no stubs text/.test(e.message));
    await c.close();
    await assert.rejects(c.describe({ bindings: [] }), ClientClosedError);
    server.dispose();
  });

  test('a describe pending when the peer goes away rejects with ConnectionLostError', async () => {
    const { transport, server, die } = pair();
    server.onRequest('bindings/describe', () => new Promise(() => {}));
    const c = await CodeRunClient.connect(transport);
    const pending = c.describe({ bindings: [] });
    die({ exitCode: 3, signal: null });
    await assert.rejects(pending, (e: unknown) => e instanceof ConnectionLostError && e.exitCode === 3);
    await c.close();
    server.dispose();
  });

  test('schemas that are not lossless JSON, and entries that are not entries, are refused before sending', async () => {
    const { transport, server } = pair();
    let sent = 0;
    server.onRequest('bindings/describe', () => {
      sent++;
      return { stubs: '' };
    });
    server.onRequest('run', () => {
      sent++;
      return { value: null, logs: [], stats };
    });
    const c = await CodeRunClient.connect(transport);
    const lossy = { type: 'object', properties: { n: { type: 'number', minimum: NaN } } } as const;
    const lossyBindings = [{ global: 'tools', functions: { f: { handler: () => 1, parameters: lossy } } }];
    await assert.rejects(
      c.describe({ bindings: lossyBindings }),
      /^TypeError: bindings\/describe params must be lossless JSON: NaN is not JSON \(at \$\.bindings\[0\]\.functions\[0\]\.parameters\.properties\.n\.minimum\)$/,
    );
    await assert.rejects(c.run({ program: 'x', bindings: lossyBindings }), /run params must be lossless JSON: NaN is not JSON/);
    const notEntries: Binding[] = [
      { global: 't', functions: { f: 1 as never } },
      { global: 't', functions: { f: null as never } },
    ];
    for (const b of notEntries) {
      for (const call of [() => c.describe({ bindings: [b] }), () => c.run({ program: 'x', bindings: [b] })]) {
        await assert.rejects(call, /^TypeError: binding "t"\."f" is not a function or a \{handler, description\?, parameters\?, returns\?\} entry$/);
      }
    }
    const noHandler = [{ global: 't', functions: { f: { description: 'no handler' } as never } }];
    await assert.rejects(c.run({ program: 'x', bindings: noHandler }), /binding "t"\."f" is not a function/);
    assert.equal(sent, 0);
    await c.close();
    server.dispose();
  });
});
