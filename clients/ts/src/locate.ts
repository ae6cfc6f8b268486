/**
 * Finding the coderun-rpc daemon binary (Node.js only).
 *
 * The order is the one both clients follow: the `command` option, then `CODERUN_RPC_BIN`, then the
 * binary of the platform package npm installed as an optional dependency
 * (`@coderun/cli-<platform>-<arch>`), then `coderun-rpc` on PATH. An explicit choice (the first
 * two) that is unusable is an error at once; a broken platform package is reported and passed over
 * for PATH. When nothing works the error names every place tried and why each failed.
 *
 * The host (`platform`, `arch`) and the package resolver are parameters, so tests ask as another
 * platform would without touching `process`.
 */
import { accessSync, closeSync, constants, fstatSync, openSync, readSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, dirname, join, sep } from 'node:path';
import { DaemonNotFoundError } from './errors.js';

const NAME = 'coderun-rpc';

/** The platforms with a published binary: their npm package and the ELF machine of the binary. */
export const PLATFORM_PACKAGES: Readonly<Record<string, { readonly name: string; readonly elfMachine: number }>> = {
  'linux-x64': { name: '@coderun/cli-linux-x64', elfMachine: 62 },
  'linux-arm64': { name: '@coderun/cli-linux-arm64', elfMachine: 183 },
};

/** Where the binary sits inside a platform package. */
export const PACKAGE_BINARY = join('bin', NAME);

export interface LocateOptions {
  /** The daemon binary: a path, or a bare name looked up on PATH. */
  command?: string;
  /** Layered over `process.env` for `CODERUN_RPC_BIN` and `PATH` (a key set to `undefined` unsets it). */
  env?: Record<string, string | undefined>;
  /** As `process.platform`. Default: this process's. */
  platform?: string;
  /** As `process.arch`. Default: this process's. */
  arch?: string;
  /**
   * The directory of an installed package, `undefined` when it is not installed; may throw when it
   * is installed but broken. Default: Node's resolution from this module.
   */
  resolvePackage?: (name: string) => string | undefined;
}

const require = createRequire(import.meta.url);

function nodeResolvePackage(name: string): string | undefined {
  try {
    return dirname(require.resolve(`${name}/package.json`));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND') return undefined;
    throw err;
  }
}

/** The daemon binary to spawn; throws {@link DaemonNotFoundError} naming each place tried. */
export function resolveDaemonCommand(options: LocateOptions = {}): string {
  const env = (key: string) => (options.env !== undefined && key in options.env ? options.env[key] : process.env[key]);
  const host = { platform: options.platform ?? process.platform, arch: options.arch ?? process.arch };
  const key = `${host.platform}-${host.arch}`;
  const elfMachine = host.platform === 'linux' ? PLATFORM_PACKAGES[key]?.elfMachine : undefined;
  const search = env('PATH');
  if (options.command !== undefined && options.command !== '') {
    return explicit(options.command, 'command', search, elfMachine);
  }
  const fromEnv = env('CODERUN_RPC_BIN');
  if (fromEnv !== undefined && fromEnv !== '') return explicit(fromEnv, 'CODERUN_RPC_BIN', search, elfMachine);
  const tried = ['command: not given', 'CODERUN_RPC_BIN: not set'];
  const packaged = platformPackage(key, options.resolvePackage ?? nodeResolvePackage);
  if (packaged.binary !== undefined) return packaged.binary;
  tried.push(`platform package: ${packaged.problem}`);
  const onPath = findOnPath(NAME, search, elfMachine);
  if (onPath.found !== undefined) return onPath.found;
  tried.push(`PATH: ${onPath.problem}`);
  throw new DaemonNotFoundError(
    `cannot find the ${NAME} daemon for ${key}; tried, in order:\n  - ${tried.join('\n  - ')}\n` +
      `Install @coderun/client where npm can add its platform package (published for ` +
      `${Object.keys(PLATFORM_PACKAGES).join(', ')}), set CODERUN_RPC_BIN, pass \`command\`, or put ${NAME} on PATH.`,
  );
}

/** A binary the caller chose: unusable is an error at once. */
function explicit(path: string, source: string, search: string | undefined, elfMachine: number | undefined): string {
  if (!path.includes(sep)) {
    const onPath = findOnPath(path, search, elfMachine);
    if (onPath.found === undefined) throw new DaemonNotFoundError(`${source}: ${JSON.stringify(path)}: ${onPath.problem}`);
    return onPath.found;
  }
  const problem = executableProblem(path, elfMachine);
  if (problem !== undefined) throw new DaemonNotFoundError(`${source}: ${JSON.stringify(path)} ${problem}`);
  return path;
}

