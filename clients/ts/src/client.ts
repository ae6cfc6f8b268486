/**
 * The I/O-free core of the client: JSON-RPC over any `vscode-jsonrpc` reader/writer pair.
 * It never starts processes; `./node.js` supplies a transport that spawns the daemon.
 */
import {
  CancellationReceiverStrategy,
  CancellationTokenSource,
  ConnectionError,
  createMessageConnection,
  NullLogger,
  ResponseError,
} from 'vscode-jsonrpc';
import type {
  CancellationSenderStrategy,
  CancellationToken,
  Logger,
  MessageConnection,
  MessageReader,
  MessageWriter,
  RequestMessage,
} from 'vscode-jsonrpc';
import { handlerTable, wireBindings } from './bindings.js';
import { fileEntries } from './outputs.js';
import type { OutputEvent } from './outputs.js';
import { BINDING_ERROR_CODE } from './encoder.js';
import {
  ClientClosedError,
  CodeRunError,
  ConnectionLostError,
  ProtocolError,
  rpcError,
  TimeoutError,
} from './errors.js';
import { notifyAll, Session, sessionIdOf } from './session.js';
import type { SessionHost } from './session.js';
import { bindingResult, MAX_MESSAGE_BYTES, messageOf, pythonTypeOf, serializeLossless, utf8Length } from './json.js';
import type { JsonValue } from './json.js';
import type {
  Binding,
  BindingFunction,
  DescribeOptions,
  InitializeResult,
  LogEvent,
  RunLimits,
  RunOptions,
  RunResult,
  Secret,
  SessionClosedEvent,
  SessionOptions,
} from './types.js';

/** How the peer ended, as far as the transport knows. */
export interface PeerExit {
  exitCode: number | null;
  signal: string | null;
  /** Extra words for error messages, e.g. the tail of the daemon's stderr. */
  detail?: string;
}

/** What the core needs from the outside world. The encoder of the writer must be lossless. */
export interface Transport {
  readonly reader: MessageReader;
  readonly writer: MessageWriter;
  /** Resolves once the peer is gone for good. Never rejects. */
  readonly exited: Promise<PeerExit>;
  /** Ends the peer: waits up to `timeoutMs` for it to go on its own, then kills it. Bounded. */
  terminate(timeoutMs: number): Promise<void>;
}

export interface ClientOptions {
  /** `clientInfo` of `initialize`. */
  clientInfo?: { name: string; version?: string };
  /** Bound on `initialize` (the daemon probes Python first). Default 30000. */
  startTimeoutMs?: number;
  /** Bound on `shutdown` in `close()` (it waits for every child to die). Default 15000. */
  shutdownTimeoutMs?: number;
  /** Bound on the daemon's exit after `exit` before it is killed. Default 3000. */
  exitTimeoutMs?: number;
  /** Where `vscode-jsonrpc` reports its own problems. Default: silent. */
  logger?: Logger;
}

export const CLIENT_NAME = '@coderun/client';
export const CLIENT_VERSION = '0.1.0';

type RunId = number | string;

interface LiveRun {
  id: RunId;
  functions: Map<string, Map<string, BindingFunction>>;
  onLog: ((event: LogEvent) => void) | undefined;
  onOutput: ((event: OutputEvent) => void) | undefined;
  calls: Set<AbortController>;
  reject(err: Error): void;
}

interface BindingCallParams {
  runId: RunId;
  namespace: string;
  function: string;
  args: JsonValue;
  traceparent?: string;
}

/** How long a connection failure waits for the daemon's exit status, for a better error. */
const EXIT_GRACE_MS = 1000;

/** `p`'s value, or `undefined` once `ms` have passed first. The timer never holds the process open. */
function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  return Promise.race([p, new Promise<undefined>((r) => setTimeout(r, ms, undefined).unref?.())]);
}

/**
 * A failure of the connection itself, as vscode-jsonrpc reports it: a request's write error or
 * disposed connection, or a call refused because the connection is closed or disposed.
 */
function isConnectionFailure(err: unknown): boolean {
  if (err instanceof ConnectionError) return true;
  return err instanceof ResponseError && (err.code === -32097 /* PendingResponseRejected */ || err.code === -32099 /* write error */);
}

/**
 * One 'abort' listener per signal however many runs share it (Node warns past 10 listeners on
 * an EventTarget); returns the unsubscribe function.
 */
