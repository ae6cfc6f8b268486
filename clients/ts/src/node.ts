/**
 * Node.js entry point: spawns the coderun-rpc daemon and connects to it over its stdio.
 *
 *   import { CodeRunClient } from '@coderun/client/node';
 *   const client = await CodeRunClient.start();
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import type { ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { StreamMessageReader, StreamMessageWriter } from 'vscode-jsonrpc/node';
import { checkParams, CodeRunClient as CoreClient, describeParams } from './client.js';
import type { ClientOptions, PeerExit, Transport } from './client.js';
import { openTransport } from './connect.js';
import type { ConnectTransportOptions } from './connect.js';
import { losslessJsonEncoder } from './encoder.js';
import { CodeRunError, InvalidParamsError } from './errors.js';
import { serializeLossless } from './json.js';
import type { DescribeOptions } from './types.js';
import { resolveDaemonCommand } from './locate.js';
import { fileBytes, relativeOutPath } from './outputs.js';
import type { OutFile } from './outputs.js';

export * from './index.js';
export { executableProblem, PACKAGE_BINARY, PLATFORM_PACKAGES, resolveDaemonCommand } from './locate.js';
export type { LocateOptions } from './locate.js';
export { openTransport, SocketTransport, WebSocketTransport } from './connect.js';

/** Options of {@link CodeRunClient.connect}: the client's, and the daemon's token. */
export interface ConnectOptions extends ClientOptions, ConnectTransportOptions {}

export interface StartOptions extends ClientOptions {
  /**
   * The daemon binary. Default: `$CODERUN_RPC_BIN`, else the binary of the installed platform
   * package (`@coderun/cli-linux-x64`, `@coderun/cli-linux-arm64`), else `coderun-rpc` on PATH
   * (see {@link resolveDaemonCommand}).
   */
  command?: string;
  args?: string[];
  /**
   * Environment of the daemon, merged over `process.env` (a key set to `undefined` is removed).
   * `CODERUN_*` variables configure it (docs/configuration.md §2).
   */
  env?: Record<string, string | undefined>;
  /** Working directory of the daemon. Default: this process's. */
  cwd?: string;
  /**
   * The daemon's stderr (its structured logs): `'pipe'` (default) keeps the last 8 KiB for error
   * messages, `'inherit'` passes it through, `'ignore'` drops it.
   */
  stderr?: 'pipe' | 'inherit' | 'ignore';
  /**
   * Upstream MCP servers whose tools runs may bind (`{ global: 'gh', mcp: '<server>' }`,
   * docs/mcp.md): the path of an `mcpServers` file, or its content as an object (written to a
   * private temporary file that is removed once the daemon has read it, at start-up).
   */
  mcpConfig?: string | { mcpServers: Record<string, unknown> };
}

const STDERR_TAIL = 8192;

/** A transport over a spawned daemon's stdin/stdout. */
export class ProcessTransport implements Transport {
  readonly reader: StreamMessageReader;
  readonly writer: StreamMessageWriter;
  readonly exited: Promise<PeerExit>;
  private stderrTail = '';
  private hasExited = false;

