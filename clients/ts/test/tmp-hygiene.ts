/**
 * Test hygiene for a test file that starts daemons (import it first): every daemon the file
 * starts inherits TMPDIR = a temporary directory of the file's own, so whatever it stages stays
 * there; after the file's tests, the file fails when anything named coderun-* appeared in the
 * machine's temporary directory meanwhile (leakcheck.Suite is the Go suites' counterpart).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

const machineTmp = tmpdir();
const ours = (): Set<string> => new Set(readdirSync(machineTmp).filter((n) => n.startsWith('coderun-')));
const before = ours();
const own = mkdtempSync(join(machineTmp, 'ts-test-'));
process.env['TMPDIR'] = own;

after(async () => {
  let left: string[] = [];
  for (const deadline = Date.now() + 5000; ; await sleep(50)) {
    left = [...ours()].filter((n) => !before.has(n));
    if (left.length === 0 || Date.now() > deadline) break;
  }
  rmSync(own, { recursive: true, force: true });
  assert.deepEqual(left, [], `the tests left entries named coderun-* in ${machineTmp}`);
});