const abortFanout = new WeakMap<AbortSignal, Set<() => void>>();
function onAbort(signal: AbortSignal, callback: () => void): () => void {
  let set = abortFanout.get(signal);
  if (set === undefined) {
    const callbacks = new Set<() => void>();
    set = callbacks;
    abortFanout.set(signal, callbacks);
    signal.addEventListener(
      'abort',
      () => {
        abortFanout.delete(signal);
        for (const cb of callbacks) cb();
      },
      { once: true },
    );
  }
  set.add(callback);
  return () => set.delete(callback);
}

/** The `bindings/describe` params of `options`. */
export function describeParams(options: DescribeOptions): { [k: string]: unknown } {
  return bindingParams(options.bindings ?? [], options.limits, options.packages);
}

/** The `bindings`, `limits?` and `packages?` members shared by `run` and `bindings/describe`. */
function bindingParams(bindings: Binding[], limits: RunLimits | undefined, packages: string[] | undefined): { [k: string]: unknown } {
  const params: { [k: string]: unknown } = { bindings: wireBindings(bindings) };
  if (limits !== undefined) params['limits'] = { ...limits };
  if (packages !== undefined) params['packages'] = [...packages];
  return params;
}

/** Refuses, before anything is sent, params that are not lossless JSON or exceed the daemon's cap. */
export function checkParams(method: string, params: object): void {
  const encoded = serializeLossless(params);
  if (!encoded.ok) throw new TypeError(`${method} params must be lossless JSON: ${encoded.reason} (at ${encoded.path})`);
  if (utf8Length(encoded.text) > MAX_MESSAGE_BYTES - 64) {
    throw new RangeError(`${method} request exceeds the daemon's ${MAX_MESSAGE_BYTES}-byte message limit`);
  }
}

/** The `session/open` params; `undefined` members are left out. */
function sessionParams(options: SessionOptions): { [k: string]: unknown } {
  const params: { [k: string]: unknown } = {};
  if (options.limits !== undefined) params['limits'] = { ...options.limits };
  if (options.idleTimeoutMs !== undefined) params['idleTimeoutMs'] = options.idleTimeoutMs;
  if (options.packages !== undefined) params['packages'] = [...options.packages];
  if (options.secrets !== undefined) params['secrets'] = secretEntries(options.secrets);
  return params;
}

/** Copies of `secrets` for the wire. */
function secretEntries(secrets: Secret[]): Secret[] {
  return secrets.map((s) => ({ ...s, hosts: [...s.hosts] }));
}

function checkResult(raw: unknown): RunResult {
  const r = raw as RunResult | null;
  if (r === null || typeof r !== 'object' || !Array.isArray(r.logs)) {
    throw new ProtocolError(`run result is not a result object: ${JSON.stringify(raw)?.slice(0, 200)}`);
  }
  return r;
}

/**
 * A connection to one coderun-rpc daemon. Create it with `CodeRunClient.start()` from
 * `@coderun/client/node`, or with {@link CodeRunClient.connect} over your own transport.
 */
export class CodeRunClient {
  /** The daemon's `initialize` result (set once connected). */
  initializeResult!: InitializeResult;

  protected readonly conn: MessageConnection;
  private readonly runs = new Map<RunId, LiveRun>();
  private state: 'open' | 'closing' | 'closed' = 'open';
  private lost: ConnectionLostError | undefined;
  private readonly lostPromise: Promise<ConnectionLostError>;
  private markLost!: (err: ConnectionLostError) => void;
  private closing: Promise<void> | undefined;
  private capturedRunId: RunId | undefined;
  /** Open sessions by id, so `session/closed` and the connection's loss reach them. */
  private readonly sessions = new Map<string, Session>();
  private readonly sessionListeners = new Set<(event: SessionClosedEvent) => void>();
  private readonly sessionHost: SessionHost = {
    runInSession: (sessionId, options) => this.run(options, sessionId),
    sessionRequest: (method, sessionId) => this.request(method, { sessionId }),
    adopt: (sessionId) => this.adopt(sessionId),
    forget: (session) => {
      if (this.sessions.get(session.id) === session) this.sessions.delete(session.id);
    },
  };

