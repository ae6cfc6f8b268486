/**
 * The Vercel AI SDK adapter end to end: the SDK's own test model (`MockLanguageModelV3`) calls
 * the code tool through `generateText`, the program calls two AI SDK tools on the host and
 * draws a chart, and the model's next prompt carries the text and the image.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { generateText, stepCountIs, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';
import { codeTool } from '../src/adapters/ai.js';
import type { ModelOutput } from '../src/adapters/ai.js';
import { assertPng, CHART_PROGRAM, CHART_TEXT, daemonChildren, py, skip, start, TEMPS } from './adapter-support.js';

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

/** A model step that calls tool `python` with `program`. */
function callPython(program: string, id = 'call-1') {
  return {
    content: [{ type: 'tool-call' as const, toolCallId: id, toolName: 'python', input: JSON.stringify({ program }) }],
    finishReason: { unified: 'tool-calls' as const, raw: undefined },
    usage,
    warnings: [],
  };
}

const answer = {
  content: [{ type: 'text' as const, text: 'done' }],
  finishReason: { unified: 'stop' as const, raw: undefined },
  usage,
  warnings: [],
};

/** The two host tools, recording the cities asked for. */
function hostTools(asked: string[]) {
  return {
    cities: tool({ description: 'The cities we know.', inputSchema: z.object({}), execute: async () => Object.keys(TEMPS) }),
    weather: tool({
      description: 'The temperature of a city.',
      inputSchema: z.object({ city: z.string().describe('the city') }),
      execute: async ({ city }) => {
        asked.push(city);
        return { city, temp: TEMPS[city] ?? null };
      },
    }),
  };
}

/** The output part the model's second request carries for the code tool's call. */
function toolResultOf(model: MockLanguageModelV3, call: number): unknown {
  const prompt = model.doGenerateCalls[call]?.prompt ?? [];
  const message = prompt.find((m) => m.role === 'tool');
  assert.ok(message !== undefined && message.role === 'tool', 'the model got a tool message');
  const part = message.content[0];
  assert.equal(part?.type, 'tool-result');
  return part.type === 'tool-result' ? part.output : undefined;
}

