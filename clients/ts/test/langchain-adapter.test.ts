/**
 * The LangChain.js adapter end to end: LangChain's fake chat model, bound to the code tool,
 * answers with a tool call; the tool call runs a program that calls two structured tools on
 * the host and draws a chart, and the ToolMessage the model gets back carries the text and
 * the image (and the run result as its artifact).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AIMessageChunk, ToolMessage } from '@langchain/core/messages';
import type { AIMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { FakeStreamingChatModel } from '@langchain/core/utils/testing';
import { z } from 'zod';
import { codeTool } from '../src/adapters/langchain.js';
import type { RunResult } from '../src/index.js';
import { assertPng, CHART_PROGRAM, CHART_TEXT, daemonChildren, skip, start, TEMPS } from './adapter-support.js';

/** The two host tools, recording the cities asked for. */
function hostTools(asked: string[]) {
  return [
    tool(async () => Object.keys(TEMPS), { name: 'cities', description: 'The cities we know.', schema: z.object({}) }),
    tool(
      async ({ city }: { city: string }) => {
        asked.push(city);
        return { city, temp: TEMPS[city] ?? null };
      },
      { name: 'weather', description: 'The temperature of a city.', schema: z.object({ city: z.string().describe('the city') }) },
    ),
  ];
}

/** The fake model's answer: one call of `run_python` with `program`. */
function modelCalling(program: string, id: string): FakeStreamingChatModel {
  return new FakeStreamingChatModel({ chunks: [new AIMessageChunk({ content: '', tool_calls: [{ id, name: 'run_python', args: { program } }] })] });
}

/** One model turn: the model (bound to the tool) asks, the tool call runs, its message comes back. */
async function turn(python: Awaited<ReturnType<typeof codeTool>>, program: string, id: string): Promise<ToolMessage> {
  const model = modelCalling(program, id).bindTools([python]);
  const ai = (await model.invoke('chart the temperatures')) as AIMessage;
  const call = ai.tool_calls?.[0];
  assert.ok(call !== undefined, 'the model called a tool');
  const message: unknown = await python.invoke({ ...call, type: 'tool_call' });
  assert.ok(message instanceof ToolMessage);
  return message;
}

describe('LangChain code tool against the real daemon', { skip }, () => {
  test('C947 a model tool call runs a program that calls two host tools and returns a chart the model sees', async () => {
    const asked: string[] = [];
    await using python = await codeTool({ tools: hostTools(asked), start, limits: { maxWallMs: 60_000 } });
    assert.match(python.description, /async def weather\(self, city: str\)/);
    assert.match(python.description, /wall 60000 ms/, 'the stub header shows the run limits');

    const message = await turn(python, CHART_PROGRAM, 'c1');
    assert.deepEqual(asked, ['Paris', 'Oslo']);
    assert.equal(message.tool_call_id, 'c1');
    const blocks = message.content as { type: string; text?: string; mimeType?: string; data?: string }[];
    assert.deepEqual(blocks[0], { type: 'text', text: CHART_TEXT });
    assert.equal(blocks.length, 2);
    assert.equal(blocks[1]?.type, 'image');
    assert.equal(blocks[1]?.mimeType, 'image/png');
    assertPng(blocks[1]?.data ?? '');
    assert.deepEqual((message.artifact as RunResult).value, TEMPS);
  });

  test('C948 state stays from one call to the next; close() ends the daemon', async () => {
    const before = daemonChildren().length;
    const python = await codeTool({ tools: hostTools([]), start });
    await turn(python, 'x = await tools.cities()', 'a');
    const second = await turn(python, 'return x', 'b');
    assert.deepEqual(second.content, [{ type: 'text', text: 'value: ["Paris","Oslo"]' }]);
    await python.close();
    assert.equal(daemonChildren().length, before);
  });

  test('C948 the signal of the tool call cancels the run (else the next call would wait out a 10-minute budget)', async () => {
    const controller = new AbortController();
    const stop = tool(
      async () => {
        controller.abort();
        return null;
      },
      { name: 'stop', schema: z.object({}) },
    );
    await using python = await codeTool({ tools: [stop], start, limits: { maxWallMs: 600_000 } });
    const call = (id: string, program: string) => ({ id, name: 'run_python', args: { program }, type: 'tool_call' as const });
    // LangChain rejects the call as soon as its signal fires; the run is cancelled underneath.
    await assert.rejects(python.invoke(call('s', 'await tools.stop()\nwhile True:\n    pass'), { signal: controller.signal }));
    const next: unknown = await python.invoke(call('n', 'return 1'));
    assert.ok(next instanceof ToolMessage);
    assert.match(String((next.content as { text: string }[])[0]?.text), /^# the Python session ended \(.+\): its variables are gone; this call started a fresh one\nvalue: 1$/);
  });
});
