/** Files in, files and rich outputs out (docs/protocol-files.md §12): helpers, and the real daemon. */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileBytes, fileEntries, InvalidParamsError, outputBytes, saveFiles } from '../src/node.js';
import type { CodeRunClient, LogEvent, OutputEvent } from '../src/node.js';
import { ok, py, skip, start } from './real-daemon.js';

test('fileEntries: strings as text, bytes as base64', () => {
  assert.deepEqual(fileEntries({ 'a.txt': 'é', 'b.bin': new Uint8Array([0, 1]) }), [
    { path: 'a.txt', text: 'é' },
    { path: 'b.bin', base64: 'AAE=' },
  ]);
  assert.deepEqual(fileEntries(new Map([['c', new Uint8Array(new ArrayBuffer(4), 1, 1)]])), [{ path: 'c', base64: 'AA==' }]);
  assert.throws(() => fileEntries({ x: 1 as unknown as string }), /files\["x"\] must be a string or a Uint8Array/);
});

test('outputBytes and fileBytes decode by MIME type', () => {
  const o = { data: { 'image/png': 'iVBORw==', 'text/plain': 'é' } };
  assert.deepEqual([...outputBytes(o, 'image/png')], [0x89, 0x50, 0x4e, 0x47]);
  assert.equal(outputBytes(o, 'text/plain').toString('utf8'), 'é');
  assert.throws(() => outputBytes(o, 'image/jpeg'), /has no image\/jpeg/);
  assert.equal(fileBytes({ path: 'out/x', size: 2, base64: 'aGk=' }).toString(), 'hi');
  assert.throws(() => fileBytes({ path: 'out/y', size: 9, omitted: true }), /omitted/);
});

describe('files and outputs against the real daemon', { skip }, () => {
  let c: CodeRunClient;
  let dir: string;
  before(async () => {
    c = await start();
    dir = await mkdtemp(join(tmpdir(), 'outputs-test-'));
  });
  after(async () => {
    await c?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('files in, outputs streamed in order, files out saved', async () => {
    const seen: string[] = [];
    const r = await c.run({
      program: py(
        'data = open("in.csv").read()',
        'print("before")',
        'display({"n": len(data)})',
        'open("out/sub/copy.bin", "wb").write(open("blob", "rb").read()) if __import__("os").makedirs("out/sub") is None else 0',
        'return data',
      ),
      files: { 'in.csv': 'a,b\n', blob: new Uint8Array([0, 255]) },
      onLog: (e: LogEvent) => seen.push(`log:${e.text}`),
      onOutput: (e: OutputEvent) => seen.push(`output:${e.index}:${e.data['text/plain']}`),
    });
    assert.equal(ok(r), 'a,b\n');
    assert.deepEqual(seen, ['log:before', "output:0:{'n': 4}"]);
    assert.deepEqual(r.outputs, [{ data: { 'text/plain': "{'n': 4}" } }]);
    assert.deepEqual(await saveFiles(r, dir), [join(dir, 'sub', 'copy.bin')]);
    assert.deepEqual([...(await readFile(join(dir, 'sub', 'copy.bin')))], [0, 255]);
  });

  test('a bad path is refused naming the entry', async () => {
    await assert.rejects(c.run({ program: '', files: { '/etc/x': '' } }), (err: unknown) => {
      assert.ok(err instanceof InvalidParamsError);
      assert.match((err as Error).message, /files\[0\]\.path "\/etc\/x" must be relative/);
      return true;
    });
  });
});