  /** Use {@link CodeRunClient.connect} (or `start()` of the node entry point). */
  constructor(
    protected readonly transport: Transport,
    protected readonly options: ClientOptions = {},
  ) {
    this.lostPromise = new Promise((resolve) => {
      this.markLost = resolve;
    });
    const sender: CancellationSenderStrategy = {
      // Called synchronously inside sendRequest, before the request is written: the only
      // place vscode-jsonrpc shows the id it picked. The daemon names runs by that id.
      enableCancellation: (req: RequestMessage) => {
        if (req.method === 'run') this.capturedRunId = req.id ?? undefined;
      },
      sendCancellation: async (conn, id) => {
        try {
          await conn.sendNotification('$/cancelRequest', { id });
        } catch {
          // The connection is gone: the run fails with ConnectionLostError anyway.
        }
      },
      cleanup: () => {},
    };
    this.conn = createMessageConnection(transport.reader, transport.writer, options.logger ?? NullLogger, {
      cancellationStrategy: { receiver: CancellationReceiverStrategy.Message, sender },
    });
    this.conn.onRequest('binding/call', (params: unknown, token: CancellationToken) =>
      this.onBindingCall(params as BindingCallParams, token),
    );
    this.conn.onNotification('run/log', (params: unknown) => this.onRunLog(params));
    this.conn.onNotification('run/output', (params: unknown) => this.onRunOutput(params));
    this.conn.onNotification('session/closed', (params: unknown) => this.onSessionClosedNotification(params));
    this.conn.onClose(() => {
      // Give the transport a moment to learn the exit status, for a better message.
      void within(transport.exited, EXIT_GRACE_MS).then((exit) => this.connectionLost(exit));
    });
    void transport.exited.then((exit) => this.connectionLost(exit));
    this.conn.listen();
  }

  /** Connects over `transport`: `initialize`, then `initialized`. */
  static async connect<C extends CodeRunClient>(
    this: new (transport: Transport, options?: ClientOptions) => C,
    transport: Transport,
    options: ClientOptions = {},
  ): Promise<C> {
    const client = new this(transport, options);
    try {
      await client.initialize();
    } catch (err) {
      await client.transport.terminate(0).catch(() => {});
      client.connectionLost({ exitCode: null, signal: null });
      client.conn.dispose();
      throw err;
    }
    return client;
  }

  private async initialize(): Promise<void> {
    const params = {
      clientInfo: this.options.clientInfo ?? { name: CLIENT_NAME, version: CLIENT_VERSION },
      capabilities: {},
    };
    const result = await this.call<InitializeResult>(
      this.conn.sendRequest('initialize', params),
      this.options.startTimeoutMs ?? 30000,
      'initialize',
    );
    this.initializeResult = result;
    try {
      await this.conn.sendNotification('initialized', {});
    } catch (err) {
      // vscode-jsonrpc passes a notification's write error through raw (e.g. EPIPE when the
      // daemon exited right after answering): a connection failure all the same.
      throw await this.failure(err, true);
    }
  }

  /** True until `close()` begins or the daemon goes away. */
  get isOpen(): boolean {
    return this.state === 'open' && this.lost === undefined;
  }

