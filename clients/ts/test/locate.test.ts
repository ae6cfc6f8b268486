/**
 * Finding the daemon: the order, the platform checks and the errors, on files made here. The host
 * and the package resolver are passed in, never patched, so each case asks as that host would.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { CodeRunClient, DaemonNotFoundError, PACKAGE_BINARY, resolveDaemonCommand } from '../src/node.js';
import type { LocateOptions } from '../src/node.js';

const root = mkdtempSync(join(tmpdir(), 'coderun-locate-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

function file(content: Buffer | string, mode = 0o755, name = 'coderun-rpc'): string {
  const path = join(root, String(n++), name);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, content);
  chmodSync(path, mode);
  return path;
}

/** A file with a 64-bit little-endian ELF header for `machine` (enough for the checks). */
function elf(machine = 62, mode = 0o755): string {
  return file(elfBytes(machine), mode);
}

/** A 64-bit little-endian ELF header for `machine` whose section header table ends at `sectionTableEnd`. */
function elfBytes(machine = 62, sectionTableEnd = 64): Buffer {
  const head = Buffer.alloc(64);
  head.write('\x7fELF', 0, 'latin1');
  head.set([2, 1, 1], 4);
  head.writeUInt16LE(2, 16);
  head.writeUInt16LE(machine, 18);
  head.writeBigUInt64LE(BigInt(sectionTableEnd - 64), 40); // one 64-byte section header there
  head.writeUInt16LE(64, 58);
  head.writeUInt16LE(1, 60);
  return head;
}

const x64 = { platform: 'linux', arch: 'x64', env: { CODERUN_RPC_BIN: undefined, PATH: '/nonexistent' } };

/** Options for a host whose platform package resolves to the directory holding `binary`. */
function withPackage(binary: string | undefined, extra: LocateOptions = {}): LocateOptions {
  return {
    ...x64,
    resolvePackage: (name) => {
      assert.equal(name, '@coderun/cli-linux-x64');
      return binary === undefined ? undefined : dirname(dirname(binary));
    },
    ...extra,
    env: { ...x64.env, ...extra.env },
  };
}

/** A file at `<dir>/bin/coderun-rpc`, the layout of a platform package. */
function packaged(content: Buffer | string, mode = 0o755): string {
  const path = join(root, String(n++), PACKAGE_BINARY);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, content);
  chmodSync(path, mode);
  return path;
}

function notFound(options: LocateOptions, pattern: RegExp): string {
  let message = '';
  assert.throws(
    () => resolveDaemonCommand(options),
    (e: unknown) => {
      assert.ok(e instanceof DaemonNotFoundError, String(e));
      assert.match(e.message, pattern);
      message = e.message;
      return true;
    },
  );
  return message;
}

