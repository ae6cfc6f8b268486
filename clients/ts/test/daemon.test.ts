/** Integration tests against the real daemon (test/real-daemon.ts says which binary). */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  CodeRunClient,
  ConnectionLostError,
  InvalidParamsError,
  LOSSLESS_PREFIX,
  MAX_MESSAGE_BYTES,
  QueueFullError,
} from '../src/node.js';
import type { BindingFunction, JsonValue, LogEvent } from '../src/node.js';
import { alive, bin, ok, py, skip, start } from './real-daemon.js';

describe('against the real daemon', { skip }, () => {
  let c: CodeRunClient;
  before(async () => {
    c = await start();
  });
  after(async () => {
    await c?.close();
  });

  test('initialize reports the daemon', () => {
    assert.equal(c.initializeResult.serverInfo.name, 'coderun-rpc');
    assert.deepEqual(c.initializeResult.capabilities.languages, ['python']);
    assert.equal(c.initializeResult.capabilities.logStreaming, true);
  });

  test('round trip: value, logs, stats', async () => {
    const r = await c.run({ program: py('print("hi")', 'print("there")', 'return {"a": [1, 2.5, None, True, "é"], "big": 2**60}') });
    assert.deepEqual(ok(r), { a: [1, 2.5, null, true, 'é'], big: 2 ** 60 });
    assert.deepEqual(r.logs, ['hi', 'there']);
    for (const k of ['wallMs', 'cpuMs', 'maxRssKb', 'queueMs', 'bindingCalls', 'logBytes'] as const) {
      assert.equal(typeof r.stats[k], 'number', k);
    }
    const none = await c.run({ program: 'x = 1' });
    assert.equal(ok(none), null);
    assert.ok('value' in none);
  });

  test('a failing program resolves with a classified error', async () => {
    const r = await c.run({ program: py('x = 1', '1/0') });
    assert.equal(r.error?.kind, 'exception');
    assert.equal(r.error?.exceptionType, 'ZeroDivisionError');
    assert.equal(r.error?.line, 2);
    assert.equal(r.value, undefined);
    const t = await c.run({ program: 'while True:\n    pass', limits: { maxWallMs: 300 } });
    assert.equal(t.error?.kind, 'timeout');
    assert.equal(t.error?.budget, 'wall');
  });

  test('bindings resolve, concurrently, with exact numbers both ways', async () => {
    const seen: JsonValue[] = [];
    const r = await c.run({
      program: py(
        'import asyncio',
        'a = await tools.echo({"n": 1, "big": 2**60})',
        'b, d = await asyncio.gather(tools.echo(q="x"), tools["my-tool"]())',
        'big = await tools.big()',
        'return [a, b, d, big == 2**60 and type(big) is int, bindings_ok]',
      ).replace('bindings_ok', 'True'),
      bindings: [{
        global: 'tools',
        functions: {
          echo: async (args) => {
            seen.push(args);
            return { echoed: args };
          },
          'my-tool': (args) => ({ got: args }),
          big: () => 2 ** 60,
        },
      }],
    });
    assert.deepEqual(ok(r), [{ echoed: { n: 1, big: 2 ** 60 } }, { echoed: { q: 'x' } }, { got: null }, true, true]);
    assert.equal(r.stats.bindingCalls, 4);
    assert.deepEqual(seen[0], { n: 1, big: 2 ** 60 });
  });

  test('a rejecting binding raises RuntimeError with its message', async () => {
    const r = await c.run({
      program: py(
        'out = []',
        'for name in ["fail", "fails"]:',
        '    try:',
        '        await tools[name]({})',
        '    except RuntimeError as e:',
        '        out.append([type(e).__name__, str(e)])',
        'return out',
      ),
      bindings: [{
        global: 'tools',
        functions: {
          fail: async () => {
            throw new Error('nope');
          },
          fails: () => {
            throw 'plain string';
          },
        },
      }],
    });
    assert.deepEqual(ok(r), [['RuntimeError', 'nope'], ['RuntimeError', 'plain string']]);
  });

  test('a rejection whose name or system code has a Python built-in type raises that type', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
    const r = await c.run({
      program: py(
        'out = []',
        'for name in ["refused", "typed", "timeout"]:',
        '    try:',
        '        await tools[name]({})',
        '    except Exception as e:',
        '        out.append([type(e).__name__, str(e)])',
        'return out',
      ),
      bindings: [{
        global: 'tools',
        functions: {
          refused: () => {
            throw refused;
          },
          typed: () => {
            throw new TypeError('q must be a string');
          },
          timeout: async () => {
            await new Promise((resolve) => setTimeout(resolve, 5));
            throw Object.assign(new Error('the call timed out'), { name: 'TimeoutError' });
          },
        },
      }],
    });
    assert.deepEqual(ok(r), [
      ['ConnectionRefusedError', 'connect ECONNREFUSED 127.0.0.1:9'],
      ['TypeError', 'q must be a string'],
      ['TimeoutError', 'the call timed out'],
    ]);
  });

  test('errorClass: the rejection raises the declared class with the member name', async () => {
    const r = await c.run({
      program: py(
        'try:',
        '    await tools.boom({})',
        'except ToolError as e:',
        '    return [type(e).__name__, getattr(e, "tool-name"), str(e), isinstance(e, Exception)]',
      ),
      bindings: [{
        global: 'tools',
        functions: { boom: () => Promise.reject(new Error('kaput')) },
        errorClass: { name: 'ToolError', memberNameProperty: 'tool-name' },
      }],
    });
    assert.deepEqual(ok(r), ['ToolError', 'boom', 'kaput', true]);
  });

  test('non-lossless binding results are refused with the contract message, never coerced', async () => {
    const cyc: Record<string, unknown> = {};
    cyc['self'] = cyc;
    const bad: Record<string, unknown> = {
      nan: NaN,
      inf: Infinity,
      negzero: { x: -0 },
      undef: undefined,
      bigint: 1n,
      date: new Date(0),
      fn: () => 1,
      cycle: cyc,
    };
    const functions: Record<string, BindingFunction> = {};
    for (const [k, v] of Object.entries(bad)) functions[k] = () => v;
    const r = await c.run({
      program: py(
        'out = {}',
        `for name in ${JSON.stringify(Object.keys(bad))}:`,
        '    try:',
        '        out[name] = ["ok", await tools[name]()]',
        '    except RuntimeError as e:',
        '        out[name] = str(e)',
        'return out',
      ),
      bindings: [{ global: 'tools', functions }],
    });
    const out = ok(r) as Record<string, string>;
    for (const k of Object.keys(bad)) {
      assert.equal(typeof out[k], 'string', `${k}: ${JSON.stringify(out[k])}`);
      assert.ok(out[k]?.startsWith(`${LOSSLESS_PREFIX}: `), `${k}: ${out[k]}`);
    }
    assert.match(out['nan'] as string, /NaN/);
    assert.match(out['negzero'] as string, /negative zero .*\$\.x/);
  });

  test('a binding result over the 64 MiB message cap is answered with an error naming it', async () => {
    const r = await c.run({
      program: py('try:', '    await tools.huge()', 'except RuntimeError as e:', '    return str(e)'),
      bindings: [{ global: 'tools', functions: { huge: () => 'x'.repeat(MAX_MESSAGE_BYTES) } }],
      limits: { maxWallMs: 30000 },
    });
    assert.match(ok(r) as string, /67108864-byte/);
  });

  test('a thrown error over the 64 MiB message cap is answered, cut to fit, not dropped', async () => {
    const t0 = Date.now();
    const r = await c.run({
      program: py(
        'try:',
        '    await tools.loud()',
        'except RuntimeError as e:',
        '    s = str(e)',
        '    return [len(s.encode()), s[:3], s[-20:]]',
      ),
      bindings: [{ global: 'tools', functions: { loud: () => { throw new Error('y'.repeat(70 << 20)); } } }],
      limits: { maxWallMs: 30000 },
    });
    const [bytes, head, tail] = ok(r) as [number, string, string];
    assert.ok(bytes < MAX_MESSAGE_BYTES && bytes > MAX_MESSAGE_BYTES - 1024, `message of ${bytes} bytes`);
    assert.equal(head, 'yyy');
    assert.equal(tail, `${'y'.repeat(7)}… [truncated]`);
    assert.ok(Date.now() - t0 < 20000, `took ${Date.now() - t0} ms`);
  });

  test('a value that throws while being serialized is refused with the lossless prefix', async () => {
    const getter = { get a() { throw new Error('getter boom'); } };
    const keys = new Proxy({}, { ownKeys() { throw new Error('ownKeys boom'); } });
    const r = await c.run({
      program: py(
        'out = []',
        'for name in ["getter", "keys"]:',
        '    try:',
        '        await tools[name]()',
        '    except RuntimeError as e:',
        '        out.append(str(e))',
        'return out',
      ),
      bindings: [{ global: 'tools', functions: { getter: () => getter, keys: () => keys } }],
    });
    assert.deepEqual(ok(r), [
      `${LOSSLESS_PREFIX}: value could not be walked: getter boom (at $.a)`,
      `${LOSSLESS_PREFIX}: value could not be walked: ownKeys boom (at $)`,
    ]);
  });

  test('strings and depth survive: lone surrogates, 12 000-deep results', async () => {
    let deep: JsonValue = 0;
    for (let i = 0; i < 12000; i++) deep = [deep];
    const r = await c.run({
      program: py(
        'a = await tools.echo("\\ud800é😀")',
        'd = await tools.deep()',
        'n = 0',
        'while isinstance(d, list):',
        '    d = d[0]',
        '    n += 1',
        'return [a == "\\ud800é😀", n, a]',
      ),
      bindings: [{ global: 'tools', functions: { echo: (x) => x, deep: () => deep } }],
    });
    assert.deepEqual(ok(r), [true, 12000, '\ud800é😀']);
  });

  test('streaming: continued entries and the truncation marker', async () => {
    const events: LogEvent[] = [];
    const r = await c.run({
      program: py('import sys', 'print("partial", end="", flush=True)', 'await tools.noop()', 'print(" rest")'),
      bindings: [{ global: 'tools', functions: { noop: () => null } }],
      onLog: (e) => events.push(e),
    });
    ok(r);
    assert.deepEqual(events, [
      { index: 0, text: 'partial', continued: false },
      { index: 0, text: ' rest', continued: true },
    ]);
    assert.deepEqual(r.logs, ['partial rest']);
    const marker: LogEvent[] = [];
    const t = await c.run({
      program: 'for i in range(1000):\n    print("x" * 100)',
      limits: { maxLogBytes: 1000 },
      onLog: (e) => marker.push(e),
    });
    assert.equal(t.logs.at(-1), '[coderun] log capture truncated at 1000 bytes');
    assert.equal(marker.at(-1)?.text, t.logs.at(-1));
    assert.equal(marker.length, t.logs.length);
  });

  test('a run decided mid-binding cancels the call: the binding signal fires', async () => {
    let called = false;
    let signal: AbortSignal | undefined;
    const r = await c.run({
      program: 'return await tools.slow()',
      limits: { maxWallMs: 1500 },
      bindings: [{
        global: 'tools',
        functions: {
          slow: (_args, s) => {
            called = true;
            signal = s;
            return new Promise((resolve) => s.addEventListener('abort', () => resolve('late')));
          },
        },
      }],
    });
    assert.equal(r.error?.kind, 'timeout');
    assert.equal(r.error?.budget, 'wall');
    assert.equal(called, true, 'the program reached its binding call within the wall clock');
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(signal?.aborted, true);
    // The daemon's $/cancelRequest, or the client itself when the run settles first.
    assert.match(String((signal?.reason as Error).message), /no longer needs|has settled/);
  });

  test('invalid params reject with the daemon message, nothing runs', async () => {
    await assert.rejects(
      c.run({ program: 'return 1', bindings: [{ global: 'class', functions: {} }] }),
      (e: unknown) => {
        assert.ok(e instanceof InvalidParamsError, String(e));
        assert.equal(e.code, -32602);
        assert.equal(e.message, 'bindings[0].global "class" is not a usable Python identifier');
        return true;
      },
    );
  });

  test('20 concurrent runs, each with its own binding traffic', async () => {
    const runs = Array.from({ length: 20 }, (_, i) =>
      c.run({
        program: py(`x = await tools.twice(${i})`, `print("run", ${i})`, 'return x'),
        bindings: [{ global: 'tools', functions: { twice: (n) => (n as number) * 2 } }],
        limits: { maxWallMs: 30000 },
      }),
    );
    const results = await Promise.all(runs);
    results.forEach((r, i) => {
      assert.equal(ok(r), i * 2);
      assert.deepEqual(r.logs, [`run ${i}`]);
    });
  });

  test('abort mid-binding: resolves as abort with the logs so far; the binding sees its signal', async () => {
    const ac = new AbortController();
    let bindingSignal: AbortSignal | undefined;
    const r = await c.run({
      program: py('print("before")', 'await tools.wait({})', 'print("after")'),
      signal: ac.signal,
      bindings: [{
        global: 'tools',
        functions: {
          wait: (_args, signal) => {
            bindingSignal = signal;
            setTimeout(() => ac.abort(), 50);
            return new Promise((resolve) => signal.addEventListener('abort', () => resolve(null)));
          },
        },
      }],
    });
    assert.equal(r.error?.kind, 'abort');
    assert.equal(r.error?.message, 'run cancelled by the client');
    assert.deepEqual(r.logs, ['before']);
    assert.equal(bindingSignal?.aborted, true);
  });

  test('abort mid-loop, and an already-aborted signal', async () => {
    const t0 = Date.now();
    const r = await c.run({ program: 'while True:\n    pass', signal: AbortSignal.timeout(300) });
    assert.equal(r.error?.kind, 'abort');
    assert.ok(Date.now() - t0 < 10000);
    const pre = await c.run({ program: 'import time\ntime.sleep(20)', signal: AbortSignal.abort() });
    assert.equal(pre.error?.kind, 'abort');
  });

  test('streaming: onLog in index order, all before the result, interleaved with bindings', async () => {
    const events: LogEvent[] = [];
    let settled = false;
    const order: string[] = [];
    const p = c.run({
      program: py('for i in range(5):', '    print("line", i)', '    await tools.tick(i)', 'return "done"'),
      bindings: [{
        global: 'tools',
        functions: {
          tick: (i) => {
            order.push(`tick ${String(i)}`);
            return null;
          },
        },
      }],
      onLog: (e) => {
        assert.equal(settled, false, 'onLog after the result');
        events.push(e);
        order.push(`log ${e.index}`);
      },
    });
    const r = await p;
    settled = true;
    assert.equal(ok(r), 'done');
    assert.deepEqual(events.map((e) => e.index), [0, 1, 2, 3, 4]);
    assert.deepEqual(events.map((e) => e.text), ['line 0', 'line 1', 'line 2', 'line 3', 'line 4']);
    assert.deepEqual(r.logs, events.map((e) => e.text));
    for (let i = 0; i < 5; i++) {
      assert.ok(order.indexOf(`log ${i}`) < order.indexOf(`tick ${i}`), `log ${i} before tick ${i}: ${order}`);
    }
  });
});

