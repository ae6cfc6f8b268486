/** CodeRunClient.connect against the real daemon in service mode (docs/service.md). */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CodeRunClient, ConnectionLostError, SessionLimitError, SessionNotOpenError } from '../src/node.js';
import type { BindingFunction } from '../src/node.js';
import { bin, ok, skip } from './real-daemon.js';

/** `coderun-rpc serve --listen listen` with env; resolves with the address it logs. */
async function serve(listen: string, env: Record<string, string> = {}): Promise<{ proc: ChildProcess; address: string }> {
  const proc = spawn(bin, ['serve', '--listen', listen], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const address = await new Promise<string>((resolve, reject) => {
    proc.stderr!.setEncoding('utf8');
    proc.stderr!.on('data', (chunk: string) => {
      log += chunk;
      const m = /msg=serving listen=(\S+)/.exec(log);
      if (m) resolve(m[1]!);
    });
    proc.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${log}`)));
  });
  return { proc, address };
}

async function stop(proc: ChildProcess): Promise<void> {
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  await exited;
}

const echo: BindingFunction = async (args) => args;

describe('connect to a daemon in service mode', { skip }, () => {
  let unix: { proc: ChildProcess; address: string };
  let tcp: { proc: ChildProcess; address: string };
  before(async () => {
    unix = await serve(`unix:${join(mkdtempSync(join(tmpdir(), 'ts-serve-')), 's.sock')}`);
    tcp = await serve('tcp:127.0.0.1:0', { CODERUN_AUTH_TOKEN: 'tok' });
  });
  after(async () => {
    await Promise.all([unix && stop(unix.proc), tcp && stop(tcp.proc)]);
  });

  test('unix: the same API as start(), bindings included', async () => {
    const c = await CodeRunClient.connect(`unix:${unix.address}`);
    assert.equal(c.initializeResult.serverInfo.name, 'coderun-rpc');
    const r = await c.run({ program: 'return await tools.echo({"n": 41})', bindings: [{ global: 'tools', functions: { echo } }] });
    assert.deepEqual(ok(r), { n: 41 });
    await c.close();
    const again = await CodeRunClient.connect(`unix:${unix.address}`);
    assert.equal(ok(await again.run({ program: 'return 2' })), 2);
    await again.close();
  });

  test('traceparent: passed on to the binding call', async () => {
    const c = await CodeRunClient.connect(`unix:${unix.address}`);
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    let seen: string | undefined;
    const r = await c.run({
      program: 'return await tools.echo(1)',
      traceparent: tp,
      bindings: [{ global: 'tools', functions: { echo: (args, _signal, call) => ((seen = call.traceparent), args) } }],
    });
    assert.equal(ok(r), 1);
    assert.equal(seen, tp); // no exporter configured: the run's own traceparent, passed on
    await c.close();
  });

  test('tcp with a token; a wrong token is refused', async () => {
    const c = await CodeRunClient.connect(`tcp:${tcp.address}`, { token: 'tok' });
    assert.equal(ok(await c.run({ program: 'return 3' })), 3);
    await c.close();
    await assert.rejects(CodeRunClient.connect(`tcp:${tcp.address}`, { token: 'bad' }), /refused the connection: authentication failed: wrong bearer token/);
  });

  test('sessions belong to their connection; the cap counts every connection', async () => {
    const sessions = await serve(`unix:${join(mkdtempSync(join(tmpdir(), 'ts-serve-')), 's.sock')}`, { CODERUN_MAX_SESSIONS: '1' });
    try {
      const a = await CodeRunClient.connect(`unix:${sessions.address}`);
      const b = await CodeRunClient.connect(`unix:${sessions.address}`);
      assert.equal(b.initializeResult.capabilities.sessions?.max, 1);
      const s = await a.openSession();
      assert.equal(ok(await s.run({ program: 'x = 41\nreturn x + 1' })), 42);
      await assert.rejects(b.run({ program: 'return x' }, s.id), (err: Error) =>
        err instanceof SessionNotOpenError && err.state === 'unknown' && err.sessionId === s.id);
      await assert.rejects(b.openSession(), (err: Error) => err instanceof SessionLimitError && /CODERUN_MAX_SESSIONS/.test(err.message));
      await a.close(); // its session closes with it, which frees the cap
      const t = await b.openSession();
      assert.equal(ok(await t.run({ program: "return globals().get('x')" })), null);
      await b.close();
    } finally {
      await stop(sessions.proc);
    }
  });

  test('a bad address is refused clearly', async () => {
    await assert.rejects(CodeRunClient.connect('http://example.com'), /must start with unix:, tcp: or ws:\/\//);
    await assert.rejects(CodeRunClient.connect('tcp:localhost'), /tcp: needs HOST:PORT/);
  });

  const noWebSocket = typeof (globalThis as { WebSocket?: unknown }).WebSocket === 'undefined' ? 'no global WebSocket in this Node' : false;
  test('ws:// with a token', { skip: noWebSocket }, async () => {
    const ws = await serve('ws://127.0.0.1:0/rpc', { CODERUN_AUTH_TOKEN: 'tok' });
    try {
      const c = await CodeRunClient.connect(`ws://${ws.address}/rpc`, { token: 'tok' });
      const r = await c.run({ program: 'print("x" * 50000)\nreturn await tools.echo(7)', bindings: [{ global: 'tools', functions: { echo } }] });
      assert.equal(ok(r), 7);
      assert.equal(r.logs[0]?.length, 50000);
      await c.close();
      await assert.rejects(CodeRunClient.connect(`ws://${ws.address}/rpc`, { token: 'bad' }), (err: Error) =>
        err instanceof ConnectionLostError && /refused the connection: authentication failed: wrong bearer token/.test(err.message));
    } finally {
      await stop(ws.proc);
    }
  });
});
