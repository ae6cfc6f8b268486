// The client's wire types against the daemon's OpenRPC description (docs/openrpc.json,
// generated from the tables the daemon validates and dispatches with). Each key list below is
// tied to its type by `satisfies`, so the compiler keeps it exact and this test compares it
// with the document.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type {
  FailureKind,
  LogEvent,
  RunFailure,
  RunLimits,
  RunStats,
  Secret,
  SessionClosedEvent,
  SessionClosedReason,
  SessionInfo,
} from '../src/types.js';

interface Doc {
  methods: { name: string; 'x-from': string; params: { name: string }[] }[];
  components: { schemas: Record<string, { properties: Record<string, { enum?: string[] }> }> };
}
const doc = JSON.parse(readFileSync(new URL('../../../../docs/openrpc.json', import.meta.url), 'utf8')) as Doc;
const props = (schema: string): string[] => Object.keys(doc.components.schemas[schema]!.properties).sort();
const params = (method: string): string[] =>
  doc.methods.find((m) => m.name === method && m['x-from'] === 'daemon')!.params.map((p) => p.name).sort();
const keys = (o: object): string[] => Object.keys(o).sort();
// AllKeys is every member of every arm of a union (keyof keeps only the common ones).
type AllKeys<T> = T extends unknown ? keyof T : never;

const limits = {
  cpuSeconds: true, maxWallMs: true, addressSpaceMb: true, maxLogBytes: true, maxValueBytes: true,
  maxFileBytes: true, maxOutputBytes: true, maxDiskMb: true, maxEgressRequests: true, maxEgressBytes: true,
} satisfies Record<keyof RunLimits, true>;
const stats = {
  wallMs: true, cpuMs: true, maxRssKb: true, queueMs: true, bindingCalls: true, logBytes: true, installMs: true,
} satisfies Record<keyof RunStats, true>;
const failure = {
  kind: true, message: true, exceptionType: true, line: true, budget: true, exitCode: true, signal: true,
  path: true, hint: true,
} satisfies Record<keyof RunFailure, true>;
const kinds = {
  exception: true, timeout: true, abort: true, 'worker-exit': true, 'invalid-output': true, 'output-limit': true,
} satisfies Record<FailureKind, true>;
const session = { id: true, alive: true, runs: true, reason: true } satisfies Record<keyof SessionInfo, true>;
const closed = { sessionId: true, reason: true, message: true } satisfies Record<keyof SessionClosedEvent, true>;
const reasons = { idle: true, lost: true, shutdown: true } satisfies Record<SessionClosedReason, true>;
const log = { index: true, text: true, continued: true } satisfies Record<keyof LogEvent, true>;
const secret = { hosts: true, value: true, header: true, query: true, env: true } satisfies Record<AllKeys<Secret>, true>;

test('limits are documented limits', () => {
  const documented = props('Limits');
  for (const k of keys(limits)) assert.ok(documented.includes(k), k);
});

test('result members match the document', () => {
  assert.deepEqual(keys(stats), props('Stats'));
  assert.deepEqual(keys(failure), props('RunError'));
  assert.deepEqual(keys(kinds), [...doc.components.schemas['RunError']!.properties['kind']!.enum!].sort());
  assert.deepEqual(keys(session), props('SessionInfo'));
});

test('secret members match the document', () => {
  assert.deepEqual(keys(secret), props('Secret'));
});

test('notifications match the document', () => {
  assert.deepEqual(keys(closed), params('session/closed'));
  assert.deepEqual(keys(log), params('run/log').filter((p) => p !== 'runId'));
  const reasonSchema = doc.methods.find((m) => m.name === 'session/closed')!.params.find((p) => p.name === 'reason') as
    unknown as { schema: { enum: string[] } };
  assert.deepEqual(keys(reasons), [...reasonSchema.schema.enum].sort());
});
