/**
 * A persistent session (docs/protocol-sessions.md §11): one long-lived interpreter whose top-level names
 * survive from one run to the next. The client creates it (`client.openSession()`,
 * `session.fork()`); this module keeps what the client knows of its state.
 */
import { ClientClosedError, ConnectionLostError, ProtocolError, SessionNotOpenError } from './errors.js';
import type { RunOptions, RunResult, SessionClosedEvent, SessionState } from './types.js';

/** What a session needs from its client. */
export interface SessionHost {
  runInSession(sessionId: string, options: RunOptions): Promise<RunResult>;
  /** A session request (`session/fork`, `session/close`) and its result. */
  sessionRequest(method: string, sessionId: string): Promise<unknown>;
  /** Registers a session the daemon just created. */
  adopt(sessionId: string): Session;
  /** Forgets a session that is no longer open. */
  forget(session: Session): void;
}

/** The `sessionId` of a `session/open` or `session/fork` result. */
export function sessionIdOf(method: string, result: unknown): string {
  const id = (result as { sessionId?: unknown } | null)?.sessionId;
  if (typeof id !== 'string') throw new ProtocolError(`${method} result has no sessionId: ${JSON.stringify(result)?.slice(0, 200)}`);
  return id;
}

/** Calls every listener with `event`; a throwing listener must not break the connection. */
export function notifyAll(listeners: Iterable<(event: SessionClosedEvent) => void>, event: SessionClosedEvent): void {
  for (const cb of [...listeners]) {
    try {
      cb(event);
    } catch {
      // Ignored, as documented: the event is the listener's to handle.
    }
  }
}

/** The code of `session not open`; errors made by the client itself carry it too. */
const NOT_OPEN = -32004;

/**
 * One open session. Runs on it execute one at a time, in order; `fork()` copies its state into
 * a new session; `close()` (or `await using`) ends it. Once the daemon reports it closed or lost,
 * every call rejects with {@link SessionNotOpenError} naming the session, its state and reason.
 */
export class Session implements AsyncDisposable {
  private current: SessionState = 'open';
  private why: string | undefined;
  private closing: Promise<void> | undefined;
  private readonly listeners = new Set<(event: SessionClosedEvent) => void>();

  /** Created by the client; use `client.openSession()` or {@link Session.fork}. */
  constructor(
    private readonly host: SessionHost,
    /** The daemon's `sessionId`. */
    readonly id: string,
  ) {}

  /** `open` until it is closed (`close()`, idle time, shutdown) or lost. */
  get state(): SessionState {
    return this.current;
  }

  /** Why the session is no longer open (`closed`, `idle`, `shutdown`, or how it was lost). */
  get reason(): string | undefined {
    return this.why;
  }

  /**
   * Runs a program in the session: names it binds at the top level stay for later runs. Each
   * run has its own bindings and budgets; `limits.addressSpaceMb` is refused (fixed at open).
   * A result whose `session.alive` is `false` ended the session (the result says why).
   */
  async run(options: RunOptions): Promise<RunResult> {
    this.assertOpen();
    const result = await this.settled(this.host.runInSession(this.id, options));
    if (result.session?.alive === false) this.end('lost', result.session.reason ?? result.error?.kind ?? 'lost');
    return result;
  }

  /**
   * A new session whose interpreter is a copy of this one's state (waiting for a run in flight
   * to finish first). The two diverge from here. Rejects with `SessionLimitError` at the cap.
   */
  async fork(): Promise<Session> {
    this.assertOpen();
    const result = await this.settled(this.host.sessionRequest('session/fork', this.id));
    return this.host.adopt(sessionIdOf('session/fork', result));
  }

  /**
   * Ends the session: runs queued on it settle `abort`, and it resolves once the daemon has
   * stopped its interpreter. Idempotent; resolves at once for a session already closed or
   * lost, and when the daemon is gone (the session went with it).
   */
  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  /** `await using s = await client.openSession()` closes it at the end of the block. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * `callback` runs when the daemon ends the session on its own (`session/closed`: idle time,
   * loss, shutdown); never for `close()`. Returns the function that unsubscribes it.
   */
  onClosed(callback: (event: SessionClosedEvent) => void): () => void {
    this.listeners.add(callback);
    return () => this.listeners.delete(callback);
  }

  /** The client delivers this session's `session/closed` here. */
  notifyClosed(event: SessionClosedEvent): void {
    this.end(event.reason === 'lost' ? 'lost' : 'closed', event.reason === 'lost' ? event.message : event.reason);
    notifyAll(this.listeners, event);
  }

  /** Marks the session as no longer open (the first state and reason stick). */
  end(state: Exclude<SessionState, 'open'>, reason: string): void {
    if (this.current !== 'open') return;
    this.current = state;
    this.why = reason;
    this.host.forget(this);
  }

  private async doClose(): Promise<void> {
    if (this.current !== 'open') return;
    try {
      await this.host.sessionRequest('session/close', this.id);
    } catch (err) {
      // Already gone, or gone with the daemon: either way there is nothing left to close.
      const gone = err instanceof SessionNotOpenError || err instanceof ConnectionLostError || err instanceof ClientClosedError;
      if (!gone) throw err;
    }
    this.end('closed', 'closed');
  }

  /** `request`'s outcome; a `session not open` answer updates what the client knows. */
  private async settled<T>(request: Promise<T>): Promise<T> {
    try {
      return await request;
    } catch (err) {
      if (err instanceof SessionNotOpenError && err.sessionId === this.id && err.state !== 'unknown') {
        this.end(err.state, err.reason ?? err.state);
      }
      throw err;
    }
  }

  private assertOpen(): void {
    if (this.current === 'open') return;
    const reason = this.why === undefined || this.why === this.current ? '' : ` (${this.why})`;
    throw new SessionNotOpenError(NOT_OPEN, `session ${this.id} is ${this.current}${reason}`, {
      sessionId: this.id,
      state: this.current,
      reason: this.why,
    });
  }
}
