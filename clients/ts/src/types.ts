/** Public types of the client: the `run` request and result of docs/protocol.md §3, bindings of §4. */
import type { JsonValue } from './json.js';
import type { JsonSchema, ObjectSchema } from './schema.js';
import type { DisplayOutput, OutFile, OutputEvent, RunFiles } from './outputs.js';

export type { JsonValue };

/** Per-run budgets; each may only tighten the daemon's configuration (positive integers). */
export interface RunLimits {
  cpuSeconds?: number;
  maxWallMs?: number;
  addressSpaceMb?: number;
  maxLogBytes?: number;
  maxValueBytes?: number;
  maxFileBytes?: number;
  maxOutputBytes?: number;
  maxDiskMb?: number;
  /** Requests through the daemon's egress proxy, refused ones included. */
  maxEgressRequests?: number;
  /** Body and tunnel bytes through the egress proxy, both ways. */
  maxEgressBytes?: number;
}

/**
 * One entry of an egress policy (docs/containment.md §6): `"host[:port]"` (`*.example.com`
 * matches its sub-domains) or an object with `ports`, `methods` (plain HTTP only) and `private`.
 */
export type EgressRule =
  | string
  | { host: string; ports?: number[]; methods?: ('GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS')[]; private?: boolean };

/**
 * A credential the daemon's egress proxy adds to a run's requests to `hosts` (within the run's
 * egress; docs/containment-secrets.md): a `header`, a `query` parameter, or an `env` variable the
 * program sees as a placeholder the proxy replaces with `value`. The program never sees `value`.
 */
export type Secret = { hosts: string[]; value: string } & ({ header: string } | { query: string } | { env: string });

/** One request a run made through the daemon's egress proxy (`result.egress`). */
export interface EgressEntry {
  host: string;
  port: number;
  /** The HTTP method, `CONNECT` for an HTTPS tunnel, `OTHER` for a refused odd one. */
  method: string;
  /** 403: refused by the policy or a budget. */
  status: number;
  /** The response body's, or a tunnel's both ways. */
  bytes: number;
  ms: number;
}

/** What a binding function receives besides its argument. */
export interface BindingCallInfo {
  /** The request id of the `run` this call belongs to. */
  runId: number | string;
  namespace: string;
  function: string;
  /**
   * The W3C traceparent the daemon sent with the call (its span for the call, or the run's own
   * `traceparent` passed on): start the tool's span under it.
   */
  traceparent?: string;
}

/**
 * A host function the program can await. It receives the program's JSON argument (`null` when
 * called without one) and an `AbortSignal` that fires when the daemon no longer needs the answer
 * (the run was decided: done, timeout, abort, death) or the connection is gone. It may be sync
 * or async. Its value must be lossless JSON; a throw (or rejection) raises in the program with
 * the error's message.
 */
export type BindingFunction = (
  args: JsonValue,
  signal: AbortSignal,
  call: BindingCallInfo,
) => unknown | Promise<unknown>;

/**
 * A typed binding function: the handler plus what the daemon declares to the program. With
 * `parameters`, the program calls it like a Python function (positional or keyword arguments)
 * and the handler receives an object of the arguments by name, already validated against the
 * schema: invalid arguments raise `TypeError` in the program and never reach the handler. With
 * `returns`, a result that breaks the schema raises in the program instead of returning.
 * `A` and `R` are the handler's argument and result types (`defineFunction` infers them).
 */
export interface TypedFunction<A = JsonValue, R = unknown> {
  handler: (args: A, signal: AbortSignal, call: BindingCallInfo) => R | Promise<R>;
  /** The stub's docstring: what a model reads about the function. */
  description?: string;
  /** The arguments' schema; must be `"type": "object"`. */
  parameters?: ObjectSchema;
  /** The result's schema. */
  returns?: JsonSchema;
}

/** A `functions` entry: a bare handler (untyped) or a {@link TypedFunction}. */
export type BindingEntry = BindingFunction | TypedFunction;

/** `errorClass` of docs/protocol.md §3: a rejected call raises `name` with `memberNameProperty` = member. */
export interface ErrorClassSpec {
  name: string;
  memberNameProperty: string;
}

/** One program-visible global object whose members run on the host. */
export interface Binding {
  global: string;
  /**
   * Member name → function (bare or typed), in declaration order. Use a `Map` for names an
   * object literal cannot hold as own keys (`__proto__`).
   */
  functions?: Record<string, BindingEntry> | Map<string, BindingEntry>;
  /**
   * Instead of `functions`: the key of an upstream MCP server the daemon was started with
   * (`mcpConfig`); its tools become this global's functions and are called by the daemon,
   * never by this client (docs/mcp.md).
   */
  mcp?: string;
  errorClass?: ErrorClassSpec;
}

/** One `run/log` notification (docs/protocol.md §5). */
export interface LogEvent {
  index: number;
  text: string;
  /** `true`: `text` extends entry `index` (a flushed, unterminated line). */
  continued: boolean;
}

