/**
 * Code mode for LangChain.js (`@langchain/core`): `codeTool({ tools })` takes structured tools and
 * returns one tool whose description carries their Python stubs and whose calls run a program in
 * coderun; the program's calls go to each tool's own `invoke` (its schema check included). The
 * result is content blocks (the text, then each image) with the run result as the artifact.
 *
 *   import { codeTool } from '@coderun/client/langchain';
 *   const python = await codeTool({ tools: [weather, cities] });
 *   const model = chatModel.bindTools([python]);
 *   await python.close();
 */
import { isDirectToolOutput } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import type { DynamicStructuredTool, StructuredToolInterface, ToolRunnableConfig } from '@langchain/core/tools';
import { toJsonSchema } from '@langchain/core/utils/json_schema';
import { describedMode } from './codemode.js';
import type { CodeModeOptions, HostFunction } from './codemode.js';
import { CODE_TOOL_NAME, objectSchema, PROGRAM_SCHEMA, programOf } from './common.js';
import type { ModelOutput } from '../format.js';
import type { JsonValue, RunResult } from '../types.js';

export type { CodeModeOptions } from './codemode.js';

export interface CodeToolOptions extends CodeModeOptions {
  /** The tools the program may call. */
  tools: StructuredToolInterface[];
  /** The code tool's name (default `run_python`). */
  name?: string;
}

/** The code tool: a LangChain tool, plus `close()` (the session and the daemon it started). */
export type CodeTool = DynamicStructuredTool & AsyncDisposable & { close(): Promise<void> };

/** A content block of the code tool's result. */
type Block = { type: 'text'; text: string } | { type: 'image'; mimeType: string; data: string };

/** The model's view of a run: the text, then each image, as standard content blocks. */
export function toContentBlocks(output: ModelOutput): Block[] {
  return [{ type: 'text', text: output.text }, ...output.images.map((i) => ({ type: 'image' as const, mimeType: i.mediaType, data: i.data }))];
}

/** What of the code tool's call config its tools' calls inherit: tracing and configuration, not the call's identity. */
function innerConfig(config: ToolRunnableConfig, signal: AbortSignal): ToolRunnableConfig {
  const inner: ToolRunnableConfig = { signal };
  if (config.callbacks !== undefined) inner.callbacks = config.callbacks;
  if (config.configurable !== undefined) inner.configurable = config.configurable;
  if (config.metadata !== undefined) inner.metadata = config.metadata;
  if (config.tags !== undefined) inner.tags = config.tags;
  return inner;
}

/** The host function of `t`: its schema as JSON Schema, its `invoke`. */
function hostFunction(t: StructuredToolInterface): HostFunction<ToolRunnableConfig> {
  const f: HostFunction<ToolRunnableConfig> = {
    name: t.name,
    parameters: objectSchema(t.name, toJsonSchema(t.schema as Parameters<typeof toJsonSchema>[0])),
    async call(args: JsonValue, signal: AbortSignal, config: ToolRunnableConfig) {
      const value: unknown = await t.invoke(args as never, innerConfig(config, signal));
      // A tool may answer with a message of its own: the program gets its content.
      const content = isDirectToolOutput(value) && 'content' in value ? value.content : value;
      return content === undefined ? null : content;
    },
  };
  if (t.description !== '') f.description = t.description;
  return f;
}

/**
 * One tool that runs a Python program calling `options.tools`. Starts the daemon (or uses
 * `options.client`) to render the stubs; the session opens on the first call. Close it with
 * `close()` (or `await using`) when the agent is done.
 */
export async function codeTool(options: CodeToolOptions): Promise<CodeTool> {
  const { mode, description } = await describedMode<ToolRunnableConfig>(options.tools.map(hostFunction), options);
  const code = tool(
    async (input: unknown, config: ToolRunnableConfig): Promise<[Block[], RunResult]> => {
      const { output, result } = await mode.run(programOf(input), config, config.signal);
      return [toContentBlocks(output), result];
    },
    {
      name: options.name ?? CODE_TOOL_NAME,
      description,
      schema: { ...PROGRAM_SCHEMA, required: [...PROGRAM_SCHEMA.required] },
      responseFormat: 'content_and_artifact',
    },
  ) as DynamicStructuredTool;
  return Object.assign(code, { close: () => mode.close(), [Symbol.asyncDispose]: () => mode.close() });
}
