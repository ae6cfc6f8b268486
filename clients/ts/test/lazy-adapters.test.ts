/**
 * Making a code tool starts no daemon: the description comes from `coderun-rpc describe` (the
 * same binary and environment) and equals a running daemon's; the first call starts the daemon.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { tool as langchainTool } from '@langchain/core/tools';
import { tool as agentsTool } from '@openai/agents';
import { tool as aiTool } from 'ai';
import { z } from 'zod';
import * as ai from '../src/adapters/ai.js';
import * as langchain from '../src/adapters/langchain.js';
import * as agents from '../src/adapters/openai-agents.js';
import { CodeRunClient, describeWithoutDaemon, InvalidParamsError } from '../src/node.js';
import { daemonChildren, skip, start } from './adapter-support.js';

const limits = { maxWallMs: 20_000, cpuSeconds: 7 };
const weather = { description: 'The temperature of a city.', schema: z.object({ city: z.string() }) };

/** A tool made lazily has no daemon and the description a running daemon gives the same tool. */
async function checkLazy(make: (extra: { start?: typeof start; client?: CodeRunClient }) => Promise<{ description?: string; close(): Promise<void> }>) {
  const lazy = await make({ start });
  try {
    assert.deepEqual(daemonChildren(), [], 'C1300: making the tool started no daemon');
    const client = await CodeRunClient.start(start);
    try {
      const eager = await make({ client });
      assert.equal(lazy.description, eager.description, 'C1301: the description is the daemon\'s');
      assert.match(lazy.description ?? '', /CPU 7 s, wall 20000 ms/);
      await eager.close();
    } finally {
      await client.close();
    }
  } finally {
    await lazy.close();
  }
}

describe('adapters describe without a daemon', { skip }, () => {
  test('C1300 C1301 AI SDK: no daemon until the first call, then one, none after close', async () => {
    const tools = { weather: aiTool({ description: weather.description, inputSchema: weather.schema, execute: async () => 18 }) };
    await checkLazy((extra) => ai.codeTool({ tools, limits, ...extra }));
    const python = await ai.codeTool({ tools, limits, start });
    assert.deepEqual(daemonChildren(), []);
    assert.ok(python.execute !== undefined);
    const out = await python.execute({ program: 'return await tools.weather(city="Paris")' }, { toolCallId: 't', messages: [] });
    assert.equal((out as { text: string }).text, 'value: 18');
    assert.equal(daemonChildren().length, 1, 'the first call started the daemon');
    await python.close();
    assert.deepEqual(daemonChildren(), []);
  });

  test('C1300 C1301 LangChain and OpenAI Agents: no daemon when the tool is made', async () => {
    const lc = [langchainTool(async () => 18, { name: 'weather', ...weather })];
    await checkLazy((extra) => langchain.codeTool({ tools: lc, limits, ...extra }));
    const oa = [agentsTool({ name: 'weather', description: weather.description, parameters: weather.schema, execute: async () => 18 })];
    await checkLazy((extra) => agents.codeTool({ tools: oa, limits, ...extra }));
    assert.deepEqual(daemonChildren(), []);
  });

  test('C1302 describeWithoutDaemon refuses as the daemon does', async () => {
    const bad = [{ global: 'tools', functions: new Map([['f', { handler: () => 1, parameters: { type: 'string' } as never }]]) }];
    const client = await CodeRunClient.start(start);
    const served = await client.describe({ bindings: bad }).then(() => undefined, (e: unknown) => e);
    await client.close();
    assert.ok(served instanceof InvalidParamsError);
    await assert.rejects(describeWithoutDaemon({ bindings: bad }, start), (e: unknown) => e instanceof InvalidParamsError && e.message === served.message);
    const warned = { ...start, env: { ...start.env, CODERUN_MAX_WAL_MS: '5' } };
    await assert.rejects(describeWithoutDaemon({ bindings: bad }, warned), (e: unknown) => e instanceof InvalidParamsError && e.message === served.message);
    const broken = { ...start, env: { ...start.env, CODERUN_MAX_WALL_MS: 'abc' } };
    await assert.rejects(describeWithoutDaemon({ bindings: [] }, broken), (e: unknown) => !(e instanceof InvalidParamsError) && /CODERUN_MAX_WALL_MS/.test(String(e)));
    assert.deepEqual(daemonChildren(), []);
  });
});
