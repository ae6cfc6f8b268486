/**
 * The text a model reads about a run, the same as `coderun-rpc mcp` writes (mcp/tools.go
 * `render`) and the Python client's adapters: notes, the logs, then the error (kind, message,
 * line, path, hint) or the value; plus the run's displayed images, for the framework's image
 * parts. `clients/testdata/model-text.json` pins the text for every client. No I/O here.
 */
import { serializeLossless } from './json.js';
import type { DisplayOutput } from './outputs.js';
import type { RunResult } from './types.js';

/** An image a run displayed: its MIME type and its base64 content, as the daemon sent it. */
export interface ModelImage {
  mediaType: string;
  data: string;
}

/** A run as a model reads it. */
export interface ModelOutput {
  /** Notes, logs, then `value: …`, `error (kind): …` or `(no value)`. */
  text: string;
  /** The displayed images, in display order (at most one per displayed object). */
  images: ModelImage[];
  /** True when the run failed. */
  isError: boolean;
}

/** The image types a model can be given, in the order a displayed object's types are tried. */
const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;

/**
 * Whether the first bytes of an image (a binary string) begin as its type's format does: the
 * daemon drops an image whose bytes do not (protocol/images.go holds the same table), and a
 * model is shown none either.
 */
const SIGNATURES: Record<(typeof IMAGE_TYPES)[number], (head: string) => boolean> = {
  'image/png': (h) => h.startsWith('\x89PNG\r\n\x1a\n'),
  'image/jpeg': (h) => h.startsWith('\xff\xd8\xff'),
  'image/gif': (h) => h.startsWith('GIF87a') || h.startsWith('GIF89a'),
  'image/webp': (h) => h.startsWith('RIFF') && h.slice(8, 12) === 'WEBP',
};

/** Strict base64 (standard alphabet, padded), as the daemon writes it. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** A lone surrogate: half of a pair, without its other half (no UTF-8 form). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * The text a model reads: each note and log on its own line, then the outcome. Each lone
 * surrogate (a program may log one) is U+FFFD, so the text is valid UTF-8 for the model's API.
 */
export function modelText(result: RunResult, notes: readonly string[] = []): string {
  let text = '';
  for (const note of notes) text += note + '\n';
  for (const line of result.logs) text += line.endsWith('\n') ? line : line + '\n';
  return (text + outcome(result)).replace(LONE_SURROGATE, '\uFFFD');
}

/** The last line(s): the error with its kind, line, path and hint; else the value. */
function outcome(result: RunResult): string {
  const error = result.error;
  if (error !== undefined) {
    let text = `error (${error.kind}): ${error.message}`;
    if (error.line !== undefined) text += ` (line ${error.line})`;
    if (error.path !== undefined) text += ` at ${error.path}`;
    if (error.hint !== undefined) text += `\nhint: ${error.hint}`;
    return text;
  }
  if (result.value === undefined) return '(no value)';
  const encoded = serializeLossless(result.value);
  return `value: ${encoded.ok ? encoded.text : JSON.stringify(result.value)}`;
}

/**
 * The images among `outputs`: per displayed object, the first of PNG, JPEG, GIF, WebP whose
 * content is well-formed base64 of bytes that begin as that format does (anything else the
 * program displayed is left out).
 */
export function modelImages(outputs: readonly DisplayOutput[] | undefined): ModelImage[] {
  const images: ModelImage[] = [];
  for (const output of outputs ?? []) {
    const data: unknown = output?.data;
    if (data === null || typeof data !== 'object') continue;
    for (const mediaType of IMAGE_TYPES) {
      const content: unknown = Object.hasOwn(data, mediaType) ? (data as Record<string, unknown>)[mediaType] : undefined;
      if (typeof content === 'string' && BASE64.test(content) && SIGNATURES[mediaType](atob(content.slice(0, 16)))) {
        images.push({ mediaType, data: content });
        break;
      }
    }
  }
  return images;
}

/** A run as a model reads it: {@link modelText} and {@link modelImages}. */
export function formatRun(result: RunResult, notes: readonly string[] = []): ModelOutput {
  return { text: modelText(result, notes), images: modelImages(result.outputs), isError: result.error !== undefined };
}
