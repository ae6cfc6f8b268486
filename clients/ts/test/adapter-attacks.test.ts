/**
 * What an adapter passes between the model, the framework and the daemon, attacked: tool names
 * that are not identifiers, schemas that say less (or other) than the tool checks, huge results,
 * a model's input that is not what the schema says, a stream that never ends, calls racing the
 * first session and the close. Driven through the AI SDK adapter (the engine is shared) against
 * the real daemon.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { jsonSchema, tool } from 'ai';
import { z } from 'zod';
import { codeTool } from '../src/adapters/ai.js';
import type { CodeTool, ModelOutput } from '../src/adapters/ai.js';
import { CodeRunClient, ClientClosedError, ConnectionLostError } from '../src/node.js';
import type { SessionClosedEvent } from '../src/node.js';
import { daemonChildren, py, skip, start } from './adapter-support.js';

/** Calls the code tool as the SDK would, and returns what the model reads. */
async function call(python: CodeTool, program: unknown, abortSignal?: AbortSignal): Promise<ModelOutput> {
  assert.ok(python.execute !== undefined);
  const options = { toolCallId: 't', messages: [], ...(abortSignal === undefined ? {} : { abortSignal }) };
  return (await python.execute({ program } as { program: string }, options)) as ModelOutput;
}

const ok = (value: unknown) => tool({ inputSchema: z.object({}), execute: async () => value });