  /**
   * Runs one program in a fresh interpreter (or, given `sessionId`, in that session: prefer
   * {@link Session.run}). Failures of the program are results; see {@link RunResult}.
   */
  run(options: RunOptions, sessionId?: string): Promise<RunResult> {
    try {
      return this.startRun(options, sessionId);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * Opens a persistent session (`session/open`): one interpreter whose top-level names survive
   * from run to run. Rejects with `SessionLimitError` at the daemon's cap, `InvalidParamsError`
   * for bad limits, `MethodNotFoundError` when the daemon has sessions disabled.
   */
  async openSession(options: SessionOptions = {}): Promise<Session> {
    const result = await this.request<unknown>('session/open', sessionParams(options));
    return this.adopt(sessionIdOf('session/open', result));
  }

  /**
   * `callback` runs for every `session/closed` notification (a session the daemon ended on its
   * own: idle time, loss, shutdown), after the session object has been updated. Returns the
   * function that unsubscribes it.
   */
  onSessionClosed(callback: (event: SessionClosedEvent) => void): () => void {
    this.sessionListeners.add(callback);
    return () => this.sessionListeners.delete(callback);
  }

  private adopt(sessionId: string): Session {
    const session = new Session(this.sessionHost, sessionId);
    this.sessions.set(sessionId, session);
    return session;
  }

  private onSessionClosedNotification(params: unknown): void {
    const p = params as Partial<SessionClosedEvent> | null;
    if (typeof p?.sessionId !== 'string' || typeof p.reason !== 'string') return;
    const event: SessionClosedEvent = { sessionId: p.sessionId, reason: p.reason, message: String(p.message ?? '') };
    this.sessions.get(event.sessionId)?.notifyClosed(event);
    notifyAll(this.sessionListeners, event);
  }

  private startRun(options: RunOptions, sessionId: string | undefined): Promise<RunResult> {
    this.assertOpen();
    const bindings = options.bindings ?? [];
    const params: { [k: string]: unknown } = { program: options.program, ...bindingParams(bindings, options.limits, options.packages) };
    if (sessionId !== undefined) params['sessionId'] = sessionId;
    const stream = options.stream ?? (options.onLog !== undefined || options.onOutput !== undefined);
    if (stream) params['stream'] = true;
    if (options.files !== undefined) params['files'] = fileEntries(options.files);
    if (options.traceparent !== undefined) params['traceparent'] = options.traceparent;
    if (options.egress !== undefined) params['egress'] = options.egress.map((e) => (typeof e === 'string' ? e : { ...e }));
    if (options.secrets !== undefined) params['secrets'] = secretEntries(options.secrets);
    checkParams('run', params);
    const functions = handlerTable(bindings);

    const cts = new CancellationTokenSource();
    this.capturedRunId = undefined;
    let response: Promise<unknown>;
    try {
      response = this.conn.sendRequest<unknown>('run', params, cts.token);
    } catch (err) {
      // vscode-jsonrpc refuses synchronously once its reader closed (the daemon is going away).
      return this.failure(err).then((error) => Promise.reject(error));
    }
    const id = this.capturedRunId as RunId | undefined;
    if (id === undefined) throw new CodeRunError('internal: the run request id was not observed');

    return new Promise<RunResult>((resolve, reject) => {
      const signal = options.signal;
      let unsubscribe = () => {};
      const run: LiveRun = {
        id,
        functions,
        onLog: options.onLog,
        onOutput: options.onOutput,
        calls: new Set(),
        reject: () => {},
      };
      const finish = () => {
        this.runs.delete(id);
        unsubscribe();
        for (const call of run.calls) call.abort(new CodeRunError('the run has settled'));
        cts.dispose();
      };
      run.reject = (err) => {
        finish();
        reject(err);
      };
      this.runs.set(id, run);
      if (signal?.aborted) cts.cancel();
      else if (signal !== undefined) unsubscribe = onAbort(signal, () => cts.cancel());
      response.then(
        (raw) => {
          if (!this.runs.has(id)) return;
          finish();
          try {
            resolve(checkResult(raw));
          } catch (err) {
            reject(err);
          }
        },
        async (err: unknown) => {
          const error = await this.failure(err);
          if (this.runs.has(id)) run.reject(error);
        },
      );
    });
  }

  /**
   * The Python stub text a program would see for `bindings` under `limits` (`bindings/describe`):
   * one class per namespace with an `async def` per function, docstrings from the descriptions,
   * and a header with the effective budgets and the Python version — what a model's prompt
   * needs. Handlers are not used. An invalid declaration or schema rejects with
   * `InvalidParamsError` (−32602), whose message names the path.
   */
  async describe(options: DescribeOptions): Promise<string> {
    this.assertOpen();
    const params = describeParams(options);
    const result = await this.request<{ stubs?: unknown } | null>('bindings/describe', params);
    if (typeof result?.stubs !== 'string') {
      throw new ProtocolError(`bindings/describe result has no stubs text: ${JSON.stringify(result)?.slice(0, 200)}`);
    }
    return result.stubs;
  }

  /** Sends one request (checked like `run`'s params) and awaits its result. */
  private async request<T>(method: string, params: object): Promise<T> {
    this.assertOpen();
    checkParams(method, params);
    let request: Promise<unknown>;
    try {
      request = this.conn.sendRequest<unknown>(method, params);
    } catch (err) {
      throw await this.failure(err);
    }
    return this.call<T>(request, undefined, method);
  }

  private onRunLog(params: unknown): void {
    const p = params as { runId?: RunId } & LogEvent;
    const run = p?.runId === undefined ? undefined : this.runs.get(p.runId);
    if (run?.onLog === undefined) return;
    try {
      run.onLog({ index: p.index, text: p.text, continued: p.continued });
    } catch {
      // A throwing log callback must not break the connection.
    }
  }

  private onRunOutput(params: unknown): void {
    const p = params as { runId?: RunId } & OutputEvent;
    const run = p?.runId === undefined ? undefined : this.runs.get(p.runId);
    if (run?.onOutput === undefined) return;
    try {
      run.onOutput({ index: p.index, data: p.data });
    } catch {
      // A throwing output callback must not break the connection.
    }
  }

  private async onBindingCall(p: BindingCallParams, token: CancellationToken): Promise<unknown> {
    const run = p === null || typeof p !== 'object' ? undefined : this.runs.get(p.runId);
    if (run === undefined) throw new ResponseError(BINDING_ERROR_CODE, `no live run with id ${JSON.stringify(p?.runId)}`);
    const ns = run.functions.get(p.namespace);
    const fn = ns?.get(p.function);
    if (fn === undefined) {
      throw new ResponseError(BINDING_ERROR_CODE, `unknown binding ${JSON.stringify(`${p.namespace}.${p.function}`)}`);
    }
    const controller = new AbortController();
    run.calls.add(controller);
    const sub = token.onCancellationRequested(() =>
      controller.abort(new CodeRunError('the daemon no longer needs this binding call')),
    );
    try {
      let value: unknown;
      try {
        value = await fn(p.args === undefined ? null : p.args, controller.signal, {
          runId: p.runId,
          namespace: p.namespace,
          function: p.function,
          ...(typeof p.traceparent === 'string' ? { traceparent: p.traceparent } : {}),
        });
      } catch (err) {
        const type = pythonTypeOf(err);
        throw new ResponseError(BINDING_ERROR_CODE, messageOf(err), type === undefined ? undefined : { type });
      }
      const result = bindingResult(value);
      if (result instanceof Error) throw new ResponseError(BINDING_ERROR_CODE, result.message);
      return result;
    } finally {
      sub.dispose();
      run.calls.delete(controller);
    }
  }

  /**
   * Shuts the daemon down (`shutdown`, then `exit`) and waits for its process to end. Live runs
   * resolve first with kind `abort` ("server is shutting down"). Bounded: a daemon that does not
   * answer or exit in time is killed. Idempotent; never rejects.
   */
  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    const wasOpen = this.state === 'open' && this.lost === undefined;
    this.state = 'closing';
    if (wasOpen) {
      try {
        await this.call(this.conn.sendRequest('shutdown'), this.options.shutdownTimeoutMs ?? 15000, 'shutdown');
        await this.call(this.conn.sendNotification('exit'), 1000, 'exit');
      } catch {
        // Lost or timed out: the transport ends the process below.
      }
    }
    await this.transport.terminate(this.options.exitTimeoutMs ?? 3000).catch(() => {});
    this.connectionLost({ exitCode: null, signal: null, detail: 'the client was closed' });
    this.state = 'closed';
    this.conn.dispose();
  }

  private assertOpen(): void {
    if (this.state !== 'open') throw new ClientClosedError('the client is closed');
    if (this.lost !== undefined) throw this.lost;
  }

  /** Awaits a request, bounded by the connection's life and by `timeoutMs` when given. */
  private async call<T>(request: Promise<unknown>, timeoutMs: number | undefined, what: string): Promise<T> {
    if (this.lost !== undefined) throw this.lost;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      if (timeoutMs === undefined) return;
      timer = setTimeout(() => reject(new TimeoutError(`${what}: no answer from coderun-rpc within ${timeoutMs} ms`)), timeoutMs);
    });
    const lost = this.lostPromise.then((err) => Promise.reject(err));
    request.catch(() => {});
    lost.catch(() => {});
    try {
      const answer = request.catch(async (err: unknown) => {
        throw await this.failure(err);
      });
      return (await Promise.race([answer, timeout, lost])) as T;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * The error a failed call rejects with. A connection failure (`ofConnection`, by default
   * recognised by {@link isConnectionFailure}) is usually seen before the daemon's exit is; it
   * waits (up to {@link EXIT_GRACE_MS}) for the connection to be marked lost, so the error carries
   * the exit code or signal and the stderr tail whenever the daemon exited.
   */
  private async failure(err: unknown, ofConnection = isConnectionFailure(err)): Promise<Error> {
    if (this.lost === undefined && ofConnection) await within(this.lostPromise, EXIT_GRACE_MS);
    if (this.lost !== undefined) return this.lost;
    if (ofConnection) return new ConnectionLostError(`connection to coderun-rpc failed: ${messageOf(err)}`);
    if (err instanceof ResponseError) return rpcError(err.code, err.message, err.data);
    return err instanceof Error ? err : new CodeRunError(messageOf(err));
  }

  /** Fails every pending call at once; later calls fail the same way. */
  private connectionLost(exit: PeerExit | undefined): void {
    if (this.lost !== undefined) return;
    let how = 'closed its connection';
    if (exit?.signal) how = `was killed by ${exit.signal}`;
    else if (exit?.exitCode !== null && exit?.exitCode !== undefined) how = `exited with code ${exit.exitCode}`;
    const detail = exit?.detail ? ` (${exit.detail})` : '';
    const pending = this.runs.size;
    const runs = pending > 0 ? `; ${pending} pending run${pending === 1 ? '' : 's'} failed` : '';
    this.lost = new ConnectionLostError(`coderun-rpc ${how}${detail}${runs}`, exit?.exitCode ?? null, exit?.signal ?? null);
    for (const session of [...this.sessions.values()]) session.end('lost', this.lost.message);
    this.markLost(this.lost);
    for (const run of [...this.runs.values()]) run.reject(this.lost);
  }
}
