/**
 * A runnable example: start the daemon, run a program that calls two host tools, stream its
 * output, cancel a slow run, and close.
 *
 *   cd clients/ts && npm install && npm run example
 *
 * The daemon binary comes from CODERUN_RPC_BIN, else the installed platform package (not in a
 * checkout), else `coderun-rpc` on PATH (`make build` at the repository root puts it in
 * bin/coderun-rpc).
 */
import { CodeRunClient } from '../src/node.js';
import type { JsonValue } from '../src/node.js';

const docs: Record<string, string> = {
  asyncio: 'asyncio is a library to write concurrent code using async/await.',
  json: 'json exposes an API familiar to users of the standard library marshal module.',
};

const client = await CodeRunClient.start();
console.log('connected to', client.initializeResult.serverInfo);

try {
  const result = await client.run({
    program: [
      'import asyncio',
      'hits = await tools.search({"q": "asyncio"})',
      'print("found", len(hits), "hits")',
      'try:',
      '    await tools.fetch({"id": "nope"})',
      'except ToolError as e:',
      '    print("tool", e.tool, "failed:", e)',
      'pages = await asyncio.gather(*(tools.fetch({"id": h}) for h in hits))',
      'return {"hits": hits, "chars": [len(p) for p in pages]}',
    ].join('\n'),
    bindings: [
      {
        global: 'tools',
        functions: {
          search: async (args) => Object.keys(docs).filter((k) => (args as { q: string }).q.includes(k)),
          fetch: async (args) => {
            const id = (args as { id: string }).id;
            const doc = docs[id];
            if (doc === undefined) throw new Error(`no document ${JSON.stringify(id)}`);
            return doc;
          },
        },
        errorClass: { name: 'ToolError', memberNameProperty: 'tool' },
      },
    ],
    limits: { maxWallMs: 10000 },
    onLog: (e) => console.log(`  [log ${e.index}] ${e.text}`),
  });
  if (result.error) console.log('failed:', result.error.kind, result.error.message);
  else console.log('value:', JSON.stringify(result.value as JsonValue), 'stats:', result.stats);

  // Cancelling: the run resolves (it does not reject) with kind "abort".
  const slow = client.run({ program: 'import time\nprint("working")\ntime.sleep(30)', signal: AbortSignal.timeout(500) });
  const aborted = await slow;
  console.log('cancelled run:', aborted.error?.kind, '-', aborted.error?.message, aborted.logs);
} finally {
  await client.close();
}
