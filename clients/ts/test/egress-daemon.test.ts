/** C815, C1020: egress and secrets from the TypeScript client against the real daemon. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CodeRunClient, InvalidParamsError } from '../src/node.js';
import { bin, ok, py, skip } from './real-daemon.js';

describe('egress against the real daemon', { skip }, () => {
  let server: Server;
  let port = 0;
  let dir = '';
  let c: CodeRunClient;
  const seenKeys: (string | undefined)[] = [];
  before(async () => {
    server = createServer((req, res) => {
      seenKeys.push(req.headers['x-key'] as string | undefined);
      res.end('hello from upstream');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
    dir = mkdtempSync(join(tmpdir(), 'egress-test-'));
    const policy = join(dir, 'egress.json');
    writeFileSync(policy, JSON.stringify({ allow: [{ host: 'api.test', ports: [port], private: true }, { host: 'other.test', ports: [port], private: true }] }));
    c = await CodeRunClient.start({
      command: bin,
      env: { CODERUN_EGRESS: policy, CODERUN_EGRESS_HOSTS: 'api.test=127.0.0.1,other.test=127.0.0.1' },
    });
  });
  after(async () => {
    await c?.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  test('a narrowed run reaches its host only, and its result lists both requests', async () => {
    const urls = [`http://api.test:${port}/`, `http://other.test:${port}/`];
    const r = await c.run({
      program: py(
        'import urllib.request, urllib.error',
        'out = []',
        `for u in ${JSON.stringify(urls)}:`,
        '    try:',
        '        out.append(urllib.request.urlopen(u, timeout=30).status)',
        '    except urllib.error.HTTPError as e:',
        '        out.append(e.code)',
        'return out',
      ),
      egress: [{ host: `api.test:${port}`, private: true }],
    });
    assert.deepEqual(ok(r), [200, 403]);
    assert.deepEqual(
      r.egress?.map((e) => [e.host, e.port, e.method, e.status]),
      [
        ['api.test', port, 'GET', 200],
        ['other.test', port, 'GET', 403],
      ],
    );
  });

  test('C1020: a run\'s and a session\'s secrets reach their host only', async () => {
    seenKeys.length = 0;
    const r = await c.run({
      program: py(
        'import urllib.request',
        `return [urllib.request.urlopen(u, timeout=30).status for u in ${JSON.stringify([`http://api.test:${port}/`, `http://other.test:${port}/`])}]`,
      ),
      secrets: [{ hosts: ['api.test'], header: 'X-Key', value: 'ts-secret' }],
    });
    assert.deepEqual(ok(r), [200, 200]);
    assert.deepEqual(seenKeys, ['ts-secret', undefined]);
    await assert.rejects(
      c.run({ program: 'return 1', secrets: [{ hosts: ['elsewhere.test'], env: 'KEY', value: 'v' }] }),
      InvalidParamsError,
    );
    seenKeys.length = 0;
    const s = await c.openSession({ secrets: [{ hosts: ['api.test'], header: 'X-Key', value: 'ts-session' }] });
    ok(await s.run({ program: py('import urllib.request', `return urllib.request.urlopen("http://api.test:${port}/", timeout=30).status`) }));
    await s.close();
    assert.deepEqual(seenKeys, ['ts-session']);
  });

  test('an entry beyond the policy is InvalidParams', async () => {
    await assert.rejects(c.run({ program: 'return 1', egress: ['elsewhere.test'] }), InvalidParamsError);
  });
});
