/** Typed errors: one class per JSON-RPC error code the daemon uses, plus connection failures. */

/** Base class of every error this package throws or rejects with. */
export class CodeRunError extends Error {
  override name = 'CodeRunError';
}

/** The daemon answered a request with a JSON-RPC error. `code` and `data` are as received. */
export class RpcError extends CodeRunError {
  override name = 'RpcError';
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** −32700: the daemon could not parse a message. */
export class ParseError extends RpcError {
  override name = 'ParseError';
}
/** −32600: invalid request, e.g. `server is shutting down` or a message over the cap. */
export class InvalidRequestError extends RpcError {
  override name = 'InvalidRequestError';
}
/** −32601: unknown method. */
export class MethodNotFoundError extends RpcError {
  override name = 'MethodNotFoundError';
}
/**
 * −32602: `run` params refused up front (docs/protocol.md §3.4; nothing was spawned), or
 * `bindings/describe` params refused (an invalid declaration or schema, its path named).
 */
export class InvalidParamsError extends RpcError {
  override name = 'InvalidParamsError';
}
/** −32001: `run queue is full`. */
export class QueueFullError extends RpcError {
  override name = 'QueueFullError';
}
/** −32002: a request before `initialize`. */
export class ServerNotInitializedError extends RpcError {
  override name = 'ServerNotInitializedError';
}

/** −32003: `session limit reached`; the message names the cap (`CODERUN_MAX_SESSIONS`). */
export class SessionLimitError extends RpcError {
  override name = 'SessionLimitError';
}

/** The `data` of −32004 `session not open`. */
export interface SessionNotOpenData {
  sessionId: string;
  /** `unknown`: never issued; `closed`: by `close()` or idle time; `lost`: `reason` says how. */
  state: 'unknown' | 'closed' | 'lost';
  reason?: string;
}

/**
 * −32004: the session is not open. Thrown by the daemon's answer, or by the client itself,
 * without a round trip, for a session it already knows is closed or lost. `sessionId`,
 * `state` and `reason` say which session and why.
 */
export class SessionNotOpenError extends RpcError {
  override name = 'SessionNotOpenError';
  override readonly data: SessionNotOpenData;
  constructor(code: number, message: string, data?: unknown) {
    super(code, message, data);
    const d = (data ?? {}) as Partial<SessionNotOpenData>;
    this.data = { sessionId: String(d.sessionId ?? ''), state: d.state ?? 'unknown', ...(d.reason === undefined ? {} : { reason: d.reason }) };
  }
  get sessionId(): string {
    return this.data.sessionId;
  }
  get state(): SessionNotOpenData['state'] {
    return this.data.state;
  }
  get reason(): string | undefined {
    return this.data.reason;
  }
}

const byCode: Record<number, new (code: number, message: string, data?: unknown) => RpcError> = {
  [-32700]: ParseError,
  [-32600]: InvalidRequestError,
  [-32601]: MethodNotFoundError,
  [-32602]: InvalidParamsError,
  [-32001]: QueueFullError,
  [-32002]: ServerNotInitializedError,
  [-32003]: SessionLimitError,
  [-32004]: SessionNotOpenError,
};

/** The typed error for a JSON-RPC error code. */
export function rpcError(code: number, message: string, data?: unknown): RpcError {
  const Ctor = byCode[code] ?? RpcError;
  return new Ctor(code, message, data);
}

/**
 * The daemon went away (exited, was killed, or closed its stdout) while a call was pending, or
 * a call was made after that. Every pending call rejects with it at once.
 */
export class ConnectionLostError extends CodeRunError {
  override name = 'ConnectionLostError';
  constructor(
    message: string,
    readonly exitCode: number | null = null,
    readonly signal: string | null = null,
  ) {
    super(message);
  }
}

/** A call was made on a client after `close()` began. */
export class ClientClosedError extends CodeRunError {
  override name = 'ClientClosedError';
}

/** The daemon did not answer in time (start-up, `shutdown`). */
export class TimeoutError extends CodeRunError {
  override name = 'TimeoutError';
}

/** A message from the daemon did not have the shape the docs/protocol.md promises. */
export class ProtocolError extends CodeRunError {
  override name = 'ProtocolError';
}

/**
 * No usable daemon binary. The message names each place tried, in order (the `command` option,
 * `CODERUN_RPC_BIN`, the platform package, PATH), and why each failed.
 */
export class DaemonNotFoundError extends CodeRunError {
  override name = 'DaemonNotFoundError';
}