describe('adapters under attack', { skip }, () => {
  test('C950 tool names that are not identifiers, JavaScript prototype members and Python keywords are each their own tool', async () => {
    const names = ['get-sum', 'class', 'constructor', 'toString', '__proto__', 'a"\n# injected'];
    const tools = Object.fromEntries(names.map((n, i) => [n, ok(i)])); // own keys, `__proto__` too
    await using python = await codeTool({ tools, start });
    assert.equal(Object.keys(tools).length, names.length);
    assert.match(python.description ?? '', /# tools\["a\\"\\n# injected"\]\(\) -> Any/, 'the name is quoted in the stubs, not spliced');
    assert.doesNotMatch(python.description ?? '', /^# injected/m);
    const program = `return [await tools[n]() for n in ${JSON.stringify(names)}]`;
    assert.equal((await call(python, program)).text, 'value: [0,1,2,3,4,5]');
  });

  test('C951 a schema that checks less than the tool: the tool\'s own validator refuses, the execute never runs', async () => {
    let ran = 0;
    const positive = tool({
      inputSchema: z.object({ n: z.number().refine((n) => n > 0, 'n must be positive'), unit: z.string().default('kg') }),
      execute: async (input) => {
        ran++;
        return input;
      },
    });
    await using python = await codeTool({ tools: { positive }, start });
    const refused = await call(python, py('try:', '    await tools.positive(n=-1)', 'except ToolError as e:', '    return str(e)'));
    assert.match(refused.text, /^value: "positive: invalid arguments: .*n must be positive/);
    assert.equal(ran, 0);
    assert.equal((await call(python, 'return await tools.positive(n=2)')).text, 'value: {"n":2,"unit":"kg"}', 'the SDK default applies');
  });

  test('C951 a schema the daemon refuses names the tool; a non-object schema is refused before the daemon', async () => {
    const external = tool({ inputSchema: jsonSchema({ type: 'object', properties: { a: { $ref: 'https://evil.example/s' } } }), execute: async () => 1 });
    await assert.rejects(codeTool({ tools: { fine: ok(1), external }, start }), /^InvalidParamsError: tool "external": .*is not a reference inside this schema/);
    await assert.rejects(codeTool({ tools: { str: tool({ inputSchema: z.string(), execute: async () => 1 }) }, start }), /tool "str": its input schema must be/);
    assert.deepEqual(daemonChildren(), [], 'a refused tool set leaves no daemon');
  });

  test('C952 the model\'s input is not trusted: a program that is not a string is refused to the model', async () => {
    await using python = await codeTool({ tools: {}, start });
    for (const bad of [undefined, 42, { code: 'x' }, ['return 1']]) await assert.rejects(call(python, bad), /program is required \(a string\)/);
  });

  test('C953 huge results stay within the run\'s budgets in what the model reads', async () => {
    const limits = { maxValueBytes: 4096, maxLogBytes: 4096 };
    const big = tool({ inputSchema: z.object({}), execute: async () => 'x'.repeat(8_000_000) });
    const boom = tool({
      inputSchema: z.object({}),
      execute: async (): Promise<string> => {
        throw new Error('y'.repeat(8_000_000));
      },
    });
    await using python = await codeTool({ tools: { big, boom }, start, limits });
    assert.equal((await call(python, 'return len(await tools.big())')).text, 'value: 8000000');
    for (const program of ['return await tools.big()', 'await tools.boom()', 'print("z" * 5_000_000)', 'for i in range(100000):\n    print(i)']) {
      const out = await call(python, program);
      assert.ok(out.text.length <= 2 * 4096 + 1024, `${program}: ${out.text.length} characters`);
    }
  });

  test('C954 a streaming tool that never ends is closed when its run ends', async () => {
    let closed!: () => void;
    const streamClosed = new Promise<void>((resolve) => {
      closed = resolve;
    });
    const forever = tool({
      inputSchema: z.object({}),
      async *execute() {
        try {
          for (let i = 0; ; i++) {
            await new Promise((r) => setImmediate(r));
            yield i;
          }
        } finally {
          closed();
        }
      },
    });
    await using python = await codeTool({ tools: { forever }, start, limits: { maxWallMs: 2000 } });
    const out = await call(python, 'return await tools.forever()');
    assert.match(out.text, /^error \(timeout\)/);
    await streamClosed;
  });

  test('C955 calls racing the first one share one session; close() during a run settles it and ends the daemon', async () => {
    let entered!: () => void;
    const inRun = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const hold = tool({
      inputSchema: z.object({}),
      execute: async () => {
        entered();
        return null;
      },
    });
    const python = await codeTool({ tools: { hold }, start });
    const pids = await Promise.all([1, 2, 3].map(() => call(python, 'import os\nreturn os.getpid()')));
    assert.equal(new Set(pids.map((o) => o.text)).size, 1, 'one session for concurrent first calls');
    const running = call(python, 'await tools.hold()\nwhile True:\n    pass');
    await inRun;
    await python.close();
    assert.match((await running).text, /^error \(abort\)/);
    assert.deepEqual(daemonChildren(), []);
    await assert.rejects(call(python, 'return 1'), ClientClosedError);
  });

  test('C956 a session closed for idleness between calls is replaced, and the model is told', async () => {
    const client = await CodeRunClient.start({ ...start, env: { ...start.env, CODERUN_SESSION_IDLE_MS: '300' } });
    try {
      await using python = await codeTool({ tools: {}, client });
      const idle = new Promise<SessionClosedEvent>((resolve) => client.onSessionClosed(resolve));
      assert.equal((await call(python, 'x = 1\nreturn x')).text, 'value: 1');
      assert.equal((await idle).reason, 'idle');
      const next = await call(python, py('try:', '    return x', 'except NameError:', '    return "gone"'));
      assert.equal(next.text, '# the Python session ended (idle): its variables are gone; this call started a fresh one\nvalue: "gone"');
    } finally {
      await client.close();
    }
  });

  test('C949 agents sharing a daemon past its session cap: a call without a free session runs fresh and says so', async () => {
    const client = await CodeRunClient.start({ ...start, env: { ...start.env, CODERUN_MAX_SESSIONS: '1' } });
    try {
      const first = await codeTool({ tools: {}, client });
      await using second = await codeTool({ tools: {}, client });
      assert.equal((await call(first, 'x = 1\nreturn x')).text, 'value: 1');
      const crowded = await call(second, 'y = 2\nreturn y');
      assert.equal(crowded.text, "# no Python session was free (the daemon's cap): this call ran in a fresh process and nothing it set stays\nvalue: 2");
      await first.close();
      assert.equal((await call(second, 'y = 3\nreturn y')).text, 'value: 3');
      assert.equal((await call(second, 'return y')).text, 'value: 3', 'the freed session is used and kept');
    } finally {
      await client.close();
    }
  });

  test('C956 a daemon killed between calls is started again; the next call is told its session is gone', async () => {
    await using python = await codeTool({ tools: {}, start });
    assert.equal((await call(python, 'x = 1\nreturn x')).text, 'value: 1');
    const [pid] = daemonChildren();
    assert.ok(pid !== undefined);
    process.kill(pid, 'SIGKILL');
    // A call made before the client has seen the death fails with it (its program may have run).
    const probe = py('try:', '    return x', 'except NameError:', '    return "gone"');
    let next = await call(python, probe).catch((e: unknown) => {
      assert.ok(e instanceof ConnectionLostError, String(e));
      return undefined;
    });
    next ??= await call(python, probe);
    assert.match(next.text, /^# the Python session ended \(.*\): its variables are gone; this call started a fresh one\nvalue: "gone"$/);
    assert.equal(daemonChildren().length, 1);
  });
});
