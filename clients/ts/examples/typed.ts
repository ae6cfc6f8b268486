/**
 * A runnable example of typed bindings: declare a function with JSON Schemas, print the stubs a
 * model would read, then run a program that calls it by keyword and makes a wrong call the daemon
 * refuses before the host sees it.
 *
 *   cd clients/ts && npm install && npm run build && node dist/examples/typed.js
 *
 * The daemon binary comes from CODERUN_RPC_BIN, else `coderun-rpc` on PATH.
 */
import { CodeRunClient, defineFunction } from '../src/node.js';
import type { Binding } from '../src/node.js';

const docs: Record<string, string> = {
  asyncio: 'asyncio is a library to write concurrent code using async/await.',
  json: 'json exposes an API familiar to users of the standard library marshal module.',
};

let hostCalls = 0;
const search = defineFunction({
  description: 'Search the docs by keyword; returns the names of matching documents.',
  parameters: {
    type: 'object',
    properties: {
      q: { type: 'string', description: 'what to look for' },
      limit: { type: 'integer', minimum: 1, default: 5, description: 'at most this many hits' },
    },
    required: ['q'],
  },
  returns: { type: 'array', items: { type: 'string' } },
  // `q` is a string and `limit` an optional number: the types come from `parameters`.
  handler: ({ q, limit }) => {
    hostCalls++;
    return Object.keys(docs)
      .filter((name) => docs[name]?.includes(q))
      .slice(0, limit ?? 5);
  },
});
const bindings: Binding[] = [{ global: 'tools', functions: { search } }];

const client = await CodeRunClient.start();
try {
  console.log(await client.describe({ bindings, limits: { maxWallMs: 10000 } }));

  const result = await client.run({
    program: [
      'hits = await tools.search("code", limit=1)',
      'try:',
      '    await tools.search(q="x", limit=0)',
      'except TypeError as e:',
      '    print("refused:", e)',
      'return hits',
    ].join('\n'),
    bindings,
    limits: { maxWallMs: 10000 },
  });
  if (result.error) console.log('failed:', result.error.kind, result.error.message);
  else console.log('value:', JSON.stringify(result.value), 'logs:', result.logs, 'host calls:', hostCalls);
} finally {
  await client.close();
}
