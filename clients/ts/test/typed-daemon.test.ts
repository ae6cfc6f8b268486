/**
 * Typed bindings against the real daemon (test/real-daemon.ts says which binary): the program
 * calls a declared function like a Python one, the daemon checks arguments and results against
 * the schemas, and `describe` returns the stubs the program sees.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CodeRunClient, defineFunction, InvalidParamsError } from '../src/node.js';
import type { Binding, JsonValue } from '../src/node.js';
import { ok, py, skip, start } from './real-daemon.js';

/** A `tools` binding whose `search` is typed and whose `echo` is a bare handler; records calls. */
function toolsBinding(result: (q: string, limit: number | undefined) => unknown = (q, limit) => [`${q}:${limit ?? 'none'}`]) {
  const calls: JsonValue[] = [];
  const search = defineFunction({
    description: 'Search the docs.',
    parameters: {
      type: 'object',
      properties: {
        q: { type: 'string', description: 'what to look for' },
        limit: { type: 'integer', default: 5 },
      },
      required: ['q'],
    },
    returns: { type: 'array', items: { type: 'string' } },
    handler: (args) => {
      calls.push(args);
      return result(args.q, args.limit) as string[];
    },
  });
  const binding: Binding = { global: 'tools', functions: { search, echo: (args) => args } };
  return { binding, calls };
}

/** The program's `[exception type, message]` for `call`, or `["no exception", value]`. */
function catching(call: string): string {
  return py('try:', `    return ["no exception", ${call}]`, 'except Exception as e:', '    return [type(e).__name__, str(e)]');
}

describe('typed bindings against the real daemon', { skip }, () => {
  let c: CodeRunClient;
  before(async () => {
    c = await start();
  });
  after(async () => {
    await c?.close();
  });

  test('typed round trip: positional and keyword arguments reach the handler by name', async () => {
    const { binding, calls } = toolsBinding();
    const r = await c.run({
      program: py(
        'a = await tools.search("x", limit=2)',
        'b = await tools.search(q="y")',
        'c = await tools.search("z", 3)',
        'd = await tools.echo({"k": 1})',
        'return [a, b, c, d]',
      ),
      bindings: [binding],
    });
    assert.deepEqual(ok(r), [['x:2'], ['y:none'], ['z:3'], { k: 1 }]);
    // Exactly what the program passed: the schema's default is not filled in.
    assert.deepEqual(calls, [{ q: 'x', limit: 2 }, { q: 'y' }, { q: 'z', limit: 3 }]);
  });

  test('describe returns the stubs the program sees, valid Python', async () => {
    const { binding, calls } = toolsBinding();
    const stubs = await c.describe({ bindings: [binding], limits: { maxWallMs: 4321 } });
    assert.match(stubs, /^class Tools:$/m);
    assert.match(stubs, /async def search\(self, q: str/);
    assert.match(stubs, /Search the docs\./);
    assert.match(stubs, /what to look for/);
    assert.match(stubs, /async def echo\(self, args: Any = None\) -> Any/);
    assert.match(stubs, /^tools: Tools$/m);
    assert.match(stubs, /4321/, 'the header carries the effective wall budget');
    assert.deepEqual(calls, []);
    const parsed = await c.run({ program: py('import ast', `ast.parse(${JSON.stringify(stubs)})`, 'return True') });
    assert.equal(ok(parsed), true);
  });

  test('a wrong argument never reaches the handler: the program gets TypeError', async () => {
    const { binding, calls } = toolsBinding();
    for (const call of ['await tools.search(5)', 'await tools.search("a", 1, 2)', 'await tools.search(limit=1)']) {
      const r = await c.run({ program: catching(call), bindings: [binding] });
      const [type, message] = ok(r) as [string, string];
      assert.equal(type, 'TypeError', `${call}: ${message}`);
      assert.match(message, /search/, call);
    }
    const r = await c.run({ program: catching('await tools.search(5)'), bindings: [binding] });
    assert.match((ok(r) as string[])[1] as string, /\/q/, 'the failing location is named');
    assert.deepEqual(calls, []);
  });

  test('a result breaking `returns` raises in the program instead of returning', async () => {
    const { binding, calls } = toolsBinding(() => [1]);
    const r = await c.run({ program: catching('await tools.search("x")'), bindings: [binding] });
    const [type, message] = ok(r) as [string, string];
    assert.equal(type, 'RuntimeError', message);
    assert.match(message, /schema/);
    assert.match(message, /\/0/, 'the failing location is named');
    assert.deepEqual(calls, [{ q: 'x' }]);
  });

  test('an invalid schema rejects run and describe with InvalidParamsError naming its path', async () => {
    const remote = defineFunction({
      parameters: { type: 'object', properties: { q: { $ref: 'https://example.com/q.json' } } },
      handler: () => null,
    });
    const notObject = { handler: () => null, parameters: { type: 'array' } as never };
    for (const f of [remote, notObject]) {
      const bindings: Binding[] = [{ global: 'tools', functions: { ok: () => 1, f } }];
      for (const call of [() => c.describe({ bindings }), () => c.run({ program: 'return 1', bindings })]) {
        await assert.rejects(call, (e: unknown) => {
          assert.ok(e instanceof InvalidParamsError, String(e));
          assert.equal(e.code, -32602);
          assert.match(e.message, /bindings\[0\]\.functions\[1\]\.parameters/);
          return true;
        });
      }
    }
  });
});