export interface RunOptions {
  /** Python source: the body of an async function (top-level `await` and `return` work). */
  program: string;
  bindings?: Binding[];
  limits?: RunLimits;
  /**
   * Cancels the run: the client sends `$/cancelRequest` and the run still RESOLVES, with the
   * daemon's result of kind `abort` ("run cancelled by the client") and the logs captured so far.
   * A signal that is already aborted sends the run and its cancel together (same result).
   */
  signal?: AbortSignal;
  /** Receives every log entry as it is captured, before the run resolves; implies `stream`. */
  onLog?: (event: LogEvent) => void;
  /** Ask for `run/log` notifications (defaults to `true` when `onLog` or `onOutput` is given). */
  stream?: boolean;
  /** Files written into the working directory before the program starts (docs/protocol-files.md §12). */
  files?: RunFiles;
  /** Receives every displayed object as it is displayed, in order with `onLog`; implies `stream`. */
  onOutput?: (event: OutputEvent) => void;
  /** W3C traceparent of the caller's span: the daemon's run span becomes its child. */
  traceparent?: string;
  /**
   * Packages the daemon installs before the program starts (`["requests", "scipy==1.14.1"]`),
   * from what its `CODERUN_PACKAGES` allows (docs/packages.md); a set that cannot be installed
   * resolves with an `exception` naming the package. A session takes them at open instead.
   */
  packages?: string[];
  /** Narrows the daemon's egress policy for this run (entries within it; `[]`: none). */
  egress?: EgressRule[];
  /** Credentials the egress proxy adds for this run (not in a session: it has the daemon's). */
  secrets?: Secret[];
}

/** `describe` options: the bindings and limits a `run` would take (handlers are not used). */
export interface DescribeOptions {
  bindings: Binding[];
  limits?: RunLimits;
  /** The packages the run will name: the stubs' header lists them and what the daemon allows. */
  packages?: string[];
}

export type FailureKind = 'exception' | 'timeout' | 'abort' | 'worker-exit' | 'invalid-output' | 'output-limit';

export interface RunFailure {
  kind: FailureKind;
  /** Readable by a model that must fix its code. */
  message: string;
  /** kind `exception`: e.g. `ZeroDivisionError`, `SyntaxError`. */
  exceptionType?: string;
  /** kind `exception`: innermost program line, 1-based. */
  line?: number;
  /** kind `timeout`. */
  budget?: 'cpu' | 'wall';
  /** kind `worker-exit`. */
  exitCode?: number;
  signal?: string;
  /** kind `invalid-output`: the JSON path of the first refused value, e.g. `$["rows"][3]`. */
  path?: string;
  /** kind `invalid-output`: one line on how to return that value instead, when one applies. */
  hint?: string;
}

export interface RunStats {
  wallMs: number;
  cpuMs: number;
  maxRssKb: number;
  queueMs: number;
  bindingCalls: number;
  logBytes: number;
  /** The run's packages' install (or cache lookup) time; absent when it named none. */
  installMs?: number;
}

interface RunResultBase {
  /** Captured lines in order, newline stripped. */
  logs: string[];
  stats: RunStats;
  /** Displayed objects in order (present when the program displayed any); the last may be the truncation marker. */
  outputs?: DisplayOutput[];
  /** Regular files left under `out/`, sorted by path (present when there were any). */
  files?: OutFile[];
  /** Present on a run made in a session ({@link SessionInfo}). */
  session?: SessionInfo;
  /** Requests made through the egress proxy; present when the daemon has an egress policy. */
  egress?: EgressEntry[];
}

/** `result.session` of a session run (docs/protocol.md, persistent sessions). */
export interface SessionInfo {
  id: string;
  /** `false`: the run ended the session (`reason` says why); later calls on it fail. */
  alive: boolean;
  /** Runs the session has settled, this one included. */
  runs: number;
  reason?: string;
}

/** `openSession` options. */
export interface SessionOptions {
  /** Defaults for the session's runs; `addressSpaceMb` is fixed for the session's lifetime. */
  limits?: RunLimits;
  /** No run for this long closes the session (`session/closed`, reason `idle`). */
  idleTimeoutMs?: number;
  /** Packages installed for every run of the session (as `RunOptions.packages`). */
  packages?: string[];
  /** Credentials the egress proxy adds to every run of the session (as `RunOptions.secrets`). */
  secrets?: Secret[];
}

/** Why the daemon ended a session on its own (`session/closed`). */
export type SessionClosedReason = 'idle' | 'lost' | 'shutdown';

/** A `session/closed` notification. */
export interface SessionClosedEvent {
  sessionId: string;
  reason: SessionClosedReason;
  message: string;
}

/**
 * Where a session stands, as the client knows it: `open`, `closed` (by `close()` or idle
 * time) or `lost` (its child died, a run ended it, or the daemon shut down).
 */
export type SessionState = 'open' | 'closed' | 'lost';

/** A successful run: `value` is what the program returned (`null` for `None` / no return). */
export interface RunSuccess extends RunResultBase {
  value?: JsonValue;
  error?: undefined;
}

/** A failed run: failures are results, never exceptions. */
export interface RunFailed extends RunResultBase {
  value?: undefined;
  error: RunFailure;
}

export type RunResult = RunSuccess | RunFailed;

/** The `initialize` result (docs/protocol.md §2). */
export interface InitializeResult {
  serverInfo: { name: string; version?: string };
  capabilities: {
    languages: string[];
    isolation: 'process' | 'sandbox';
    /** Why that tier is in force (the setting, or what `auto` found); for people and logs. */
    isolationReason?: string;
    logStreaming: boolean;
    limits: {
      cpuSeconds: number;
      maxWallMs: number;
      addressSpaceMb: number;
      maxLogBytes: number;
      maxValueBytes: number;
      graceMs: number;
      maxConcurrentRuns: number;
    };
    python: { executable: string; version: string };
    /** Persistent sessions: the cap on open sessions (0: disabled), the default idle timeout. */
    sessions?: { max: number; idleTimeoutMs: number; fork: boolean };
    [key: string]: unknown;
  };
}
