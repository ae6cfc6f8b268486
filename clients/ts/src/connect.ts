/**
 * Transports to a daemon in service mode (`coderun-rpc serve`, docs/service.md): a Unix or TCP
 * socket in LSP framing, or a WebSocket carrying one JSON-RPC message per text message. The
 * token, when given, is sent as the daemon expects it: the first header line on a socket, the
 * `Authorization` header of the WebSocket upgrade.
 */
import { createConnection } from 'node:net';
import type { Socket } from 'node:net';
import { AbstractMessageReader, AbstractMessageWriter, Disposable } from 'vscode-jsonrpc';
import type { DataCallback, Event, Message, MessageReader, MessageWriter, PartialMessageInfo } from 'vscode-jsonrpc';
import { StreamMessageReader, StreamMessageWriter } from 'vscode-jsonrpc/node';
import type { PeerExit, Transport } from './client.js';
import { encodeMessage, losslessJsonEncoder } from './encoder.js';
import { CodeRunError } from './errors.js';

export interface ConnectTransportOptions {
  /** The daemon's `CODERUN_AUTH_TOKEN`; required when it has one. */
  token?: string;
}

/** Opens a transport to `address`: `unix:PATH`, `tcp:HOST:PORT` or `ws://HOST:PORT/PATH`. */
export async function openTransport(address: string, options: ConnectTransportOptions = {}): Promise<Transport> {
  if (address.startsWith('ws://') || address.startsWith('wss://')) return WebSocketTransport.open(address, options.token);
  if (address.startsWith('unix:')) return SocketTransport.open({ path: address.slice('unix:'.length) }, address, options.token);
  if (address.startsWith('tcp:')) {
    const hostPort = address.slice('tcp:'.length);
    const colon = hostPort.lastIndexOf(':');
    const port = Number(hostPort.slice(colon + 1));
    if (colon < 0 || !Number.isInteger(port) || port <= 0 || port > 65535) {
      throw new CodeRunError(`address ${JSON.stringify(address)}: tcp: needs HOST:PORT`);
    }
    const host = hostPort.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
    return SocketTransport.open({ host, port }, address, options.token);
  }
  throw new CodeRunError(`address ${JSON.stringify(address)}: must start with unix:, tcp: or ws://`);
}

/**
 * Remembers the error a daemon sends with `"id": null` before it closes a connection it refuses
 * (a wrong token, too many connections), so the loss names the reason.
 */
class RefusalWatch implements MessageReader {
  reason: string | undefined;
  constructor(private readonly inner: MessageReader) {}
  get onError(): Event<Error> {
    return this.inner.onError;
  }
  get onClose(): Event<void> {
    return this.inner.onClose;
  }
  get onPartialMessage(): Event<PartialMessageInfo> {
    return this.inner.onPartialMessage;
  }
  listen(callback: DataCallback): Disposable {
    return this.inner.listen((m) => {
      const r = m as { id?: unknown; error?: { message?: unknown } };
      if (r.id === null && typeof r.error?.message === 'string') this.reason = r.error.message;
      callback(m);
    });
  }
  dispose(): void {
    this.inner.dispose();
  }
  /** Words for the loss of the connection. */
  detail(fallback: string): string {
    return this.reason === undefined ? fallback : `the daemon refused the connection: ${this.reason}`;
  }
}

/** A transport over a connected socket (LSP framing, as on stdio). */
export class SocketTransport implements Transport {
  readonly reader: RefusalWatch;
  readonly writer: StreamMessageWriter;
  readonly exited: Promise<PeerExit>;

  constructor(readonly socket: Socket) {
    socket.on('error', () => {}); // reported through `exited`
    this.reader = new RefusalWatch(new StreamMessageReader(socket));
    this.writer = new StreamMessageWriter(socket, { contentTypeEncoder: losslessJsonEncoder });
    this.exited = new Promise((resolve) => {
      socket.once('close', () =>
        resolve({ exitCode: null, signal: null, detail: this.reader.detail('the daemon closed the connection') }),
      );
    });
  }

