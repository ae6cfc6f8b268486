/**
 * Code mode, framework-free: a framework's tools become typed functions of one Python global, a
 * model writes one program that calls them, and the program runs in coderun. The framework
 * adapters (`@coderun/client/ai`, `/openai-agents`, `/langchain`) turn their tools into
 * {@link HostFunction}s and a {@link CodeMode} back into one tool of theirs.
 *
 * One CodeMode is one agent's conversation: its runs share one persistent session (state kept
 * from call to call) unless `session: false`; the stubs in the description and every run use the
 * same limits; the daemon is started when first needed and closed by {@link CodeMode.close}.
 */
import { CodeRunClient, describeWithoutDaemon } from '../node.js';
import type { StartOptions } from '../node.js';
import { ClientClosedError, InvalidParamsError, SessionLimitError, SessionNotOpenError } from '../errors.js';
import { formatRun } from '../format.js';
import type { ModelOutput } from '../format.js';
import type { JsonSchema, ObjectSchema } from '../schema.js';
import type { Session } from '../session.js';
import type { Binding, JsonValue, RunLimits, RunResult, TypedFunction } from '../types.js';

/**
 * One host function the program can call: a framework tool as the daemon sees it. `C` is what
 * the adapter knows of the framework's tool call that runs the program (its context, its
 * options), passed on to the tool.
 */
export interface HostFunction<C> {
  /** The member name under the global (any string; not an identifier → `tools["my-tool"](…)`). */
  name: string;
  description?: string;
  /** The arguments' JSON Schema (`"type": "object"`); the daemon checks every call against it. */
  parameters?: ObjectSchema;
  /** The result's JSON Schema, when the framework declares one; the daemon checks results. */
  returns?: JsonSchema;
  /**
   * Calls the framework's tool with the program's arguments (already checked against
   * `parameters`). `signal` fires when the run no longer needs the answer.
   */
  call(args: JsonValue, signal: AbortSignal, context: C): unknown;
}

/** Options shared by every adapter. */
export interface CodeModeOptions {
  /** The Python global that holds the tools (default `tools`). */
  global?: string;
  /** Budgets of every run, also shown in the stubs' header; they may only tighten the daemon's. */
  limits?: RunLimits;
  /**
   * `true` (default): the calls share one persistent session — variables, imports and files stay
   * from one call to the next, until `close()`. `false`: every call is a fresh run.
   */
  session?: boolean;
  /** A connected client to use (never closed here); default: a daemon started on first need. */
  client?: CodeRunClient;
  /** How to start that daemon (`command`, `env` with `CODERUN_*` variables, …). */
  start?: StartOptions;
}

/**
 * The first lines of the description (the same as the Python client's adapters write); the
 * stubs follow.
 */
function intro(global: string, session: boolean): string {
  const state = session
    ? 'Runs share one interpreter: variables, imports and files stay for the next run.'
    : 'Every run starts a fresh interpreter: nothing stays from one run to the next.';
  return [
    'Run a Python program in a fresh CPython process under budgets and return its logs and value.',
    "A top-level return gives the run's value; print() output is logged; displayed images and matplotlib figures are shown to you.",
    `The host's tools are async functions of the global \`${global}\`: call them with await, for example \`r = await ${global}.name(arg=1)\`; ` +
      `a tool whose name is not an identifier is reached by subscript: \`await ${global}["my-tool"](arg=1)\`. A failing tool raises an exception with its message.`,
    state,
    'The API:',
    '',
    '',
  ].join('\n');
}

/**
 * Whether the daemon `start` would start has sessions off: `CODERUN_MAX_SESSIONS` (in its env,
 * else this process's) is zero, as the daemon's integer rule reads it.
 */
function sessionsOff(start: StartOptions | undefined): boolean {
  const env = start?.env ?? {};
  const value = 'CODERUN_MAX_SESSIONS' in env ? env['CODERUN_MAX_SESSIONS'] : process.env['CODERUN_MAX_SESSIONS'];
  return value !== undefined && /^[+-]?0+$/.test(value);
}

/** Tells the model that this call's run ended the session. */
function lostNote(reason: string): string {
  return `# the Python session ended (${reason}): its variables are gone; the next call starts a fresh one`;
}

/** Tells the model that the session it was using is gone. */
function endedNote(reason: string): string {
  return `# the Python session ended (${reason}): its variables are gone; this call started a fresh one`;
}

/** Tells the model that this call could not have a session. */
const NO_SESSION_NOTE = "# no Python session was free (the daemon's cap): this call ran in a fresh process and nothing it set stays";

