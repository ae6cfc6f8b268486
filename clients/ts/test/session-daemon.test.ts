/** Persistent sessions against the real daemon (test/real-daemon.ts says which binary). */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { CodeRunClient, InvalidParamsError, SessionLimitError, SessionNotOpenError } from '../src/node.js';
import type { SessionClosedEvent } from '../src/node.js';
import { alive, bin, ok, py, skip } from './real-daemon.js';

/** A daemon with a small session cap, so the cap is reachable. */
const start = (env: Record<string, string> = {}) =>
  CodeRunClient.start({ command: bin, env: { CODERUN_GRACE_MS: '200', CODERUN_MAX_SESSIONS: '3', ...env } });

/** Resolves with the first `session/closed` for `id`. */
function closedEvent(c: CodeRunClient, id: string): Promise<SessionClosedEvent> {
  return new Promise((resolve) => {
    const off = c.onSessionClosed((e) => {
      if (e.sessionId !== id) return;
      off();
      resolve(e);
    });
  });
}

describe('sessions against the real daemon', { skip }, () => {
  let c: CodeRunClient;
  before(async () => {
    c = await start();
  });
  after(async () => {
    await c?.close();
  });

  test('capabilities announce sessions', () => {
    assert.deepEqual(c.initializeResult.capabilities.sessions?.max, 3);
    assert.equal(typeof c.initializeResult.capabilities.sessions?.idleTimeoutMs, 'number');
  });

  test('state is kept from run to run; result.session counts the runs', async () => {
    await using s = await c.openSession();
    const first = await s.run({ program: py('import math', 'data = [i * i for i in range(10)]', 'def total():', '    return sum(data)') });
    assert.equal(ok(first), null);
    assert.deepEqual(first.session, { id: s.id, alive: true, runs: 1 });
    const second = await s.run({ program: 'return total() + math.floor(2.5)' });
    assert.equal(ok(second), 285 + 2);
    assert.equal(second.session?.runs, 2);
    const failed = await s.run({ program: py('data.append(1)', '1/0') });
    assert.equal(failed.error?.kind, 'exception');
    assert.equal(failed.session?.alive, true);
    assert.equal(ok(await s.run({ program: 'return len(data)' })), 11);
  });

  test('bindings are per run: one kept from an earlier run raises when called', async () => {
    await using s = await c.openSession();
    const bindings = [{ global: 'tools', functions: { twice: (a: unknown) => (a as number) * 2 } }];
    assert.equal(ok(await s.run({ program: 'kept = tools.twice\nreturn await kept(21)', bindings })), 42);
    const r = await s.run({ program: 'try:\n    await kept(1)\nexcept RuntimeError as e:\n    return str(e)' });
    assert.match(String(ok(r)), /belongs to a finished run/);
  });

  test('fork copies the state; the two diverge', async (ctx) => {
    if (!c.initializeResult.capabilities.sessions?.fork) return ctx.skip('the daemon cannot fork sessions in this tier');
    await using s = await c.openSession();
    ok(await s.run({ program: 'x = [1, 2]' }));
    await using t = await s.fork();
    assert.notEqual(t.id, s.id);
    assert.deepEqual(ok(await t.run({ program: 'x.append(3)\nreturn x' })), [1, 2, 3]);
    assert.deepEqual(ok(await s.run({ program: 'x.append(4)\nreturn x' })), [1, 2, 4]);
    assert.deepEqual(ok(await t.run({ program: 'return x' })), [1, 2, 3]);
  });

  test('close: later calls fail with SessionNotOpenError naming the session; double close is fine', async () => {
    const s = await c.openSession();
    await s.close();
    await s.close();
    await assert.rejects(s.run({ program: 'return 1' }), (e: unknown) => {
      assert.ok(e instanceof SessionNotOpenError);
      assert.equal(e.sessionId, s.id);
      assert.equal(e.state, 'closed');
      return true;
    });
    // The daemon's own answer for the same id, without the client's knowledge.
    await assert.rejects(c.run({ program: 'return 1' }, s.id), (e: unknown) => {
      assert.ok(e instanceof SessionNotOpenError);
      assert.equal(e.state, 'closed');
      return true;
    });
    await assert.rejects(c.run({ program: 'return 1' }, 'no-such-session'), (e: unknown) => {
      assert.ok(e instanceof SessionNotOpenError);
      assert.equal(e.state, 'unknown');
      return true;
    });
  });

  test('a session child killed from outside: session/closed "lost", then a clear error', async (ctx) => {
    if (c.initializeResult.capabilities.isolation !== 'process') return ctx.skip('the child pid is of another PID namespace');
    const s = await c.openSession();
    const events: SessionClosedEvent[] = [];
    s.onClosed((e) => events.push(e));
    const pid = ok(await s.run({ program: 'import os\nreturn os.getpid()' })) as number;
    const closed = closedEvent(c, s.id);
    process.kill(pid, 'SIGKILL');
    const e = await closed;
    assert.equal(e.reason, 'lost');
    assert.ok(e.message.length > 0);
    assert.deepEqual(events, [e]);
    assert.equal(s.state, 'lost');
    await assert.rejects(s.run({ program: 'return 1' }), (err: unknown) => {
      assert.ok(err instanceof SessionNotOpenError);
      assert.equal(err.state, 'lost');
      assert.match(err.message, new RegExp(s.id));
      return true;
    });
    assert.equal(ok(await c.run({ program: 'return 1' })), 1, 'the daemon serves on');
  });

  test('cancelling a queued run settles it abort and leaves the session open', async () => {
    await using s = await c.openSession();
    const first = s.run({ program: py('import time', 'time.sleep(0.5)', 'x = 1', 'return 1') });
    const cancel = new AbortController();
    const queued = s.run({ program: 'x = 2\nreturn 2', signal: cancel.signal });
    await sleep(100);
    cancel.abort();
    const q = await queued;
    assert.equal(q.error?.kind, 'abort');
    assert.notEqual(q.session?.alive, false);
    assert.equal(ok(await first), 1);
    assert.equal(s.state, 'open');
    assert.equal(ok(await s.run({ program: 'return x' })), 1, 'the cancelled run never ran');
  });

  test('a run that times out ends the session: alive false in its result', async () => {
    const s = await c.openSession();
    const pid = ok(await s.run({ program: 'import os\nreturn os.getpid()' })) as number;
    const closed = closedEvent(c, s.id);
    const r = await s.run({ program: 'while True:\n    pass', limits: { maxWallMs: 300 } });
    assert.equal(r.error?.kind, 'timeout');
    assert.equal(r.session?.alive, false);
    assert.equal(s.state, 'lost');
    assert.equal((await closed).reason, 'lost');
    if (c.initializeResult.capabilities.isolation === 'process') {
      for (const deadline = Date.now() + 5000; alive(pid) && Date.now() < deadline; ) await sleep(20);
      assert.equal(alive(pid), false);
    }
  });

  test('bad params and the cap are typed errors', async () => {
    await assert.rejects(c.openSession({ idleTimeoutMs: -1 }), (e: unknown) => e instanceof InvalidParamsError && /idleTimeoutMs/.test(e.message));
    await using s = await c.openSession();
    await assert.rejects(s.run({ program: 'return 1', limits: { addressSpaceMb: 256 } }), (e: unknown) =>
      e instanceof InvalidParamsError && /addressSpaceMb/.test(e.message),
    );
    await using a = await c.openSession();
    await using b = await c.openSession();
    const atCap = (e: unknown) => e instanceof SessionLimitError && /3/.test(e.message);
    await assert.rejects(c.openSession(), atCap);
    if (c.initializeResult.capabilities.sessions?.fork) await assert.rejects(a.fork(), atCap);
    assert.equal(ok(await b.run({ program: 'return 1' })), 1);
  });

  test('an idle session closes with session/closed "idle"', async () => {
    const s = await c.openSession({ idleTimeoutMs: 200 });
    const e = await closedEvent(c, s.id);
    assert.equal(e.reason, 'idle');
    assert.equal(s.state, 'closed');
    await assert.rejects(s.run({ program: 'return 1' }), SessionNotOpenError);
  });
});

describe('sessions and the daemon lifecycle', { skip }, () => {
  test('close() of the client closes its sessions: session/closed "shutdown" first', async () => {
    const c = await start();
    const s = await c.openSession();
    ok(await s.run({ program: 'x = 1' }));
    const closed = closedEvent(c, s.id);
    await c.close();
    assert.equal((await closed).reason, 'shutdown');
    assert.notEqual(s.state, 'open');
    await s.close();
  });
});
