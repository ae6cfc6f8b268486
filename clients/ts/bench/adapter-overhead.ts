/**
 * The adapters' cost per tool call: the same program (one host tool call, a value) run in a
 * session through the client's own `Session.run` and through each adapter's code tool, on one
 * daemon, interleaved (client, adapter, adapter, client) so that a loaded machine's drift hits
 * both sides alike. Prints the medians and the adapter's overhead (median difference); the
 * target is at most 1 ms (`make bench`).
 *
 *   npm run bench:adapters        # the daemon from CODERUN_RPC_BIN; ROUNDS=… (default 200)
 */
import { tool as aiTool, jsonSchema } from 'ai';
import { tool as agentsTool, RunContext } from '@openai/agents';
import { tool as langchainTool } from '@langchain/core/tools';
import { z } from 'zod';
import { codeTool as aiCodeTool } from '../src/adapters/ai.js';
import { codeTool as agentsCodeTool } from '../src/adapters/openai-agents.js';
import { codeTool as langchainCodeTool } from '../src/adapters/langchain.js';
import { CodeRunClient } from '../src/node.js';
import type { Binding } from '../src/node.js';

const PROGRAM = 'return await tools.add(a=40, b=2)';
const ROUNDS = Number(process.env['ROUNDS'] ?? 200);
const add = ({ a, b }: { a: number; b: number }) => a + b;
const addSchema = { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] } as const;

/** Median of `xs` (ms). */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

/** Milliseconds `f` takes. */
async function timed(f: () => Promise<unknown>): Promise<number> {
  const t0 = process.hrtime.bigint();
  await f();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

const client = await CodeRunClient.start({ env: { CODERUN_PYTHON_BIN: process.env['CODERUN_PYTHON_BIN'] } });
const session = await client.openSession();
const bindings: Binding[] = [{ global: 'tools', functions: { add: { handler: (args) => add(args as { a: number; b: number }), parameters: addSchema } } }];
const direct = () => session.run({ program: PROGRAM, bindings });

const ai = await aiCodeTool({ client, tools: { add: aiTool({ inputSchema: jsonSchema<{ a: number; b: number }>(addSchema), execute: async (x) => add(x) }) } });
const agents = await agentsCodeTool({ client, tools: [agentsTool({ name: 'add', description: 'add', parameters: z.object({ a: z.number(), b: z.number() }), execute: async (x) => add(x) })] });
const langchain = await langchainCodeTool({ client, tools: [langchainTool(async (x: { a: number; b: number }) => add(x), { name: 'add', schema: z.object({ a: z.number(), b: z.number() }) })] });
const context = new RunContext({});
const adapters: Record<string, () => Promise<unknown>> = {
  ai: () => Promise.resolve(ai.execute?.({ program: PROGRAM }, { toolCallId: 'b', messages: [] })),
  'openai-agents': () => agents.invoke(context, JSON.stringify({ program: PROGRAM })),
  langchain: () => langchain.invoke({ program: PROGRAM }),
};

try {
  for (const [name, viaAdapter] of Object.entries(adapters)) {
    for (let i = 0; i < 20; i++) await viaAdapter(); // warm up both paths
    for (let i = 0; i < 20; i++) await direct();
    const own: number[] = [];
    const wrapped: number[] = [];
    for (let i = 0; i < ROUNDS; i += 2) {
      own.push(await timed(direct));
      wrapped.push(await timed(viaAdapter), await timed(viaAdapter));
      own.push(await timed(direct));
    }
    const overhead = median(wrapped) - median(own);
    console.log(`${name.padEnd(14)} client ${median(own).toFixed(3)} ms  adapter ${median(wrapped).toFixed(3)} ms  overhead ${overhead.toFixed(3)} ms  (${overhead <= 1 ? 'within' : 'OVER'} the 1 ms target, ${own.length} runs each)`);
  }
} finally {
  await Promise.all([ai.close(), agents.close(), langchain.close()]);
  await client.close();
}