describe('AI SDK code tool against the real daemon', { skip }, () => {
  test('C941 a model call runs a program that calls two host tools and returns a chart the model sees', async () => {
    const asked: string[] = [];
    const python = await codeTool({ tools: hostTools(asked), start, limits: { maxWallMs: 60_000 } });
    try {
      const model = new MockLanguageModelV3({ doGenerate: [callPython(CHART_PROGRAM), answer] });
      const r = await generateText({ model, tools: { python }, prompt: 'chart the temperatures', stopWhen: stepCountIs(3) });
      assert.equal(r.text, 'done');
      assert.deepEqual(asked, ['Paris', 'Oslo']);

      const offered = model.doGenerateCalls[0]?.tools?.[0];
      assert.equal(offered?.type === 'function' && offered.name, 'python');
      const description = offered?.type === 'function' ? (offered.description ?? '') : '';
      assert.match(description, /async def weather\(self, city: str\)/);
      assert.match(description, /the temperature of a city/i);
      assert.match(description, /wall 60000 ms/, 'the stub header shows the run limits');

      const output = toolResultOf(model, 1) as { type: string; value: { type: string; text?: string; data?: string; mediaType?: string }[] };
      assert.equal(output.type, 'content');
      assert.deepEqual(output.value[0], { type: 'text', text: CHART_TEXT });
      assert.equal(output.value.length, 2);
      assert.equal(output.value[1]?.type, 'image-data');
      assert.equal(output.value[1]?.mediaType, 'image/png');
      assertPng(output.value[1]?.data ?? '');
    } finally {
      await python.close();
    }
  });

  test('C942 state stays from one turn to the next; close() ends the session and the daemon', async () => {
    const before = daemonChildren().length;
    const python = await codeTool({ tools: hostTools([]), start });
    assert.equal(daemonChildren().length, before, 'the stubs are rendered without a daemon');
    const first = new MockLanguageModelV3({ doGenerate: [callPython('x = await tools.cities()\nreturn len(x)'), answer] });
    await generateText({ model: first, tools: { python }, prompt: 'one', stopWhen: stepCountIs(3) });
    assert.equal(daemonChildren().length, before + 1, 'the first call started the daemon');
    const second = new MockLanguageModelV3({ doGenerate: [callPython('return x[0]', 'call-2'), answer] });
    await generateText({ model: second, tools: { python }, prompt: 'two', stopWhen: stepCountIs(3) });
    assert.deepEqual(toolResultOf(second, 1), { type: 'content', value: [{ type: 'text', text: 'value: "Paris"' }] });
    await python.close();
    assert.equal(daemonChildren().length, before, 'close() ended the daemon');
    await python.close();
  });

  test('C942 session: false runs every call fresh', async () => {
    await using python = await codeTool({ tools: hostTools([]), start, session: false });
    const model = new MockLanguageModelV3({
      doGenerate: [callPython('x = 1\nreturn x'), callPython(py('try:', '    return x', 'except NameError:', '    return "fresh"'), 'call-2'), answer],
    });
    await generateText({ model, tools: { python }, prompt: 'p', stopWhen: stepCountIs(4) });
    assert.deepEqual(toolResultOf(model, 2), { type: 'content', value: [{ type: 'text', text: 'value: 1' }] });
    const last = model.doGenerateCalls[2]?.prompt.filter((m) => m.role === 'tool').at(-1);
    assert.deepEqual(last?.role === 'tool' && last.content[0]?.type === 'tool-result' && last.content[0].output, {
      type: 'content',
      value: [{ type: 'text', text: 'value: "fresh"' }],
    });
  });

  test('C943 the abort signal of the tool call cancels the run; the next call is told the session is gone', async () => {
    const controller = new AbortController();
    const started = tool({
      inputSchema: z.object({}),
      execute: async () => {
        controller.abort();
        return null;
      },
    });
    await using python = await codeTool({ tools: { started }, start });
    const execute = python.execute;
    assert.ok(execute !== undefined);
    const call = { toolCallId: 'c', messages: [] };
    const out = (await execute({ program: 'await tools.started()\nwhile True:\n    pass' }, { ...call, abortSignal: controller.signal })) as ModelOutput;
    assert.match(out.text, /^error \(abort\): run cancelled by the client.*\n# the Python session ended \(.+\): its variables are gone; the next call starts a fresh one$/s);
    const next = (await execute({ program: 'return 1' }, call)) as ModelOutput;
    assert.match(next.text, /^# the Python session ended \(.+\): its variables are gone; this call started a fresh one\nvalue: 1$/);
  });

  test('C958 limits that fix the address space apply to the session and every call, as the stubs say', async () => {
    await using python = await codeTool({ tools: hostTools([]), start, limits: { addressSpaceMb: 400, maxWallMs: 20_000 } });
    assert.match(python.description ?? '', /wall 20000 ms/);
    const execute = python.execute;
    assert.ok(execute !== undefined);
    const call = { toolCallId: 'c', messages: [] };
    assert.equal(((await execute({ program: 'x = 2\nreturn x' }, call)) as ModelOutput).text, 'value: 2');
    assert.equal(((await execute({ program: 'return x + 1' }, call)) as ModelOutput).text, 'value: 3');
  });

  test('C959 a daemon without sessions: the description says every call is fresh, and it is', async () => {
    await using python = await codeTool({ tools: hostTools([]), start: { ...start, env: { ...start.env, CODERUN_MAX_SESSIONS: '0' } } });
    assert.match(python.description ?? '', /Every run starts a fresh interpreter/);
    const execute = python.execute;
    assert.ok(execute !== undefined);
    const call = { toolCallId: 'c', messages: [] };
    await execute({ program: 'x = 1' }, call);
    const second = (await execute({ program: py('try:', '    return x', 'except NameError:', '    return "fresh"') }, call)) as ModelOutput;
    assert.equal(second.text, 'value: "fresh"');
  });
});
