/**
 * Code mode for the OpenAI Agents SDK for JavaScript (`@openai/agents`): `codeTool({ tools })`
 * takes the agent's function tools and returns one function tool whose description carries their
 * Python stubs and whose calls run a program in coderun; the program's calls go to each tool's
 * own `invoke` (its parsing and its error function included).
 *
 *   import { codeTool } from '@coderun/client/openai-agents';
 *   const python = await codeTool({ tools: [weather, cities] });
 *   const agent = new Agent({ name: 'analyst', tools: [python] });
 *   await run(agent, 'chart the temperatures');
 *   await python.close();
 */
import { tool } from '@openai/agents';
import type { FunctionTool, RunContext, Tool } from '@openai/agents';
import { describedMode } from './codemode.js';
import type { CodeModeOptions, HostFunction } from './codemode.js';
import { CODE_TOOL_NAME, objectSchema, PROGRAM_SCHEMA, programOf } from './common.js';
import type { ModelOutput } from '../format.js';
import type { JsonValue } from '../types.js';

export type { CodeModeOptions } from './codemode.js';

export interface CodeToolOptions extends CodeModeOptions {
  /** The function tools the program may call. */
  tools: Tool[];
  /** The code tool's name (default `run_python`). */
  name?: string;
}

/** The code tool: a function tool, plus `close()` (the session and the daemon it started). */
export type CodeTool = FunctionTool<any, any, any> & AsyncDisposable & { close(): Promise<void> };

/** The run context of the code tool's call, which the program's tool calls run in. */
type CallContext = RunContext<unknown>;

/** A tool output the SDK sends as content items: the text, then each image. */
type StructuredOutput = ({ type: 'text'; text: string } | { type: 'image'; image: { data: string; mediaType: string } })[];

/** The model's view of a run. */
export function toToolOutput(output: ModelOutput): StructuredOutput {
  return [{ type: 'text', text: output.text }, ...output.images.map((i) => ({ type: 'image' as const, image: { data: i.data, mediaType: i.mediaType } }))];
}

/**
 * The host function of `t`. A tool the runner would guard (input or output guardrails) is
 * refused: a call from the program would skip them. One that needs approval is asked, per call,
 * and refused to the program when approval is needed (the program cannot wait for a human).
 */
function hostFunction(t: Tool): HostFunction<CallContext> {
  if (t.type !== 'function') throw new TypeError(`tool ${JSON.stringify(t.name)} is a ${t.type} tool: only function tools can be called from a program`);
  if ((t.inputGuardrails?.length ?? 0) > 0 || (t.outputGuardrails?.length ?? 0) > 0) {
    throw new TypeError(`tool ${JSON.stringify(t.name)} has guardrails, which a call from a program would skip`);
  }
  const f: HostFunction<CallContext> = {
    name: t.name,
    parameters: objectSchema(t.name, t.parameters),
    async call(args: JsonValue, signal: AbortSignal, context: CallContext) {
      if (await t.needsApproval(context, args as never)) throw new Error(`${t.name} needs approval, which a program cannot ask for`);
      const value = await t.invoke(context, JSON.stringify(args), { signal });
      return value === undefined ? null : value;
    },
  };
  if (t.description !== '') f.description = t.description;
  return f;
}

/**
 * One function tool that runs a Python program calling `options.tools`. Starts the daemon (or
 * uses `options.client`) to render the stubs; the session opens on the first call. Close it
 * with `close()` (or `await using`) when the agent is done.
 */
export async function codeTool(options: CodeToolOptions): Promise<CodeTool> {
  const { mode, description } = await describedMode<CallContext>(options.tools.map(hostFunction), options);
  const code = tool({
    name: options.name ?? CODE_TOOL_NAME,
    description,
    parameters: { ...PROGRAM_SCHEMA, required: [...PROGRAM_SCHEMA.required] },
    strict: true,
    execute: async (input, context, details) => {
      if (context === undefined) throw new Error('the code tool runs inside an agent run');
      return toToolOutput((await mode.run(programOf(input), context, details?.signal)).output);
    },
  });
  return Object.assign(code, { close: () => mode.close(), [Symbol.asyncDispose]: () => mode.close() });
}