function platformPackage(
  key: string,
  resolve: (name: string) => string | undefined,
): { binary: string; problem?: undefined } | { binary?: undefined; problem: string } {
  const pkg = PLATFORM_PACKAGES[key];
  if (pkg === undefined) {
    return { problem: `none is published for ${key} (only for ${Object.keys(PLATFORM_PACKAGES).join(', ')})` };
  }
  let dir: string | undefined;
  try {
    dir = resolve(pkg.name);
  } catch (err) {
    return { problem: `${pkg.name} is installed but broken (${(err as Error).message.split('\n')[0]}); reinstall it` };
  }
  if (dir === undefined) {
    return { problem: `${pkg.name} is not installed (npm skips it with --no-optional or --omit=optional)` };
  }
  const binary = join(dir, PACKAGE_BINARY);
  const problem = executableProblem(binary, pkg.elfMachine, true);
  if (problem !== undefined) {
    process.emitWarning(`coderun: ${pkg.name}: ${binary} ${problem}; looking on PATH`);
    return { problem: `${JSON.stringify(binary)} ${problem}` };
  }
  return { binary };
}

function findOnPath(
  name: string,
  search: string | undefined,
  elfMachine: number | undefined,
): { found: string; problem?: undefined } | { found?: undefined; problem: string } {
  const seen: string[] = [];
  for (const d of (search ?? '').split(delimiter)) {
    const candidate = join(d === '' ? '.' : d, name);
    if (!isFile(candidate)) continue;
    const problem = executableProblem(candidate, elfMachine);
    if (problem === undefined) return { found: candidate };
    seen.push(`${JSON.stringify(candidate)} ${problem}`);
  }
  return { problem: seen.length > 0 ? seen.join('; ') : `no ${name} on PATH (${search ?? 'unset'})` };
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * Why `path` cannot be executed here, or `undefined`. With `elfMachine` (a Linux host) an ELF file
 * must be 64-bit little-endian for that machine and as long as its header says (the header is
 * read, so a foreign or truncated binary is named before it is run); a `#!` script passes unless
 * `requireElf`.
 */
export function executableProblem(path: string, elfMachine: number | undefined, requireElf = false): string | undefined {
  let isDir: boolean;
  try {
    isDir = !statSync(path).isFile();
  } catch {
    return 'does not exist';
  }
  if (isDir) return 'is not a file';
  try {
    accessSync(path, constants.X_OK);
  } catch {
    return 'is not executable (chmod +x, or reinstall)';
  }
  if (elfMachine === undefined) return undefined;
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    return `cannot be read: ${(err as Error).message}`;
  }
  try {
    return elfProblem(fd, elfMachine, requireElf);
  } catch (err) {
    return `cannot be read: ${(err as Error).message}`;
  } finally {
    closeSync(fd);
  }
}

function elfProblem(fd: number, elfMachine: number, requireElf: boolean): string | undefined {
  const head = readAt(fd, 0, 64);
  if (head.length < 4 || head.toString('latin1', 0, 4) !== '\x7fELF') {
    if (!requireElf && head.toString('latin1', 0, 2) === '#!') return undefined;
    return 'is not an ELF executable (corrupted or incomplete install?)';
  }
  if (head.length < 64 || head[4] !== 2 || head[5] !== 1) {
    return 'has a truncated or non-64-bit-little-endian ELF header (corrupted install?)';
  }
  const machine = head.readUInt16LE(18);
  if (machine !== elfMachine) return `is built for another architecture (ELF machine ${machine}, this host needs ${elfMachine})`;
  const size = fstatSync(fd).size;
  const end = elfExtent(fd, head, size);
  if (size < end) return `is truncated (${size} of at least ${end} bytes; corrupted or incomplete install?)`;
  return undefined;
}

const SHT_NOBITS = 8;

/**
 * The least size a 64-bit ELF file must have: the ends of its header tables, of every segment and
 * of every section that occupies the file.
 */
function elfExtent(fd: number, head: Buffer, size: number): number {
  const u64 = (b: Buffer, at: number) => Number(b.readBigUInt64LE(at));
  const [phOff, phSize, phNum] = [u64(head, 32), head.readUInt16LE(54), head.readUInt16LE(56)];
  const [shOff, shSize, shNum] = [u64(head, 40), head.readUInt16LE(58), head.readUInt16LE(60)];
  let end = Math.max(phOff + phSize * phNum, shOff + shSize * shNum);
  if (size < end) return end; // the tables themselves are cut: no need to read them
  for (const ph of entries(fd, phOff, phSize, phNum)) end = Math.max(end, u64(ph, 8) + u64(ph, 32)); // p_offset + p_filesz
  for (const sh of entries(fd, shOff, shSize, shNum)) {
    // .bss and the like take no room in the file.
    if (sh.readUInt32LE(4) !== SHT_NOBITS) end = Math.max(end, u64(sh, 24) + u64(sh, 32)); // sh_offset + sh_size
  }
  return end;
}

/** The entries of a header table that are in the file. */
function entries(fd: number, offset: number, size: number, count: number): Buffer[] {
  if (size < 40) return []; // not a 64-bit entry: nothing to read from it
  const table = readAt(fd, offset, size * count);
  const out: Buffer[] = [];
  for (let at = 0; at + size <= table.length; at += size) out.push(table.subarray(at, at + size));
  return out;
}

function readAt(fd: number, position: number, length: number): Buffer {
  const buf = Buffer.alloc(length);
  return buf.subarray(0, readSync(fd, buf, 0, length, position));
}
