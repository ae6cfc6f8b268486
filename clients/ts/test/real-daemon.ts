/**
 * The real daemon for integration tests: $CODERUN_RPC_BIN (exported by the Makefile), else
 * ../../bin/coderun-rpc relative to the package. Suites pass {@link skip} to `describe`: they are
 * skipped when neither exists. Importing it applies the test hygiene of tmp-hygiene.ts to the
 * importing file (it runs in a process of its own under node --test).
 */
import './tmp-hygiene.js';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CodeRunClient } from '../src/node.js';
import type { JsonValue, RunResult } from '../src/node.js';

export const bin = process.env['CODERUN_RPC_BIN'] || fileURLToPath(new URL('../../../../bin/coderun-rpc', import.meta.url));
export const skip = existsSync(bin) ? false : `no daemon binary at ${bin} (run make build)`;

/** A client on a fresh daemon whose children get a short grace period. */
export function start(): Promise<CodeRunClient> {
  return CodeRunClient.start({ command: bin, env: { CODERUN_GRACE_MS: '200' } });
}

/** The value of a successful run; fails the test with the error and logs otherwise. */
export function ok(r: RunResult): JsonValue | undefined {
  assert.equal(r.error, undefined, `run failed: ${JSON.stringify(r.error)} logs=${JSON.stringify(r.logs)}`);
  return r.value;
}

/** A program from its lines. */
export const py = (...lines: string[]) => lines.join('\n');

/** True while process `pid` exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
