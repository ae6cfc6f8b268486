/**
 * The client against a scripted fake daemon (test/fake-daemon.ts): wire-level details and the
 * failure paths (kill, hang) that need no Python.
 */
import './tmp-hygiene.js';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import {
  ClientClosedError,
  CodeRunClient,
  CodeRunError,
  ConnectionLostError,
  InvalidParamsError,
  LOSSLESS_PREFIX,
  DaemonNotFoundError,
} from '../src/node.js';
import type { JsonValue, LogEvent, StartOptions } from '../src/node.js';

const fake = fileURLToPath(new URL('./fake-daemon.js', import.meta.url));

function start(opts: StartOptions = {}): Promise<CodeRunClient> {
  return CodeRunClient.start({ command: process.execPath, args: [fake], ...opts });
}

function script(steps: JsonValue[], ret: JsonValue = '$results'): string {
  return JSON.stringify({ steps, return: ret });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('client against the fake daemon', () => {
  test('initialize result, round trip, close', async () => {
    const c = await start();
    assert.equal(c.initializeResult.serverInfo.name, 'coderun-rpc');
    const r = await c.run({ program: script([{ log: 'hi' }], { ok: 1 }) });
    assert.deepEqual(r.value, { ok: 1 });
    assert.deepEqual(r.logs, ['hi']);
    const pid = c.pid as number;
    await c.close();
    assert.equal(alive(pid), false);
    await c.close(); // idempotent
    await assert.rejects(c.run({ program: '{}' }), ClientClosedError);
  });

  test('binding results travel as canonical lossless JSON; lossy ones are refused', async () => {
    const c = await start();
    try {
      const values: Record<string, unknown> = {
        big: 2 ** 60,
        echo: 'echo',
        nan: NaN,
        negzero: -0,
        undef: undefined,
        fn: () => 1,
        bigint: 10n,
        date: new Date(0),
        cycle: (() => {
          const o: Record<string, unknown> = {};
          o['o'] = o;
          return o;
        })(),
        nul: null,
        lone: '\ud800',
      };
      const functions = Object.fromEntries(
        Object.entries(values).map(([k, v]) => [k, (args: JsonValue) => (v === 'echo' ? args : v)]),
      );
      const calls = Object.keys(values).map((k) => ({ call: ['tools', k, { k }] }));
      const r = await c.run({ program: script(calls), bindings: [{ global: 'tools', functions }] });
      const out = r.value as { raw?: string; error?: string }[];
      const by = Object.fromEntries(Object.keys(values).map((k, i) => [k, out[i]]));
      assert.deepEqual(by['big'], { raw: '1152921504606846976' });
      assert.deepEqual(by['echo'], { raw: '{"k":"echo"}' });
      assert.deepEqual(by['nul'], { raw: 'null' });
      assert.deepEqual(by['lone'], { raw: '"\\ud800"' });
      for (const k of ['nan', 'negzero', 'undef', 'fn', 'bigint', 'date', 'cycle']) {
        const e = by[k]?.error;
        assert.ok(e?.startsWith(`${LOSSLESS_PREFIX}: `), `${k}: ${JSON.stringify(by[k])}`);
      }
    } finally {
      await c.close();
    }
  });

  test('a throwing binding becomes an error with its message, verbatim', async () => {
    const c = await start();
    try {
      const r = await c.run({
        program: script([
          ['tools', 'boom', null],
          ['tools', 'str', null],
          ['tools', 'empty', null],
          ['tools', 'sync', null],
        ].map((call) => ({ call }))),
        bindings: [
          {
            global: 'tools',
            functions: {
              boom: async () => {
                throw new TypeError('no such user');
              },
              str: () => Promise.reject('plain string'),
              empty: () => {
                throw new Error('');
              },
              sync: () => 42,
            },
          },
        ],
      });
      assert.deepEqual(r.value, [{ error: 'no such user' }, { error: 'plain string' }, { error: '' }, { raw: '42' }]);
    } finally {
      await c.close();
    }
  });

  test('a Map declares names an object literal cannot hold', async () => {
    const c = await start();
    try {
      const functions = new Map([['__proto__', () => 'proto-callable']]);
      const r = await c.run({ program: script([{ call: ['tools', '__proto__', {}] }]), bindings: [{ global: 'tools', functions }] });
      assert.deepEqual(r.value, [{ raw: '"proto-callable"' }]);
    } finally {
      await c.close();
    }
  });

  test('onLog sees every entry before the result, in order', async () => {
    const c = await start();
    try {
      const seen: LogEvent[] = [];
      let resolved = false;
      const p = c.run({ program: script([{ log: 'a' }, { log: 'b' }, { log: 'c' }], null), onLog: (e) => {
        assert.equal(resolved, false);
        seen.push(e);
      } });
      const r = await p;
      resolved = true;
      assert.deepEqual(seen.map((e) => [e.index, e.text]), [[0, 'a'], [1, 'b'], [2, 'c']]);
      assert.deepEqual(r.logs, ['a', 'b', 'c']);
    } finally {
      await c.close();
    }
  });

  test('abort mid-binding: the run resolves as abort, the binding sees its signal', async () => {
    const c = await start();
    try {
      const ac = new AbortController();
      let bindingSignal: AbortSignal | undefined;
      const r = await c.run({
        program: script([{ call: ['tools', 'wait', null] }]),
        signal: ac.signal,
        bindings: [{
          global: 'tools',
          functions: {
            wait: (_args, signal) => {
              bindingSignal = signal;
              setTimeout(() => ac.abort(), 20);
              return new Promise((resolve) => signal.addEventListener('abort', () => resolve('late')));
            },
          },
        }],
      });
      assert.equal(r.error?.kind, 'abort');
      assert.equal(r.error?.message, 'run cancelled by the client');
      assert.equal(bindingSignal?.aborted, true);
    } finally {
      await c.close();
    }
  });

  test('an already-aborted signal still yields the abort result', async () => {
    const c = await start();
    try {
      const r = await c.run({ program: script([{ sleep: 5000 }]), signal: AbortSignal.abort() });
      assert.equal(r.error?.kind, 'abort');
    } finally {
      await c.close();
    }
  });

  test('one signal shared by 20 runs: one cancel each, no listener-leak warning', async () => {
    const c = await start();
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      const ac = new AbortController();
      const runs = Array.from({ length: 20 }, () => c.run({ program: script([{ sleep: 20000 }]), signal: ac.signal }));
      const done = await c.run({ program: script([], 'quick'), signal: ac.signal });
      assert.equal(done.value, 'quick');
      ac.abort();
      for (const r of await Promise.all(runs)) assert.equal(r.error?.kind, 'abort');
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(warnings, []);
    } finally {
      process.off('warning', onWarning);
      await c.close();
    }
  });

  test('JSON-RPC errors are typed', async () => {
    const c = await start();
    try {
      await assert.rejects(c.run({ program: 5 as unknown as string }), (e: unknown) => {
        assert.ok(e instanceof InvalidParamsError);
        assert.equal(e.code, -32602);
        assert.equal(e.message, 'program must be a string');
        return true;
      });
    } finally {
      await c.close();
    }
  });

  test('params that are not lossless JSON are refused before sending', async () => {
    const c = await start();
    try {
      await assert.rejects(c.run({ program: 'x', limits: { maxWallMs: NaN } }), /lossless JSON/);
      await assert.rejects(
        c.run({ program: 'x', bindings: [{ global: 't', functions: { f: 1 as never } }] }),
        /is not a function/,
      );
    } finally {
      await c.close();
    }
  });

  test('daemon killed mid-run: every pending run rejects at once', async () => {
    const c = await start();
    try {
      const slow = [1, 2, 3].map(() => c.run({ program: script([{ sleep: 20000 }]) }));
      const dying = c.run({ program: script([{ sleep: 50 }, { die: 'SIGKILL' }]) });
      const t0 = Date.now();
      for (const p of [...slow, dying]) {
        await assert.rejects(p, (e: unknown) => {
          assert.ok(e instanceof ConnectionLostError, String(e));
          assert.equal(e.signal, 'SIGKILL');
          assert.match(e.message, /killed by SIGKILL/);
          return true;
        });
      }
      assert.ok(Date.now() - t0 < 5000, 'rejected promptly');
      await assert.rejects(c.run({ program: '{}' }), ConnectionLostError);
      assert.equal(c.isOpen, false);
    } finally {
      await c.close();
    }
  });

  test('close() with live runs: they resolve as abort first', async () => {
    const c = await start();
    const runs = [1, 2].map(() => c.run({ program: script([{ sleep: 20000 }]) }));
    await new Promise((r) => setTimeout(r, 50));
    await c.close();
    for (const r of await Promise.all(runs)) {
      assert.equal(r.error?.kind, 'abort');
      assert.equal(r.error?.message, 'server is shutting down');
    }
  });

  test('close() never hangs: a daemon ignoring shutdown and exit is killed', async () => {
    const c = await start({ env: { FAKE_IGNORE_SHUTDOWN: '1' }, shutdownTimeoutMs: 300, exitTimeoutMs: 300 });
    const pending = c.run({ program: script([{ sleep: 20000 }]) });
    const rejected = assert.rejects(pending, ConnectionLostError);
    const pid = c.pid as number;
    const t0 = Date.now();
    await c.close();
    assert.ok(Date.now() - t0 < 6000, `close took ${Date.now() - t0} ms`);
    assert.equal(alive(pid), false);
    await rejected;
  });

  test('a missing binary fails start() with a clear error', async () => {
    await assert.rejects(CodeRunClient.start({ command: '/nonexistent/coderun-rpc' }), (e: unknown) => {
      assert.ok(e instanceof DaemonNotFoundError);
      assert.equal(e.message, 'command: "/nonexistent/coderun-rpc" does not exist');
      return true;
    });
  });

  test('a daemon that exits during start-up fails start() with its stderr', async () => {
    await assert.rejects(
      CodeRunClient.start({ command: process.execPath, args: ['-e', 'console.error("bad config"); process.exit(2)'] }),
      (e: unknown) => {
        assert.ok(e instanceof ConnectionLostError, String(e));
        assert.match(e.message, /exited with code 2 \(stderr: bad config\)/);
        return true;
      },
    );
  });

  test('a daemon that exits right after answering initialize: start() rejects with its exit, every time', async () => {
    for (let i = 0; i < 10; i++) {
      await assert.rejects(start({ env: { FAKE_EXIT_AFTER_INITIALIZE: '3' } }), (e: unknown) => {
        assert.ok(e instanceof ConnectionLostError, `start ${i}: ${String(e)}`);
        assert.equal(e.exitCode, 3, `start ${i}: ${e.message}`);
        assert.match(e.message, /^coderun-rpc exited with code 3 \(stderr: fake: exiting after initialize\)/, `start ${i}`);
        return true;
      });
    }
  });
});
