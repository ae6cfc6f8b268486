/**
 * The OpenAI Agents SDK adapter end to end: the SDK's own scripted test model calls the code
 * tool through `run(agent, …)`, the program calls two function tools on the host and draws a
 * chart, and the model's next request carries the text and the image.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Agent, run, setTracingDisabled, tool } from '@openai/agents';
import { assistantMessage, functionCall, ScriptedModel } from '@openai/agents/testing';
import { z } from 'zod';
import { codeTool } from '../src/adapters/openai-agents.js';
import { assertPng, CHART_PROGRAM, CHART_TEXT, daemonChildren, skip, start, TEMPS } from './adapter-support.js';

setTracingDisabled(true); // no exporter: the tests talk to no one

/** The two host tools, recording the cities asked for. */
function hostTools(asked: string[]) {
  return [
    tool({ name: 'cities', description: 'The cities we know.', parameters: z.object({}), execute: async () => Object.keys(TEMPS) }),
    tool({
      name: 'weather',
      description: 'The temperature of a city.',
      parameters: z.object({ city: z.string().describe('the city') }),
      execute: async ({ city }) => {
        asked.push(city);
        return { city, temp: TEMPS[city] ?? null };
      },
    }),
  ];
}

/** The output the model's request `call` carries for the code tool's call `callId`. */
function outputOf(model: ScriptedModel, call: number, callId: string): unknown {
  const input = model.calls[call]?.request.input;
  assert.ok(Array.isArray(input));
  const item = input.find((i) => i.type === 'function_call_result' && i.callId === callId);
  assert.ok(item !== undefined && item.type === 'function_call_result', `the model got the result of ${callId}`);
  return item.output;
}

describe('OpenAI Agents code tool against the real daemon', { skip }, () => {
  test('C944 an agent run calls a program that calls two host tools and returns a chart the model sees', async () => {
    const asked: string[] = [];
    await using python = await codeTool({ tools: hostTools(asked), start, limits: { maxWallMs: 60_000 } });
    const model = new ScriptedModel([
      [functionCall('run_python', { program: CHART_PROGRAM }, { callId: 'c1' })],
      [assistantMessage('done')],
    ]);
    const agent = new Agent({ name: 'analyst', model, tools: [python] });
    const result = await run(agent, 'chart the temperatures');
    assert.equal(result.finalOutput, 'done');
    assert.deepEqual(asked, ['Paris', 'Oslo']);

    const offered = model.calls[0]?.request.tools.find((t) => t.type === 'function' && t.name === 'run_python');
    const description = offered?.type === 'function' ? offered.description : '';
    assert.match(description, /async def weather\(self, city: str\)/);
    assert.match(description, /wall 60000 ms/, 'the stub header shows the run limits');

    const output = outputOf(model, 1, 'c1') as { type: string; text?: string; image?: string }[];
    assert.deepEqual(output[0], { type: 'input_text', text: CHART_TEXT });
    assert.equal(output.length, 2);
    assert.equal(output[1]?.type, 'input_image');
    const url = String(output[1]?.image);
    assert.ok(url.startsWith('data:image/png;base64,'), url.slice(0, 40));
    assertPng(url.slice('data:image/png;base64,'.length));
  });

  test('C945 state stays across agent runs; close() ends the daemon', async () => {
    const before = daemonChildren().length;
    const python = await codeTool({ tools: hostTools([]), start });
    const model = new ScriptedModel([
      [functionCall('run_python', { program: 'x = await tools.cities()\nreturn len(x)' }, { callId: 'a' })],
      [assistantMessage('one')],
      [functionCall('run_python', { program: 'return x[1]' }, { callId: 'b' })],
      [assistantMessage('two')],
    ]);
    const agent = new Agent({ name: 'analyst', model, tools: [python] });
    await run(agent, 'first');
    await run(agent, 'second');
    assert.deepEqual(outputOf(model, 3, 'b'), [{ type: 'input_text', text: 'value: "Oslo"' }]);
    await python.close();
    assert.equal(daemonChildren().length, before);
  });

  test('C946 a tool that needs approval is refused to the program; a guarded tool is refused up front', async () => {
    const secret = tool({ name: 'secret', description: 'needs a human', parameters: z.object({}), needsApproval: true, execute: async () => 'leaked' });
    await using python = await codeTool({ tools: [secret], start });
    const model = new ScriptedModel([
      [functionCall('run_python', { program: 'try:\n    return await tools.secret()\nexcept ToolError as e:\n    return str(e)' }, { callId: 'c' })],
      [assistantMessage('done')],
    ]);
    await run(new Agent({ name: 'a', model, tools: [python] }), 'p');
    assert.deepEqual(outputOf(model, 1, 'c'), [{ type: 'input_text', text: 'value: "secret needs approval, which a program cannot ask for"' }]);

    const guarded = tool({
      name: 'guarded',
      description: 'guarded',
      parameters: z.object({}),
      execute: async () => 'x',
      inputGuardrails: [{ type: 'tool_input', name: 'g', run: async () => ({ behavior: { type: 'allow' } }) }],
    });
    await assert.rejects(codeTool({ tools: [guarded], start }), /tool "guarded" has guardrails/);
  });
});
