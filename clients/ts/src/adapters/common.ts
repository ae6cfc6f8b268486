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

/**
 * The value a tool produced: the last one of a streaming tool (an async iterable), `null` for
 * none. A stream is read until `signal` fires (the run no longer needs the value), then closed:
 * a tool that streams forever must not outlive its run.
 */
export async function lastOf(value: unknown, signal: AbortSignal): Promise<unknown> {
  if (value === null || typeof value !== 'object' || !(Symbol.asyncIterator in value)) return value === undefined ? null : value;
  const iterator = (value as AsyncIterable<unknown>)[Symbol.asyncIterator]();
  const aborted = new Promise<never>((_, reject) => {
    const fail = () => reject(signal.reason);
    if (signal.aborted) fail();
    else signal.addEventListener('abort', fail, { once: true });
  });
  aborted.catch(() => {});
  let last: unknown = null;
  try {
    for (;;) {
      const step = await Promise.race([iterator.next(), aborted]);
      if (step.done === true) return last;
      last = step.value;
    }
  } finally {
    void Promise.resolve(iterator.return?.()).catch(() => {});
  }
}

/** The program of the code tool's input, which a framework may pass on unchecked. */
export function programOf(input: unknown): string {
  const program = input !== null && typeof input === 'object' ? (input as { program?: unknown }).program : undefined;
  if (typeof program !== 'string') throw new TypeError('program is required (a string)');
  return program;
}
