/**
 * Packages on demand (docs/packages.md) against the real daemon: a find-links directory with one
 * tiny wheel that python3's zipfile writes, no index, no network. uv is the one
 * requirements-test.txt installs into the repository's .venv, else uv on PATH.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { CodeRunClient, InvalidParamsError } from '../src/node.js';
import { bin, ok, py, skip } from './real-daemon.js';

const venvUV = fileURLToPath(new URL('../../../../.venv/bin/uv', import.meta.url));
const uv = existsSync(venvUV) ? venvUV : 'uv';

/** Writes tinyd-1.0-py3-none-any.whl (tinyd.D == "d1") into dir. */
function writeWheel(dir: string): void {
  const script = [
    'import base64, hashlib, sys, zipfile',
    'dist = "tinyd-1.0.dist-info"',
    'files = {"tinyd/__init__.py": "D = \'d1\'\\n", dist + "/METADATA": "Metadata-Version: 2.1\\nName: tinyd\\nVersion: 1.0\\n",',
    '         dist + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}',
    'rec = [p + ",sha256=" + base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b"=").decode() + "," + str(len(t)) for p, t in files.items()]',
    'files[dist + "/RECORD"] = "\\n".join(rec + [dist + "/RECORD,,"]) + "\\n"',
    'with zipfile.ZipFile(sys.argv[1] + "/tinyd-1.0-py3-none-any.whl", "w") as z:',
    '    [z.writestr(p, t) for p, t in files.items()]',
  ].join('\n');
  execFileSync('python3', ['-c', script, dir]);
}

describe('packages on demand against the real daemon', { skip }, () => {
  let c: CodeRunClient;
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'packages-'));
    writeWheel(dir);
    c = await CodeRunClient.start({
      command: bin,
      env: {
        CODERUN_PACKAGES: 'tinyd',
        CODERUN_PACKAGE_INDEX: 'none',
        CODERUN_PACKAGE_FIND_LINKS: dir,
        CODERUN_PACKAGE_CACHE_DIR: join(dir, 'cache'),
        CODERUN_UV_BIN: uv,
      },
    });
  });
  after(async () => {
    await c?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('C845: packages on run, describe and session/open; stats.installMs; refusals', async () => {
    const r = await c.run({ program: py('import tinyd', 'return tinyd.D'), packages: ['tinyd'] });
    assert.equal(ok(r), 'd1');
    assert.equal(typeof r.stats.installMs, 'number');
    assert.equal((await c.run({ program: 'return 1' })).stats.installMs, undefined);
    const failed = await c.run({ program: 'return 1', packages: ['tinyd>=2'] });
    assert.equal(failed.error?.kind, 'exception');
    assert.match(failed.error?.message ?? '', /^packages tinyd>=2: /);
    await assert.rejects(c.run({ program: 'return 1', packages: ['numpy'] }), (e: unknown) =>
      e instanceof InvalidParamsError && e.message === 'packages[0] names numpy, which CODERUN_PACKAGES does not allow');
    assert.match(await c.describe({ bindings: [], packages: ['tinyd'] }), /# Packages installed for this run: tinyd\.\n/);
    await using s = await c.openSession({ packages: ['tinyd'] });
    assert.equal(ok(await s.run({ program: py('import tinyd', 'return tinyd.D') })), 'd1');
  });
});
