/**
 * Sessions in the core client over in-memory streams: what the client sends, and what it makes
 * of the daemon's answers and `session/closed` notifications. The real daemon's behaviour is
 * pinned in session-daemon.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ResponseError } from 'vscode-jsonrpc';
import { CodeRunClient, ConnectionLostError, SessionLimitError, SessionNotOpenError } from '../src/index.js';
import type { SessionClosedEvent } from '../src/index.js';
import { pair } from './mem-pair.js';

const stats = { wallMs: 0, cpuMs: 0, maxRssKb: 0, queueMs: 0, bindingCalls: 0, logBytes: 0 };

/** A peer that opens sessions s1, s2, … and records every session request it gets. */
function sessionPeer() {
  const p = pair();
  const seen: { method: string; params: unknown }[] = [];
  let next = 1;
  p.server.onRequest('session/open', (params: unknown) => {
    seen.push({ method: 'session/open', params });
    return { sessionId: `s${next++}` };
  });
  p.server.onRequest('session/fork', (params: unknown) => {
    seen.push({ method: 'session/fork', params });
    return { sessionId: `s${next++}` };
  });
  p.server.onRequest('session/close', (params: unknown) => {
    seen.push({ method: 'session/close', params });
    return null;
  });
  p.server.onNotification('$/cancelRequest', () => {});
  return { ...p, seen };
}

/** The next `session/closed` the client delivers (after the session's own listeners ran). */
function nextEvent(c: CodeRunClient): Promise<SessionClosedEvent> {
  return new Promise((resolve) => {
    const off = c.onSessionClosed((e) => {
      off();
      resolve(e);
    });
  });
}

const notOpen = (id: string, state: string, reason?: string) => (e: unknown) => {
  assert.ok(e instanceof SessionNotOpenError, String(e));
  assert.equal(e.code, -32004);
  assert.equal(e.sessionId, id);
  assert.equal(e.state, state);
  if (reason !== undefined) assert.equal(e.reason, reason);
  assert.match(e.message, new RegExp(`session ${id}`));
  return true;
};