/** A session run may not name `addressSpaceMb` (fixed when the session opened, from the same limits). */
function sessionRunLimits(limits: RunLimits | undefined): RunLimits | undefined {
  if (limits?.addressSpaceMb === undefined) return limits;
  const { addressSpaceMb: _fixed, ...rest } = limits;
  return rest;
}

/** The functions, refusing a name given twice (the program could reach only one of them). */
function checkedFunctions<C>(functions: HostFunction<C>[]): HostFunction<C>[] {
  const seen = new Set<string>();
  for (const f of functions) {
    if (typeof f.name !== 'string' || f.name === '') throw new TypeError('every tool needs a non-empty string name');
    if (seen.has(f.name)) throw new TypeError(`two tools are named ${JSON.stringify(f.name)}`);
    seen.add(f.name);
  }
  return functions;
}

/** A run as a model reads it, and the run's own result. */
export interface CodeRun {
  output: ModelOutput;
  result: RunResult;
}

/**
 * A CodeMode for `functions` with its description rendered; a mode whose description fails is
 * closed before the error is thrown, so no daemon is left behind.
 */
export async function describedMode<C>(
  functions: HostFunction<C>[],
  options: CodeModeOptions,
): Promise<{ mode: CodeMode<C>; description: string }> {
  const mode = new CodeMode<C>(functions, options);
  try {
    return { mode, description: await mode.description() };
  } catch (err) {
    await mode.close();
    throw err;
  }
}

