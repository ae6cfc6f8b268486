/**
 * Code mode for the Vercel AI SDK (`ai` ≥ 6): `codeTool({ tools })` takes an AI SDK tool set and
 * returns one tool whose description carries the tools' Python stubs and whose calls run a
 * program in coderun; the program's calls go to the original `execute` functions.
 *
 *   import { codeTool } from '@coderun/client/ai';
 *   const python = await codeTool({ tools: { weather, cities } });
 *   await generateText({ model, tools: { python }, prompt });
 *   await python.close();
 */
import { asSchema, jsonSchema, tool } from 'ai';
import type { Tool, ToolExecutionOptions, ToolSet } from 'ai';
import { describedMode } from './codemode.js';
import type { CodeModeOptions, HostFunction } from './codemode.js';
import { lastOf, objectSchema, PROGRAM_SCHEMA, programOf } from './common.js';
import type { ModelOutput } from '../format.js';
import type { JsonValue } from '../types.js';

export type { CodeModeOptions } from './codemode.js';
export type { ModelImage, ModelOutput } from '../format.js';

/** What a tool's `toModelOutput` returns (the SDK does not export the type by name). */
type ToolResultOutput = Awaited<ReturnType<NonNullable<Tool['toModelOutput']>>>;

export interface CodeToolOptions extends CodeModeOptions {
  /** The tools the program may call, by name; each needs an `execute`. */
  tools: ToolSet;
}

/** The code tool: an AI SDK tool, plus `close()` (the session and the daemon it started). */
export type CodeTool = Tool<{ program: string }, ModelOutput> & AsyncDisposable & { close(): Promise<void> };

/** The host function of tool `name`: its schemas through the SDK's `asSchema`, its `execute`. */
async function hostFunction(name: string, t: Tool): Promise<HostFunction<ToolExecutionOptions>> {
  const execute = t.execute;
  if (t.type === 'provider' || typeof execute !== 'function') {
    throw new TypeError(`tool ${JSON.stringify(name)} has no execute function: the program could not call it`);
  }
  const input = asSchema(t.inputSchema);
  const f: HostFunction<ToolExecutionOptions> = {
    name,
    parameters: objectSchema(name, await input.jsonSchema),
    async call(args: JsonValue, signal: AbortSignal, options: ToolExecutionOptions) {
      return lastOf(await execute(await validated(name, input.validate, args), { ...options, abortSignal: signal }), signal);
    },
  };
  if (typeof t.description === 'string') f.description = t.description;
  if (t.outputSchema !== undefined) f.returns = (await asSchema(t.outputSchema).jsonSchema) as HostFunction<never>['returns'];
  return f;
}

/** `args` through the tool's own validator (a Zod schema may refine, default or transform). */
async function validated(name: string, validate: ((v: unknown) => unknown) | undefined, args: JsonValue): Promise<unknown> {
  if (validate === undefined) return args;
  const result = (await validate(args)) as { success: true; value: unknown } | { success: false; error: Error };
  if (!result.success) throw new TypeError(`${name}: invalid arguments: ${result.error.message}`);
  return result.value;
}

/** The model's view of a run: its text, then each image as an image part. */
export function toModelOutput(output: ModelOutput): ToolResultOutput {
  return {
    type: 'content',
    value: [
      { type: 'text', text: output.text },
      ...output.images.map((i) => ({ type: 'image-data' as const, data: i.data, mediaType: i.mediaType })),
    ],
  };
}

/**
 * One tool that runs a Python program calling `options.tools`. Starts the daemon (or uses
 * `options.client`) to render the stubs; the session opens on the first call. Close it with
 * `close()` (or `await using`) when the agent is done.
 */
export async function codeTool(options: CodeToolOptions): Promise<CodeTool> {
  const functions = await Promise.all(Object.entries(options.tools).map(([name, t]) => hostFunction(name, t)));
  const { mode, description } = await describedMode<ToolExecutionOptions>(functions, options);
  const code = tool({
    description,
    inputSchema: jsonSchema<{ program: string }>(PROGRAM_SCHEMA),
    execute: async (input, execution) => (await mode.run(programOf(input), execution, execution.abortSignal)).output,
    toModelOutput: ({ output }) => toModelOutput(output),
  });
  return Object.assign(code, { close: () => mode.close(), [Symbol.asyncDispose]: () => mode.close() });
}