  static async open(to: { path: string } | { host: string; port: number }, address: string, token?: string): Promise<SocketTransport> {
    const socket = createConnection(to);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', (err) => reject(new CodeRunError(`cannot connect to ${address}: ${err.message}`)));
    });
    if (token !== undefined) socket.write(`Authorization: Bearer ${token}\r\n`);
    return new SocketTransport(socket);
  }

  /** Ends the connection (the daemon ends its runs), destroying it after `timeoutMs`. */
  async terminate(timeoutMs: number): Promise<void> {
    this.socket.end();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((r) => {
      timer = setTimeout(r, timeoutMs);
    });
    await Promise.race([this.exited, late]);
    clearTimeout(timer);
    this.socket.destroy();
  }
}

/** The WebSocket of the runtime (Node ≥ 22; Node 20 with --experimental-websocket). */
interface WebSocketLike {
  readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: string, listener: (ev: any) => void, options?: { once?: boolean }): void;
}

type WebSocketCtor = new (url: string, init?: { headers?: Record<string, string> }) => WebSocketLike;

/** A transport over a WebSocket: one JSON-RPC message per text message. */
export class WebSocketTransport implements Transport {
  readonly reader: RefusalWatch;
  readonly writer: MessageWriter;
  readonly exited: Promise<PeerExit>;

  constructor(readonly ws: WebSocketLike) {
    this.reader = new RefusalWatch(new WebSocketReader(ws));
    this.writer = new WebSocketWriter(ws);
    this.exited = new Promise((resolve) => {
      ws.addEventListener('close', (ev: { code: number; reason: string }) => {
        const why = ev.reason ? `: ${ev.reason}` : '';
        resolve({ exitCode: null, signal: null, detail: this.reader.detail(`the WebSocket closed with ${ev.code}${why}`) });
      });
    });
  }

  static async open(url: string, token?: string): Promise<WebSocketTransport> {
    const Ctor = (globalThis as { WebSocket?: WebSocketCtor }).WebSocket;
    if (Ctor === undefined) {
      throw new CodeRunError('ws:// needs a global WebSocket (Node ≥ 22, or Node 20 with --experimental-websocket)');
    }
    const ws = new Ctor(url, token === undefined ? undefined : { headers: { Authorization: `Bearer ${token}` } });
    const transport = new WebSocketTransport(ws); // listening before the first message can arrive
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener('open', () => resolve(), { once: true });
      ws.addEventListener('error', () => reject(new CodeRunError(`cannot connect to ${url}`)), { once: true });
    });
    return transport;
  }

  async terminate(timeoutMs: number): Promise<void> {
    if (this.ws.readyState < 2) this.ws.close(1000);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((r) => {
      timer = setTimeout(r, timeoutMs);
    });
    await Promise.race([this.exited, late]);
    clearTimeout(timer);
  }
}

class WebSocketReader extends AbstractMessageReader implements MessageReader {
  private callback: DataCallback | undefined;
  private readonly early: Message[] = [];

  constructor(ws: WebSocketLike) {
    super();
    ws.addEventListener('message', (ev: { data: unknown }) => {
      if (typeof ev.data !== 'string') {
        this.fireError(new CodeRunError('the daemon sent a binary WebSocket message'));
        return;
      }
      let msg: Message;
      try {
        msg = JSON.parse(ev.data) as Message;
      } catch (err) {
        this.fireError(err);
        return;
      }
      if (this.callback === undefined) this.early.push(msg);
      else this.callback(msg);
    });
    ws.addEventListener('close', () => this.fireClose());
  }

  listen(callback: DataCallback): Disposable {
    this.callback = callback;
    for (const m of this.early.splice(0)) callback(m);
    return Disposable.create(() => {
      this.callback = undefined;
    });
  }
}

const utf8 = new TextDecoder();

class WebSocketWriter extends AbstractMessageWriter implements MessageWriter {
  constructor(private readonly ws: WebSocketLike) {
    super();
  }

  async write(msg: Message): Promise<void> {
    try {
      this.ws.send(utf8.decode(encodeMessage(msg)));
    } catch (err) {
      this.fireError(err, msg);
      throw err;
    }
  }

  end(): void {}
}
