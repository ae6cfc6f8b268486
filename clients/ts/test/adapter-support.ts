/**
 * What the framework adapters' end-to-end tests share: the daemon to start (the real one, its
 * children on the project's .venv interpreter, which has matplotlib), two host tools, the
 * program a model writes to call both and draw a chart, and checks on what the model reads.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ModelOutput } from '../src/format.js';
import type { StartOptions } from '../src/node.js';
import { bin, py, skip as noDaemon } from './real-daemon.js';

export { py };

/** The project's virtual environment interpreter (make test installs it, with matplotlib). */
export const venvPython = fileURLToPath(new URL('../../../../.venv/bin/python', import.meta.url));

/** Why the adapter suites cannot run here, if they cannot. */
export const skip = noDaemon || (existsSync(venvPython) ? false : `no ${venvPython} (make test installs it)`);

/** How the adapters start their daemon in the tests. */
export const start: StartOptions = { command: bin, env: { CODERUN_GRACE_MS: '200', CODERUN_PYTHON_BIN: venvPython } };

/** The host's data: the two tools read it. */
export const TEMPS: Record<string, number> = { Paris: 18, Oslo: 7 };

/**
 * A program that calls both tools, logs, draws a bar chart and returns the temperatures
 * (matplotlib's cache goes to the run directory: the sandbox has no home, docs/containment.md).
 */
export const CHART_PROGRAM = py(
  'import os',
  'os.environ["MPLCONFIGDIR"] = os.getcwd()',
  'import matplotlib.pyplot as plt',
  'names = await tools.cities()',
  'temps = {}',
  'for name in names:',
  '    temps[name] = (await tools.weather(city=name))["temp"]',
  'print("cities:", len(names))',
  'plt.bar(list(temps), list(temps.values()))',
  'plt.show()',
  'return temps',
);

/** What the model must read after {@link CHART_PROGRAM}: the log, then the value. */
export const CHART_TEXT = 'cities: 2\nvalue: {"Paris":18,"Oslo":7}';

const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** Asserts that `data` is a base64 PNG image. */
export function assertPng(data: string): void {
  assert.deepEqual(Buffer.from(data, 'base64').subarray(0, 8), PNG_MAGIC);
}

/** Asserts the formatted output of {@link CHART_PROGRAM}: its text and one PNG chart. */
export function assertChart(output: ModelOutput): void {
  assert.equal(output.text, CHART_TEXT);
  assert.equal(output.images.length, 1);
  assert.equal(output.images[0]?.mediaType, 'image/png');
  assertPng(output.images[0]?.data ?? '');
}

/** The pids of this process's children that run `exe` (the daemons an adapter started). */
export function daemonChildren(exe = bin): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid && readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0')[0] === exe) pids.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}
