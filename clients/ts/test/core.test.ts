/**
 * The I/O-free core over in-memory streams, with an in-process peer: no process is spawned.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { CodeRunClient, ConnectionLostError } from '../src/index.js';
import { pair } from './mem-pair.js';

const stats = { wallMs: 0, cpuMs: 0, maxRssKb: 0, queueMs: 0, bindingCalls: 1, logBytes: 0 };

describe('core client over in-memory streams', () => {
  test('the core module graph never imports child_process', () => {
    const seen = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const src = readFileSync(file, 'utf8');
      assert.doesNotMatch(src, /child_process/, file);
      for (const m of src.matchAll(/from '(\.[^']+)'/g)) visit(fileURLToPath(new URL(m[1] as string, `file://${file}`)));
    };
    visit(fileURLToPath(new URL('../src/index.js', import.meta.url)));
    assert.ok(seen.size >= 4);
  });

  test('run with a binding round trip; the run id names the run', async () => {
    const { transport, server } = pair();
    let runId: unknown;
    server.onRequest('run', async (params: { program: string; bindings: unknown }, _token) => {
      assert.deepEqual(params.bindings, [{ global: 'tools', functions: ['add'] }]);
      const sum = await server.sendRequest('binding/call', { runId, namespace: 'tools', function: 'add', args: [2, 3] });
      return { value: sum, logs: [params.program], stats };
    });
    // The peer learns the run id the way the daemon does: from the request itself.
    server.onNotification('$/cancelRequest', () => {});
    const c = await CodeRunClient.connect(transport);
    // vscode-jsonrpc numbers requests from 0: initialize was 0, so this run is 1.
    runId = 1;
    const r = await c.run({
      program: 'p',
      bindings: [{ global: 'tools', functions: { add: (args) => (args as number[]).reduce((a, b) => a + b, 0) } }],
    });
    assert.deepEqual(r, { value: 5, logs: ['p'], stats });
    await c.close();
    server.dispose();
  });

  test('the peer going away rejects every pending run at once', async () => {
    const { transport, server, die } = pair();
    server.onRequest('run', () => new Promise(() => {}));
    const c = await CodeRunClient.connect(transport);
    const runs = [1, 2, 3].map(() => c.run({ program: 'x' }));
    const checks = runs.map((p) =>
      assert.rejects(p, (e: unknown) => {
        assert.ok(e instanceof ConnectionLostError);
        assert.equal(e.exitCode, 7);
        assert.match(e.message, /exited with code 7 \(gone\); 3 pending runs failed/);
        return true;
      }),
    );
    die({ exitCode: 7, signal: null, detail: 'gone' });
    await Promise.all(checks);
    await assert.rejects(c.run({ program: 'x' }), ConnectionLostError);
    await c.close();
    server.dispose();
  });

  test('a binding the run did not declare, or an unknown run, is answered with an error', async () => {
    const { transport, server } = pair();
    const c = await CodeRunClient.connect(transport);
    await assert.rejects(
      server.sendRequest('binding/call', { runId: 99, namespace: 'tools', function: 'x', args: null }),
      /no live run with id 99/,
    );
    server.onRequest('run', async () => {
      const errors: string[] = [];
      for (const fn of ['toString', 'constructor', 'nope']) {
        try {
          await server.sendRequest('binding/call', { runId: 1, namespace: 'tools', function: fn, args: null });
        } catch (e) {
          errors.push((e as Error).message);
        }
      }
      return { value: errors, logs: [], stats };
    });
    const r = await c.run({ program: 'x', bindings: [{ global: 'tools', functions: { ok: () => 1 } }] });
    assert.deepEqual(r.value, ['unknown binding "tools.toString"', 'unknown binding "tools.constructor"', 'unknown binding "tools.nope"']);
    await c.close();
    server.dispose();
  });
});