describe('finding the daemon', () => {
  test('order: command, CODERUN_RPC_BIN, platform package, PATH', () => {
    const [cmd, fromEnv, onPath] = [elf(), elf(), elf()];
    const inPackage = packaged(elfBytes());
    const env = { CODERUN_RPC_BIN: fromEnv, PATH: dirname(onPath) };
    assert.equal(resolveDaemonCommand(withPackage(inPackage, { command: cmd, env })), cmd);
    assert.equal(resolveDaemonCommand(withPackage(inPackage, { env })), fromEnv);
    assert.equal(resolveDaemonCommand(withPackage(inPackage, { env: { ...env, CODERUN_RPC_BIN: '' } })), inPackage);
    assert.equal(resolveDaemonCommand(withPackage(undefined, { env: { ...env, CODERUN_RPC_BIN: undefined } })), onPath);
  });

  test('an arm64 host takes the arm64 package', () => {
    const inPackage = packaged(elfBytes(183));
    const resolvePackage = (name: string) => {
      assert.equal(name, '@coderun/cli-linux-arm64');
      return dirname(dirname(inPackage));
    };
    const options = { ...x64, arch: 'arm64', resolvePackage };
    assert.equal(resolveDaemonCommand(options), inPackage);
  });

  for (const [platform, arch] of [['darwin', 'arm64'], ['linux', 'ia32'], ['win32', 'x64']] as const) {
    test(`${platform}/${arch}: no binary is published; the error names the platform and the fallbacks`, () => {
      const options = { ...x64, platform, arch, resolvePackage: () => assert.fail('no package to look for') };
      const msg = notFound(options, new RegExp(`for ${platform}-${arch}.*only for linux-x64, linux-arm64`, 's'));
      for (const fallback of ['command', 'CODERUN_RPC_BIN', 'PATH', '`command`']) assert.ok(msg.includes(fallback), msg);
    });
  }

  test('the platform package not installed (optional dependencies omitted)', () => {
    notFound(withPackage(undefined), /@coderun\/cli-linux-x64 is not installed.*\n.*PATH: no coderun-rpc on PATH \(\/nonexistent\)/s);
  });

  const broken: [string, () => string, RegExp][] = [
    ['not executable', () => packaged(elfBytes(), 0o644), /is not executable/],
    ['another architecture', () => packaged(elfBytes(183)), /another architecture \(ELF machine 183, this host needs 62\)/],
    ['truncated', () => packaged(Buffer.from('\x7fELF\x02\x01', 'latin1')), /truncated/],
    ['cut short', () => packaged(elfBytes(62, 4096)), /is truncated \(64 of at least 4096 bytes/],
    ['not ELF', () => packaged('#!/bin/sh\nexit 0\n'), /not an ELF executable/],
    ['empty', () => packaged(''), /not an ELF executable/],
  ];
  for (const [what, make, why] of broken) {
    test(`a platform package binary that is ${what} is named, then PATH is tried (with a warning)`, async () => {
      const inPackage = make();
      const warnings: string[] = [];
      const onWarning = (w: Error) => warnings.push(w.message);
      process.on('warning', onWarning);
      try {
        notFound(withPackage(inPackage), why);
        const good = elf();
        assert.equal(resolveDaemonCommand(withPackage(inPackage, { env: { PATH: dirname(good) } })), good);
        await new Promise(setImmediate); // warnings are emitted on the next tick
        assert.equal(warnings.length, 2, warnings.join('\n'));
        assert.match(warnings[1]!, new RegExp(`^coderun: @coderun/cli-linux-x64: .* ${why.source}.*; looking on PATH$`));
      } finally {
        process.off('warning', onWarning);
      }
    });
  }

  test('a corrupted platform package (no binary, or an unreadable package.json) is named', () => {
    const dir = join(root, String(n++));
    mkdirSync(dir);
    notFound({ ...x64, resolvePackage: () => dir }, /platform package: ".*\/bin\/coderun-rpc" does not exist/);
    const resolvePackage = () => {
      throw new SyntaxError('Unexpected token } in JSON');
    };
    notFound({ ...x64, resolvePackage }, /@coderun\/cli-linux-x64 is installed but broken \(Unexpected token/);
  });

  test('the real resolver: a package that is not installed is reported as such', () => {
    notFound({ ...x64 }, /platform package: @coderun\/cli-linux-x64 is not installed/);
  });

  test('an unusable explicit choice is an error at once, not a fallback', () => {
    const inPackage = packaged(elfBytes());
    notFound(withPackage(inPackage, { env: { CODERUN_RPC_BIN: elf(62, 0o600) } }), /^CODERUN_RPC_BIN: ".*" is not executable/);
    notFound(withPackage(inPackage, { command: elf(183) }), /^command: ".*" is built for another architecture/);
    notFound(withPackage(inPackage, { command: 'no-such-coderun' }), /^command: "no-such-coderun": no no-such-coderun on PATH/);
  });

  test('PATH: unusable entries are passed over and reported', () => {
    const wrong = elf(183);
    const good = elf();
    const search = [dirname(wrong), dirname(good)].join(delimiter);
    assert.equal(resolveDaemonCommand(withPackage(undefined, { env: { PATH: search } })), good);
    notFound(withPackage(undefined, { env: { PATH: dirname(wrong) } }), /PATH: ".*" is built for another architecture/);
  });

  test('a script chosen by the user runs', () => {
    const wrapper = file('#!/bin/sh\nexec coderun-rpc "$@"\n');
    assert.equal(resolveDaemonCommand({ ...x64, command: wrapper }), wrapper);
  });

  test('start() with a corrupted binary rejects at once, without spawning it', async () => {
    const t0 = Date.now();
    await assert.rejects(CodeRunClient.start({ command: file(Buffer.alloc(100)) }), /not an ELF executable/);
    assert.ok(Date.now() - t0 < 1000);
  });
});
