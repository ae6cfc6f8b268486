/**
 * The outbound message encoder: canonical, lossless JSON for every message the client writes,
 * and the 64 MiB inbound cap of the daemon enforced on binding responses.
 */
import type { ContentTypeEncoder, Message } from 'vscode-jsonrpc';
import { fitMessage, MAX_MESSAGE_BYTES, RawJson, serializeLossless, tooLargeMessage } from './json.js';

/** JSON-RPC error code used for every binding failure the client reports. */
export const BINDING_ERROR_CODE = -32000;

const utf8 = new TextEncoder();

/** Serializes one JSON-RPC message; members whose value is `undefined` are left out. */
export function encodeMessageText(msg: object): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(msg)) {
    if (value === undefined) continue;
    const r = serializeLossless(value, { allowRaw: true });
    if (!r.ok) throw new TypeError(`cannot encode message member ${JSON.stringify(key)}: ${r.reason} (at ${r.path})`);
    parts.push(`${JSON.stringify(key)}:${r.text}`);
  }
  return `{${parts.join(',')}}`;
}

/**
 * Encodes a message to UTF-8. A response whose body would exceed the daemon's cap is replaced
 * by an error response for the same id that fits it, so the call is answered, never dropped: a
 * result becomes an error naming the cap; an error keeps its code, its message is cut (ending
 * `… [truncated]`, as the daemon cuts its own) and its `data` is left out.
 */
export function encodeMessage(msg: Message): Uint8Array {
  const bytes = utf8.encode(encodeMessageText(msg));
  const m = msg as { id?: unknown; result?: unknown; error?: { code: number; message: string } };
  if (bytes.byteLength <= MAX_MESSAGE_BYTES || !('id' in m)) return bytes;
  if (m.result instanceof RawJson) return errorResponse(m.id, BINDING_ERROR_CODE, tooLargeMessage(bytes.byteLength));
  if (m.error !== undefined) return errorResponse(m.id, m.error.code, m.error.message);
  return bytes;
}

/** An error response with `message` cut to fit the cap. */
function errorResponse(id: unknown, code: number, message: string): Uint8Array {
  const envelope = utf8.encode(encodeMessageText({ jsonrpc: '2.0', id, error: { code, message: '' } })).byteLength;
  const error = { code, message: fitMessage(message, MAX_MESSAGE_BYTES - envelope) };
  return utf8.encode(encodeMessageText({ jsonrpc: '2.0', id, error }));
}

/** A `vscode-jsonrpc` content-type encoder that writes {@link encodeMessage} output. */
export const losslessJsonEncoder: ContentTypeEncoder = {
  name: 'application/json',
  encode: (msg: Message) => {
    try {
      return Promise.resolve(encodeMessage(msg));
    } catch (err) {
      return Promise.reject(err);
    }
  },
};