describe('daemon lifecycle', { skip }, () => {
  test('daemon killed mid-run: the pending runs reject promptly', async () => {
    const k = await start();
    try {
      let started!: () => void;
      const live = new Promise<void>((r) => (started = r));
      const pending = [1, 2].map(() =>
        k.run({ program: py('print("started")', 'import time', 'time.sleep(30)'), onLog: () => started() }),
      );
      const rejected = pending.map((p) => assert.rejects(p, ConnectionLostError));
      await live;
      const t0 = Date.now();
      process.kill(k.pid as number, 'SIGKILL');
      await Promise.all(rejected);
      assert.ok(Date.now() - t0 < 5000, `took ${Date.now() - t0} ms`);
      await assert.rejects(k.run({ program: 'return 1' }), ConnectionLostError);
    } finally {
      await k.close();
    }
  });

  test('runs made while a killed daemon is going away reject with its signal, never "connection is closed"', async () => {
    for (let i = 0; i < 6; i++) {
      const k = await start();
      try {
        process.kill(k.pid as number, 'SIGKILL');
        // One run per event-loop turn until the loss is recorded: some land after the daemon's
        // stdout closed but before its exit is known.
        const runs: Promise<unknown>[] = [];
        const runOnce = () => runs.push(k.run({ program: 'return 1' }).catch((e: unknown) => e));
        while (k.isOpen) {
          runOnce();
          await new Promise((r) => setImmediate(r));
        }
        runOnce();
        for (const [j, e] of (await Promise.all(runs)).entries()) {
          assert.ok(e instanceof ConnectionLostError, `daemon ${i}, run ${j}: ${String(e)}`);
          assert.equal(e.signal, 'SIGKILL', `daemon ${i}, run ${j}: ${e.message}`);
          assert.match(e.message, /^coderun-rpc was killed by SIGKILL/, `daemon ${i}, run ${j}`);
        }
      } finally {
        await k.close();
      }
    }
  });

  test('a daemon that exits at start: every start rejects with its exit code and stderr', async () => {
    for (let i = 0; i < 30; i++) {
      await assert.rejects(CodeRunClient.start({ command: bin, env: { CODERUN_CPU_SECONDS: '0' } }), (e: unknown) => {
        assert.ok(e instanceof ConnectionLostError, `start ${i}: ${String(e)}`);
        assert.equal(e.exitCode, 2, `start ${i}: ${e.message}`);
        assert.match(e.message, /^coderun-rpc exited with code 2 \(stderr: .*CODERUN_CPU_SECONDS/, `start ${i}`);
        return true;
      });
    }
  });

  test('a full queue rejects with QueueFullError (-32001)', async () => {
    const k = await CodeRunClient.start({
      command: bin,
      env: { CODERUN_MAX_CONCURRENT_RUNS: '1', CODERUN_MAX_QUEUED_RUNS: '0', CODERUN_WARM_POOL: '0', CODERUN_GRACE_MS: '200' },
    });
    try {
      let started!: () => void;
      const live = new Promise<void>((r) => (started = r));
      const ac = new AbortController();
      const first = k.run({ program: py('print("started")', 'import time', 'time.sleep(30)'), onLog: () => started(), signal: ac.signal });
      await live;
      await assert.rejects(k.run({ program: 'return 1' }), (e: unknown) => {
        assert.ok(e instanceof QueueFullError, String(e));
        assert.equal(e.code, -32001);
        return true;
      });
      ac.abort();
      assert.equal((await first).error?.kind, 'abort');
    } finally {
      await k.close();
    }
  });

  test('close() with live runs (one inside a binding): they resolve as abort, the daemon exits', async () => {
    const k = await start();
    const pid = k.pid as number;
    let started!: () => void;
    const live = new Promise<void>((r) => (started = r));
    let inBinding!: () => void;
    const stuck = new Promise<void>((r) => (inBinding = r));
    const runs = [1, 2].map(() =>
      k.run({ program: py('print("started")', 'import time', 'time.sleep(30)'), onLog: () => started() }),
    );
    // A binding that never settles and ignores its signal must not hold close() up either.
    runs.push(k.run({
      program: 'await tools.forever()',
      bindings: [{ global: 'tools', functions: { forever: () => (inBinding(), new Promise(() => {})) } }],
    }));
    await live;
    await stuck;
    const t0 = Date.now();
    await k.close();
    assert.ok(Date.now() - t0 < 15000, `close took ${Date.now() - t0} ms`);
    for (const r of await Promise.all(runs)) {
      assert.equal(r.error?.kind, 'abort');
      assert.equal(r.error?.message, 'server is shutting down');
    }
    assert.equal(alive(pid), false);
  });
});
