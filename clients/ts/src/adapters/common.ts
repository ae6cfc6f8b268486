/** What the framework adapters share besides {@link CodeMode}: the code tool's input, schema checks. */
import type { ObjectSchema } from '../schema.js';

/** The code tool's input: one program. */
export const PROGRAM_SCHEMA = {
  type: 'object',
  properties: { program: { type: 'string', description: 'the Python program' } },
  required: ['program'],
  additionalProperties: false,
} as const;

/** The default name of the code tool. */
export const CODE_TOOL_NAME = 'run_python';

/**
 * `schema` as a function's `parameters`: it must be an object schema (the daemon refuses any
 * other, with a path the user would not recognise, so the tool is named here).
 */
export function objectSchema(tool: string, schema: unknown): ObjectSchema {
  const s = schema as { type?: unknown } | null;
  if (s === null || typeof s !== 'object' || Array.isArray(s) || s.type !== 'object') {
    throw new TypeError(`tool ${JSON.stringify(tool)}: its input schema must be a JSON Schema of "type": "object"`);
  }
  return s as ObjectSchema;
}

/** The value a tool produced: the last one of a streaming tool (an async iterable), `null` for none. */
export async function lastOf(value: unknown): Promise<unknown> {
  if (value !== null && typeof value === 'object' && Symbol.asyncIterator in value) {
    let last: unknown = null;
    for await (const v of value as AsyncIterable<unknown>) last = v;
    return last;
  }
  return value === undefined ? null : value;
}

/** The program of the code tool's input, which a framework may pass on unchecked. */
export function programOf(input: unknown): string {
  const program = input !== null && typeof input === 'object' ? (input as { program?: unknown }).program : undefined;
  if (typeof program !== 'string') throw new TypeError('program is required (a string)');
  return program;
}
