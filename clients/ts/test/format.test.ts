/** The model text formatter against the golden cases every client and `coderun-rpc mcp` share. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { formatRun, modelText } from '../src/index.js';
import type { RunResult } from '../src/index.js';

interface GoldenCase {
  name: string;
  result: RunResult;
  text: string;
  isError: boolean;
  images: { mime: string; base64: string }[];
}

const golden = JSON.parse(readFileSync(new URL('../../../testdata/model-text.json', import.meta.url), 'utf8')) as { cases: GoldenCase[] };

test('C940 the formatter writes exactly the golden text, error flag and images', () => {
  assert.ok(golden.cases.length > 0);
  for (const c of golden.cases) {
    const out = formatRun(c.result);
    assert.equal(out.text, c.text, c.name);
    assert.equal(out.isError, c.isError, c.name);
    assert.deepEqual(
      out.images.map((i) => ({ mime: i.mediaType, base64: i.data })),
      c.images,
      c.name,
    );
  }
});

test('C940 notes come first, one per line', () => {
  const r = { logs: ['a'], value: 1 } as unknown as RunResult;
  assert.equal(modelText(r, ['# note one', '# note two']), '# note one\n# note two\na\nvalue: 1');
});