describe('sessions in the core client', () => {
  test('open, run, fork and close send the documented params', async () => {
    const { transport, server, seen } = sessionPeer();
    server.onRequest('run', (params: { program: string; sessionId?: string }) => ({
      value: params.sessionId ?? null,
      logs: [],
      stats,
      session: { id: params.sessionId, alive: true, runs: 1 },
    }));
    const c = await CodeRunClient.connect(transport);
    const s = await c.openSession({ limits: { addressSpaceMb: 512 }, idleTimeoutMs: 5000 });
    assert.equal(s.id, 's1');
    assert.equal(s.state, 'open');
    const r = await s.run({ program: 'x = 1' });
    assert.equal(r.value, 's1');
    assert.deepEqual(r.session, { id: 's1', alive: true, runs: 1 });
    const t = await s.fork();
    assert.equal(t.id, 's2');
    assert.equal((await t.run({ program: 'x' })).value, 's2');
    await s.close();
    await s.close();
    assert.equal(s.state, 'closed');
    assert.deepEqual(seen, [
      { method: 'session/open', params: { limits: { addressSpaceMb: 512 }, idleTimeoutMs: 5000 } },
      { method: 'session/fork', params: { sessionId: 's1' } },
      { method: 'session/close', params: { sessionId: 's1' } },
    ]);
    await assert.rejects(s.run({ program: 'x' }), notOpen('s1', 'closed'));
    await assert.rejects(s.fork(), notOpen('s1', 'closed'));
    await c.close();
    server.dispose();
  });

  test('await using closes the session at the end of the block', async () => {
    const { transport, server, seen } = sessionPeer();
    const c = await CodeRunClient.connect(transport);
    {
      await using s = await c.openSession();
      assert.equal(s.state, 'open');
    }
    assert.deepEqual(seen.map((x) => x.method), ['session/open', 'session/close']);
    await c.close();
    server.dispose();
  });

  test('session/closed reaches the session and the client listeners; later calls fail without a request', async () => {
    const { transport, server, seen } = sessionPeer();
    let runs = 0;
    server.onRequest('run', () => {
      runs++;
      return { value: null, logs: [], stats };
    });
    const c = await CodeRunClient.connect(transport);
    const s = await c.openSession();
    const other = await c.openSession();
    const onSession: SessionClosedEvent[] = [];
    const onClient: SessionClosedEvent[] = [];
    s.onClosed((e) => onSession.push(e));
    const unsubscribe = c.onSessionClosed((e) => onClient.push(e));
    c.onSessionClosed(() => {
      throw new Error('a throwing listener is ignored');
    });
    const event = { sessionId: 's1', reason: 'lost', message: 'the session child was killed by SIGKILL' };
    let delivered = nextEvent(c);
    await server.sendNotification('session/closed', event);
    await delivered;
    assert.deepEqual(onSession, [event]);
    assert.deepEqual(onClient, [event]);
    assert.equal(s.state, 'lost');
    assert.equal(s.reason, event.message);
    await assert.rejects(s.run({ program: 'x' }), notOpen('s1', 'lost', event.message));
    await assert.rejects(s.fork(), notOpen('s1', 'lost'));
    await s.close(); // nothing left to close: resolves without a request
    assert.equal(runs, 0);
    assert.deepEqual(seen.map((x) => x.method), ['session/open', 'session/open']);
    unsubscribe();
    delivered = nextEvent(c);
    await server.sendNotification('session/closed', { sessionId: 's2', reason: 'idle', message: 'idle for 5000 ms' });
    await delivered;
    assert.equal(onClient.length, 1);
    assert.equal(other.state, 'closed');
    assert.equal(other.reason, 'idle');
    await c.close();
    server.dispose();
  });

  test('a run that ends the session marks it lost from its result', async () => {
    const { transport, server } = sessionPeer();
    server.onRequest('run', (params: { sessionId: string }) => ({
      error: { kind: 'timeout', message: 'wall', budget: 'wall' },
      logs: [],
      stats,
      session: { id: params.sessionId, alive: false, runs: 3, reason: 'timeout' },
    }));
    const c = await CodeRunClient.connect(transport);
    const s = await c.openSession();
    const r = await s.run({ program: 'while True: pass' });
    assert.equal(r.error?.kind, 'timeout');
    assert.equal(r.session?.alive, false);
    assert.equal(s.state, 'lost');
    await assert.rejects(s.run({ program: 'x' }), notOpen('s1', 'lost', 'timeout'));
    await c.close();
    server.dispose();
  });

  test('the daemon\'s -32003 and -32004 are typed; -32004 updates the session', async () => {
    const { transport, server } = pair();
    server.onRequest('session/open', () => ({ sessionId: 's9' }));
    const c = await CodeRunClient.connect(transport);
    const s = await c.openSession();
    server.onRequest('session/fork', () => {
      throw new ResponseError(-32003, 'session limit reached: CODERUN_MAX_SESSIONS is 16');
    });
    await assert.rejects(s.fork(), (e: unknown) => e instanceof SessionLimitError && /CODERUN_MAX_SESSIONS/.test(e.message));
    assert.equal(s.state, 'open');
    server.onRequest('run', () => {
      throw new ResponseError(-32004, 'session s9 is lost', { sessionId: 's9', state: 'lost', reason: 'worker-exit' });
    });
    await assert.rejects(s.run({ program: 'x' }), notOpen('s9', 'lost', 'worker-exit'));
    assert.equal(s.state, 'lost');
    assert.equal(s.reason, 'worker-exit');
    await c.close();
    server.dispose();
  });

  test('the daemon going away marks every session lost; close() still resolves', async () => {
    const { transport, server, die } = sessionPeer();
    const c = await CodeRunClient.connect(transport);
    const s = await c.openSession();
    die({ exitCode: null, signal: 'SIGKILL' });
    await assert.rejects(c.openSession(), ConnectionLostError);
    assert.equal(s.state, 'lost');
    assert.match(s.reason ?? '', /killed by SIGKILL/);
    await assert.rejects(s.run({ program: 'x' }), notOpen('s1', 'lost'));
    await s.close();
    await c.close();
    server.dispose();
  });
});