  constructor(readonly process: ChildProcess) {
    const { stdin, stdout } = process;
    if (stdin === null || stdout === null) throw new CodeRunError('the daemon needs piped stdin and stdout');
    stdin.on('error', () => {}); // EPIPE after the daemon died: reported through `exited`.
    process.stderr?.setEncoding('utf8');
    process.stderr?.on('data', (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL);
    });
    this.reader = new StreamMessageReader(stdout);
    this.writer = new StreamMessageWriter(stdin, { contentTypeEncoder: losslessJsonEncoder });
    this.exited = new Promise((resolve) => {
      const done = (code: number | null, signal: NodeJS.Signals | null, error?: Error) => {
        this.hasExited = true;
        const tail = this.stderrTail.trim().split('\n').slice(-3).join(' | ');
        const detail = error !== undefined ? error.message : tail === '' ? undefined : `stderr: ${tail}`;
        resolve({ exitCode: code, signal, ...(detail === undefined ? {} : { detail }) });
      };
      process.once('error', (err) => done(null, null, err));
      process.once('exit', (code, signal) => {
        // Let stdout and stderr drain (their last frames and words), but not forever.
        const t = setTimeout(() => done(code, signal), 500);
        process.once('close', () => {
          clearTimeout(t);
          done(code, signal);
        });
      });
    });
  }

  /** Closes stdin, waits up to `timeoutMs` for the exit, then SIGKILLs and waits (bounded). */
  async terminate(timeoutMs: number): Promise<void> {
    if (!this.hasExited) this.process.stdin?.end();
    if (await this.waitExit(timeoutMs)) return;
    this.process.kill('SIGKILL');
    await this.waitExit(2000);
  }

  private async waitExit(ms: number): Promise<boolean> {
    if (this.hasExited || this.process.exitCode !== null || this.process.signalCode !== null) return true;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((r) => {
      timer = setTimeout(r, ms, false);
    });
    const exited = this.exited.then(() => true);
    try {
      return await Promise.race([exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * Spawns the daemon; rejects with `DaemonNotFoundError` when no usable binary is found, or
 * `CodeRunError` when it cannot be started at all.
 */
export async function spawnDaemon(options: StartOptions = {}): Promise<ProcessTransport> {
  const command = resolveDaemonCommand(options);
  const env = daemonEnv(options);
  const mcpArgs = options.mcpConfig === undefined ? [] : ['--mcp-config', mcpConfigPath(options.mcpConfig)];
  const child = spawn(command, [...(options.args ?? []), ...mcpArgs], {
    env,
    cwd: options.cwd,
    stdio: ['pipe', 'pipe', options.stderr ?? 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', (err) => {
      reject(new CodeRunError(`cannot start coderun-rpc daemon ${JSON.stringify(command)}: ${err.message}`));
    });
  });
  return new ProcessTransport(child);
}

/** The daemon's environment: `options.env` merged over `process.env`. */
function daemonEnv(options: StartOptions): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const [k, v] of Object.entries(options.env ?? {})) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

/** How a line of `coderun-rpc describe`'s stderr starts with the message of params it refuses. */
const DESCRIBE_REFUSAL = '\ncoderun-rpc describe: ';

/**
 * `bindings/describe`'s text without a running daemon: `coderun-rpc describe` (the binary,
 * environment and directory `CodeRunClient.start(options)` would use) prints what such a daemon
 * would answer, and exits. Bindings backed by an MCP server are refused (only a running daemon
 * reaches the server). Rejects with `InvalidParamsError` (the daemon's message) for params it
 * refuses, `CodeRunError` with the daemon's start-up line for a configuration it refuses.
 */
export async function describeWithoutDaemon(describe: DescribeOptions, options: StartOptions = {}): Promise<string> {
  const params = describeParams(describe);
  checkParams('bindings/describe', params);
  const encoded = serializeLossless(params);
  if (!encoded.ok) throw new TypeError(`bindings/describe params must be lossless JSON: ${encoded.reason}`); // checked above
  const child = spawn(resolveDaemonCommand(options), ['describe'], { env: daemonEnv(options), cwd: options.cwd, stdio: 'pipe' });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (b: Buffer) => out.push(b));
  child.stderr.on('data', (b: Buffer) => err.push(b));
  child.stdin.on('error', () => {}); // an early exit is reported by its code
  child.stdin.end(encoded.text);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', (e) => reject(new CodeRunError(`cannot run coderun-rpc describe: ${e.message}`)));
    child.once('close', resolve);
  });
  if (code === 0) return Buffer.concat(out).toString('utf8');
  const said = Buffer.concat(err).toString('utf8').trim().slice(-STDERR_TAIL);
  const at = ('\n' + said).lastIndexOf(DESCRIBE_REFUSAL);
  if (code === 2 && at >= 0) throw new InvalidParamsError(-32602, said.slice(at + DESCRIBE_REFUSAL.length - 1));
  throw new CodeRunError(`coderun-rpc describe exited with ${code}: ${said}`);
}

/** Files written for `mcpConfig` objects, removed once their daemon has read them. */
const written = new Set<string>();

/** The `--mcp-config` path of `config`: a path as given, an object written to a private file. */
function mcpConfigPath(config: string | object): string {
  if (typeof config === 'string') return config;
  const dir = mkdtempSync(join(tmpdir(), 'mcp-config-'));
  const path = join(dir, 'mcp.json');
  writeFileSync(path, JSON.stringify(config), { mode: 0o600 });
  written.add(dir);
  return path;
}

function removeWritten(args: string[]): void {
  const i = args.indexOf('--mcp-config');
  const dir = i >= 0 ? join(args[i + 1] ?? '', '..') : '';
  if (written.delete(dir)) rmSync(dir, { recursive: true, force: true });
}

/** The client with a `start()` that spawns the daemon. */
export class CodeRunClient extends CoreClient {
  /** Spawns the daemon and completes the `initialize` handshake. */
  static async start(options: StartOptions = {}): Promise<CodeRunClient> {
    const transport = await spawnDaemon(options);
    try {
      return await CodeRunClient.connect(transport, options);
    } finally {
      removeWritten(transport.process.spawnargs); // the daemon read it before answering initialize
    }
  }

  /**
   * Connects to a daemon in service mode (`coderun-rpc serve`, docs/service.md) at `unix:PATH`,
   * `tcp:HOST:PORT` or `ws://HOST:PORT/PATH` — or over a given transport — and completes the
   * `initialize` handshake. The client is the same as `start()`'s; `close()` ends this
   * connection (and its runs), not the daemon.
   */
  static override async connect<C extends CoreClient>(
    this: new (transport: Transport, options?: ClientOptions) => C,
    target: string | Transport,
    options: ConnectOptions = {},
  ): Promise<C> {
    const transport = typeof target === 'string' ? await openTransport(target, options) : target;
    return CoreClient.connect.call(this, transport, options) as Promise<C>;
  }

  /** The daemon's process id, when this client spawned it. */
  get pid(): number | undefined {
    return this.transport instanceof ProcessTransport ? this.transport.process.pid : undefined;
  }
}

/**
 * Writes a returned file under `dir` at its path without the leading `out/` (folders created);
 * resolves to where. Rejects for an omitted file or a path that would leave `dir`.
 */
export async function saveFile(file: OutFile, dir: string): Promise<string> {
  const target = join(dir, relativeOutPath(file));
  await mkdir(dirname(target), { recursive: true });
  await writeFile(target, fileBytes(file));
  return target;
}

/** Writes every returned (not omitted) file of a run result under `dir`; resolves to the paths. */
export async function saveFiles(result: { files?: OutFile[] }, dir: string): Promise<string[]> {
  const saved: string[] = [];
  for (const f of result.files ?? []) if (!f.omitted) saved.push(await saveFile(f, dir));
  return saved;
}
