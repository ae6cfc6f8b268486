/**
 * `mcpConfig` against the real daemon: an upstream MCP server (the real mcp-server-time from
 * the project's .venv, which `make test` installs) bound as `{ global, mcp }`.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { CodeRunClient } from '../src/node.js';
import { bin, ok, py, skip } from './real-daemon.js';

const timeServer = fileURLToPath(new URL('../../../../.venv/bin/mcp-server-time', import.meta.url));
const servers = { mcpServers: { clock: { command: timeServer, args: ['--local-timezone', 'UTC'] } } };
const program = py('now = await clock.get_current_time(timezone="UTC")', 'return now["timezone"]');

describe('mcpConfig against the real daemon', { skip: skip || (existsSync(timeServer) ? false : 'no mcp-server-time (make deps)') }, () => {
  test('an object is written for the daemon, then removed; calls go upstream', async () => {
    const client = await CodeRunClient.start({ command: bin, mcpConfig: servers });
    try {
      assert.deepEqual(readdirSync(tmpdir()).filter((n) => n.startsWith('mcp-config-')), []);
      const r = await client.run({ program, bindings: [{ global: 'clock', mcp: 'clock' }] });
      assert.equal(ok(r), 'UTC');
      assert.equal(r.stats.bindingCalls, 1);
      const stubs = await client.describe({ bindings: [{ global: 'clock', mcp: 'clock' }] });
      assert.match(stubs, /async def get_current_time\(self, timezone: str\)/);
    } finally {
      await client.close();
    }
  });
});