/** The engine of the adapters: the description, the runs, the session and the daemon's life. */
export class CodeMode<C> implements AsyncDisposable {
  readonly global: string;
  private readonly functions: HostFunction<C>[];
  private clientPromise: Promise<CodeRunClient> | undefined;
  private sessionPromise: Promise<Session> | undefined;
  /** Why the session last used ended, until a call reports it to the model. */
  private endedReason: string | undefined;
  /** The last session call, settled: the next one starts after it. */
  private previous: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    functions: HostFunction<C>[],
    private readonly options: CodeModeOptions = {},
  ) {
    this.global = options.global ?? 'tools';
    this.functions = checkedFunctions(functions);
  }

  /**
   * What the model reads about the tool: what it does, then the stubs under the runs' limits.
   * Before this CodeMode has started its daemon they come from `coderun-rpc describe` (the same
   * binary and environment), so making a tool starts no daemon: the first run does. The intro
   * says whether calls share a session, which a daemon with sessions off cannot give: with
   * `CODERUN_MAX_SESSIONS=0` (and `session` not false) the daemon is started to describe.
   */
  async description(): Promise<string> {
    if (this.closed) throw new ClientClosedError('this code tool was closed');
    const bindings = [this.binding(() => Promise.reject(new Error('not called')))];
    const describe = { bindings, limits: this.options.limits };
    const naming = (err: unknown) => {
      throw this.namingTheTool(err);
    };
    const sessionsKnown = this.options.session === false || !sessionsOff(this.options.start);
    if (this.options.client === undefined && this.clientPromise === undefined && sessionsKnown) {
      const stubs = await describeWithoutDaemon(describe, this.options.start).catch(naming);
      return intro(this.global, this.options.session !== false) + stubs;
    }
    const client = await this.client();
    const stubs = await client.describe(describe).catch(naming);
    return intro(this.global, this.usesSessions(client)) + stubs;
  }

  /** The daemon's refusal of a declaration, naming the tool instead of its index in the binding. */
  private namingTheTool(err: unknown): unknown {
    const at = err instanceof InvalidParamsError ? /^bindings\[0\]\.functions\[(\d+)\]\.?/.exec(err.message) : null;
    const f = at === null ? undefined : this.functions[Number(at[1])];
    if (at === null || f === undefined || !(err instanceof InvalidParamsError)) return err;
    return new InvalidParamsError(err.code, `tool ${JSON.stringify(f.name)}: ${err.message.slice(at[0].length)}`, err.data);
  }

  /** Runs `program` (in the session unless `session: false`); `signal` cancels the run. */
  async run(program: string, context: C, signal?: AbortSignal): Promise<CodeRun> {
    const client = await this.client();
    const binding = this.binding((f, args, callSignal) => f.call(args, callSignal, context));
    const notes: string[] = [];
    const result = this.usesSessions(client)
      ? await this.runInSession(client, program, binding, signal, notes)
      : await client.run({ program, bindings: [binding], limits: this.options.limits, signal });
    const output = formatRun(result, notes);
    if (result.session?.alive === false) output.text += '\n' + lostNote(result.session.reason ?? 'lost');
    return { output, result };
  }

  /** Closes the session and, when this CodeMode started it, the daemon. Idempotent; never rejects. */
  async close(): Promise<void> {
    this.closed = true;
    const session = this.sessionPromise;
    const client = this.clientPromise;
    this.sessionPromise = undefined;
    this.clientPromise = undefined;
    await session?.then((s) => s.close()).catch(() => {});
    await client?.then((c) => c.close()).catch(() => {});
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * The client: the one given, else the daemon this CodeMode started — started again when the
   * last one is gone (it died, or could not start), since the next call must not fail for it.
   */
  private async client(): Promise<CodeRunClient> {
    if (this.closed) throw new ClientClosedError('this code tool was closed');
    if (this.options.client !== undefined) return this.options.client;
    const current = this.clientPromise;
    if (current !== undefined && (await current.catch(() => undefined))?.isOpen !== true && this.clientPromise === current) {
      this.clientPromise = undefined;
      void current.then((c) => c.close()).catch(() => {});
    }
    if (this.closed) throw new ClientClosedError('this code tool was closed');
    this.clientPromise ??= CodeRunClient.start(this.options.start);
    return this.clientPromise;
  }

  private usesSessions(client: CodeRunClient): boolean {
    return this.options.session !== false && (client.initializeResult.capabilities.sessions?.max ?? 0) > 0;
  }

  /**
   * A run in the session, after the previous call's run has settled: a framework may give up on
   * a call (its abort) before the cancelled run is over, and a run queued behind it would be
   * settled with the session's loss instead of running in a fresh session.
   */
  private runInSession(client: CodeRunClient, program: string, binding: Binding, signal: AbortSignal | undefined, notes: string[]): Promise<RunResult> {
    const turn = this.previous.then(() => this.runInSessionNow(client, program, binding, signal, notes));
    this.previous = turn.catch(() => {});
    return turn;
  }

  /**
   * A run in the session; a session found ended is replaced by a fresh one, and the model told.
   * With no session to be had (the daemon's cap, reached by other agents), a fresh run, and the
   * model told.
   */
  private async runInSessionNow(client: CodeRunClient, program: string, binding: Binding, signal: AbortSignal | undefined, notes: string[]): Promise<RunResult> {
    const limits = sessionRunLimits(this.options.limits);
    for (;;) {
      const session = await this.session().catch((err: unknown) => {
        if (err instanceof SessionLimitError) return undefined;
        throw err;
      });
      if (session === undefined) {
        notes.push(NO_SESSION_NOTE);
        return client.run({ program, bindings: [binding], limits: this.options.limits, signal });
      }
      try {
        const result = await session.run({ program, bindings: [binding], limits, signal });
        if (this.endedReason !== undefined) notes.push(endedNote(this.endedReason));
        this.endedReason = undefined;
        if (result.session?.alive === false) await this.forget(session, result.session.reason ?? 'lost');
        return result;
      } catch (err) {
        // Ended between calls (idle time, a loss): the program never ran, so it runs in a new one.
        if (!(err instanceof SessionNotOpenError) || err.sessionId !== session.id) throw err;
        await this.forget(session, err.reason ?? err.state);
      }
    }
  }

  /** The session of the calls, opened on first need (and again after a failed open). */
  private session(): Promise<Session> {
    if (this.sessionPromise === undefined) {
      const opening = this.client().then((c) => c.openSession({ limits: this.options.limits }));
      this.sessionPromise = opening;
      opening.catch(() => {
        if (this.sessionPromise === opening) this.sessionPromise = undefined;
      });
    }
    return this.sessionPromise;
  }

  /** Drops `session` (unless a concurrent call replaced it already) and remembers why. */
  private async forget(session: Session, reason: string): Promise<void> {
    this.endedReason = reason;
    const current = this.sessionPromise;
    if ((await current?.catch(() => undefined)) === session && this.sessionPromise === current) this.sessionPromise = undefined;
  }

  /** The one binding: every host function, typed; `handler` makes each handler. */
  private binding(handler: (f: HostFunction<C>, args: JsonValue, signal: AbortSignal) => unknown): Binding {
    const functions = new Map<string, TypedFunction>();
    for (const f of this.functions) {
      const entry: TypedFunction = { handler: (args, signal) => handler(f, args, signal) };
      if (f.description !== undefined) entry.description = f.description;
      if (f.parameters !== undefined) entry.parameters = f.parameters;
      if (f.returns !== undefined) entry.returns = f.returns;
      functions.set(f.name, entry);
    }
    return { global: this.global, functions, errorClass: { name: 'ToolError', memberNameProperty: 'tool' } };
  }
}
