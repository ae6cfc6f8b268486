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
import { accessSync, closeSync, constants, openSync, readSync, statSync } from 'node:fs';
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
 * must be 64-bit little-endian for that machine, read from its header so a truncated or foreign
 * binary is named before it is run; a `#!` script passes unless `requireElf`.
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
  const head = Buffer.alloc(20);
  let n: number;
  try {
    const fd = openSync(path, 'r');
    try {
      n = readSync(fd, head, 0, head.length, 0);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    return `cannot be read: ${(err as Error).message}`;
  }
  if (n < 4 || head.toString('latin1', 0, 4) !== '\x7fELF') {
    if (!requireElf && n >= 2 && head.toString('latin1', 0, 2) === '#!') return undefined;
    return 'is not an ELF executable (corrupted or incomplete install?)';
  }
  if (n < 20 || head[4] !== 2 || head[5] !== 1) {
    return 'has a truncated or non-64-bit-little-endian ELF header (corrupted install?)';
  }
  const machine = head.readUInt16LE(18);
  if (machine !== elfMachine) return `is built for another architecture (ELF machine ${machine}, this host needs ${elfMachine})`;
  return undefined;
}
