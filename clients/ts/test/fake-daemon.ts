/**
 * A scripted stand-in for coderun-rpc, for the client's own behaviour (kill paths, raw bytes
 * on the wire) without Python. It speaks the LSP framing by hand. A `run` program is JSON:
 *   {"steps": [step...], "return": value | "$results"}
 * steps: {"log": text} | {"call": [ns, fn, args]} | {"gather": [[ns, fn, args]...]}
 *        | {"sleep": ms} | {"die": signal}
 * Each call's outcome is recorded as {"raw": <result text as received>} or {"error": message};
 * `"$results"` returns them in order.
 * env FAKE_IGNORE_SHUTDOWN=1: never answer `shutdown`, ignore `exit` and stdin EOF.
 * env FAKE_EXIT_AFTER_INITIALIZE=<code>: close stdin (so the client's next write fails), answer
 * `initialize`, write "fake: exiting after initialize" to stderr and exit with <code>.
 */
import { closeSync } from 'node:fs';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Id = number | string;

const ignoreShutdown = process.env['FAKE_IGNORE_SHUTDOWN'] === '1';
const exitAfterInitialize = process.env['FAKE_EXIT_AFTER_INITIALIZE'];

function send(msg: object): void {
  const body = Buffer.from(JSON.stringify(msg), 'utf8');
  process.stdout.write(`Content-Length: ${body.length}\r\n\r\n`);
  process.stdout.write(body);
}

interface Live {
  id: Id;
  logs: string[];
  stream: boolean;
  calls: Set<number>;
  settle(result: object): void;
}

const live = new Map<Id, Live>();
const waiting = new Map<number, (outcome: Json) => void>();
let nextCallId = 1000;

function stats(): object {
  return { wallMs: 1, cpuMs: 1, maxRssKb: 1, queueMs: 0, bindingCalls: 0, logBytes: 0 };
}

function call(run: Live, ns: string, fn: string, args: Json): Promise<Json> {
  const id = nextCallId++;
  run.calls.add(id);
  send({ jsonrpc: '2.0', id, method: 'binding/call', params: { runId: run.id, namespace: ns, function: fn, args } });
  return new Promise((resolve) => waiting.set(id, resolve));
}

function settle(run: Live, result: object): void {
  if (!live.has(run.id)) return;
  live.delete(run.id);
  for (const id of run.calls) {
    waiting.delete(id);
    send({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id } });
  }
  send({ jsonrpc: '2.0', id: run.id, result: { ...result, logs: run.logs, stats: stats() } });
}

async function execute(run: Live, program: string): Promise<void> {
  let script: { steps?: Json[]; return?: Json };
  try {
    script = JSON.parse(program) as typeof script;
  } catch {
    return settle(run, { error: { kind: 'exception', message: 'SyntaxError', exceptionType: 'SyntaxError', line: 1 } });
  }
  const results: Json[] = [];
  for (const step of script.steps ?? []) {
    if (!live.has(run.id)) return;
    const s = step as { [k: string]: Json };
    if (typeof s['log'] === 'string') {
      const index = run.logs.length;
      run.logs.push(s['log']);
      if (run.stream) send({ jsonrpc: '2.0', method: 'run/log', params: { runId: run.id, index, text: s['log'], continued: false } });
    } else if (Array.isArray(s['call'])) {
      const [ns, fn, args] = s['call'] as [string, string, Json];
      results.push(await call(run, ns, fn, args));
    } else if (Array.isArray(s['gather'])) {
      const calls = (s['gather'] as [string, string, Json][]).map(([ns, fn, args]) => call(run, ns, fn, args));
      results.push(...(await Promise.all(calls)));
    } else if (typeof s['sleep'] === 'number') {
      await new Promise((r) => setTimeout(r, s['sleep'] as number));
    } else if (typeof s['die'] === 'string') {
      process.kill(process.pid, s['die'] as NodeJS.Signals);
      await new Promise((r) => setTimeout(r, 10000));
    }
  }
  settle(run, { value: script.return === '$results' ? results : (script.return ?? null) });
}

function onResponse(id: number, raw: string, msg: { result?: unknown; error?: { message?: unknown } }): void {
  const resolve = waiting.get(id);
  if (resolve === undefined) return;
  waiting.delete(id);
  for (const run of live.values()) run.calls.delete(id);
  if (msg.error !== undefined) resolve({ error: String(msg.error.message) });
  else {
    const m = /^\{"jsonrpc":"2\.0","id":\d+,"result":([\s\S]*)\}$/.exec(raw);
    resolve({ raw: m ? (m[1] as string) : `<unexpected layout> ${raw.slice(0, 200)}` });
  }
}

function shutdownAll(message: string): void {
  for (const run of [...live.values()]) settle(run, { error: { kind: 'abort', message } });
}

function onMessage(raw: string): void {
  const msg = JSON.parse(raw) as { id?: Id; method?: string; params?: { [k: string]: Json }; result?: unknown };
  if (msg.method === undefined) return onResponse(msg.id as number, raw, msg);
  const reply = (result: unknown) => send({ jsonrpc: '2.0', id: msg.id, result });
  const p = msg.params ?? {};
  switch (msg.method) {
    case 'initialize':
      if (exitAfterInitialize !== undefined) {
        process.stdin.destroy();
        closeSync(0); // libuv never closes a stdio fd itself
      }
      reply({
        serverInfo: { name: 'coderun-rpc', version: 'fake' },
        capabilities: { languages: ['python'], isolation: 'process', logStreaming: true, limits: {}, python: {} },
      });
      if (exitAfterInitialize !== undefined) {
        process.stderr.write('fake: exiting after initialize\n');
        process.exit(Number(exitAfterInitialize));
      }
      return;
    case 'run': {
      if (typeof p['program'] !== 'string') {
        return send({ jsonrpc: '2.0', id: msg.id, error: { code: -32602, message: 'program must be a string' } });
      }
      const id = msg.id as Id;
      const run: Live = { id, logs: [], stream: p['stream'] === true, calls: new Set(), settle: () => {} };
      live.set(id, run);
      void execute(run, p['program']);
      return;
    }
    case '$/cancelRequest': {
      const run = live.get(p['id'] as Id);
      if (run) settle(run, { error: { kind: 'abort', message: 'run cancelled by the client' } });
      return;
    }
    case 'shutdown':
      if (ignoreShutdown) return;
      shutdownAll('server is shutting down');
      return reply(null);
    case 'exit':
      if (!ignoreShutdown) process.exit(0);
      return;
    default:
      if (msg.id !== undefined) send({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'method not found' } });
  }
}

let buf = Buffer.alloc(0);
process.stdin.on('data', (chunk: Buffer) => {
  buf = Buffer.concat([buf, chunk]);
  for (;;) {
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0) return;
    const m = /Content-Length: *(\d+)/i.exec(buf.subarray(0, end).toString('ascii'));
    const len = Number(m?.[1]);
    if (buf.length < end + 4 + len) return;
    const body = buf.subarray(end + 4, end + 4 + len).toString('utf8');
    buf = buf.subarray(end + 4 + len);
    onMessage(body);
  }
});
process.stdin.on('end', () => {
  if (ignoreShutdown) return;
  shutdownAll('server is shutting down');
  process.exit(0);
});
if (ignoreShutdown) {
  process.on('SIGTERM', () => {});
  setInterval(() => {}, 1 << 30);
}
