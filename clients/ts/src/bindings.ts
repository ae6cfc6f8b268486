/**
 * Binding declarations, read two ways: as the daemon sees them (the `bindings` member of `run`
 * and `bindings/describe`) and as the client dispatches `binding/call` (namespace → name →
 * handler). Schemas are forwarded as given; the daemon compiles and enforces them.
 */
import type { Binding, BindingEntry, BindingFunction } from './types.js';

/** A `functions` entry on the wire: a name (untyped) or a declaration object. */
type WireFunction = string | { name: string; description?: unknown; parameters?: unknown; returns?: unknown };

/** The members of a typed entry that go on the wire, besides its name. */
const DECLARED = ['description', 'parameters', 'returns'] as const;

function entriesOf(b: Binding): [string, BindingEntry][] {
  return b.functions instanceof Map ? [...b.functions] : Object.entries(b.functions ?? {});
}

function notAnEntry(b: Binding, name: string): TypeError {
  const where = `binding ${JSON.stringify(b.global)}.${JSON.stringify(name)}`;
  return new TypeError(`${where} is not a function or a {handler, description?, parameters?, returns?} entry`);
}

/** The handler of `entry`; a `TypeError` naming the entry when it has none. */
function handlerOf(b: Binding, name: string, entry: BindingEntry): BindingFunction {
  if (typeof entry === 'function') return entry;
  const handler: unknown = entry !== null && typeof entry === 'object' ? entry.handler : undefined;
  if (typeof handler !== 'function') throw notAnEntry(b, name);
  return handler as BindingFunction;
}

function wireFunction(b: Binding, name: string, entry: BindingEntry): WireFunction {
  if (typeof entry === 'function') return name;
  if (entry === null || typeof entry !== 'object') throw notAnEntry(b, name);
  const wire: Exclude<WireFunction, string> = { name };
  for (const key of DECLARED) {
    if (entry[key] !== undefined) wire[key] = entry[key];
  }
  return wire;
}

/**
 * `bindings` as sent: each bare handler as its name, each typed entry as `{name, description?,
 * parameters?, returns?}` (members left `undefined` are left out). Handlers are not looked at.
 */
export function wireBindings(bindings: Binding[]): unknown[] {
  return bindings.map((b) => {
    const wire: { [k: string]: unknown } =
      b.mcp !== undefined
        ? { global: b.global, mcp: b.mcp }
        : { global: b.global, functions: entriesOf(b).map(([name, entry]) => wireFunction(b, name, entry)) };
    if (b.errorClass !== undefined && b.errorClass !== null) wire['errorClass'] = { ...b.errorClass };
    return wire;
  });
}

/** Namespace → member → handler, for dispatching `binding/call`; throws on an entry without one. */
export function handlerTable(bindings: Binding[]): Map<string, Map<string, BindingFunction>> {
  const table = new Map<string, Map<string, BindingFunction>>();
  for (const b of bindings) {
    table.set(b.global, new Map(entriesOf(b).map(([name, entry]) => [name, handlerOf(b, name, entry)])));
  }
  return table;
}
