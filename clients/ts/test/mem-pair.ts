/**
 * An in-memory transport and its in-process peer (a `vscode-jsonrpc` connection that answers
 * `initialize` and `shutdown`), for testing the core client without spawning anything.
 */
import { PassThrough } from 'node:stream';
import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from 'vscode-jsonrpc/node';
import type { MessageConnection } from 'vscode-jsonrpc/node';
import { losslessJsonEncoder } from '../src/index.js';
import type { PeerExit, Transport } from '../src/index.js';

export interface Pair {
  transport: Transport;
  server: MessageConnection;
  die(exit: PeerExit): void;
}

export function pair(): Pair {
  const c2s = new PassThrough();
  const s2c = new PassThrough();
  let die!: (exit: PeerExit) => void;
  const exited = new Promise<PeerExit>((resolve) => (die = resolve));
  const transport: Transport = {
    reader: new StreamMessageReader(s2c),
    writer: new StreamMessageWriter(c2s, { contentTypeEncoder: losslessJsonEncoder }),
    exited,
    terminate: async () => {
      die({ exitCode: 0, signal: null });
    },
  };
  const server = createMessageConnection(new StreamMessageReader(c2s), new StreamMessageWriter(s2c));
  server.onRequest('initialize', () => ({ serverInfo: { name: 'coderun-rpc', version: 'mem' }, capabilities: {} }));
  server.onRequest('shutdown', () => null);
  server.listen();
  return { transport, server, die };
}
