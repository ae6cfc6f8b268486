/**
 * Files in, files and rich outputs out (docs/protocol-files.md §12): the `run.files` entries built
 * from `{ path: string | Uint8Array }`, and the helpers that turn a result's outputs and
 * files into bytes. No I/O here; `saveFiles` of the node entry point writes them to disk.
 */
import { Buffer } from 'node:buffer';

/** A file's content for `run({ files })`: a string is sent as UTF-8 text, bytes as base64. */
export type FileContent = string | Uint8Array;

/** `{ relative path: content }` (or a `Map`), written into the working directory before the program starts. */
export type RunFiles = Record<string, FileContent> | Map<string, FileContent>;

/** One `run.files` entry on the wire. */
export interface FileEntry {
  path: string;
  text?: string;
  base64?: string;
}

/** One displayed object: MIME type → content (base64 for binary types, text otherwise). */
export interface DisplayOutput {
  data: Record<string, string>;
}

/** A regular file the program left under `out/`; `omitted` ones (outputs budget spent) have no content. */
export interface OutFile {
  /** `out/…`, slash separated. */
  path: string;
  size: number;
  base64?: string;
  omitted?: true;
}

/** One `run/output` notification: output `index` of the run, as it is displayed. */
export interface OutputEvent extends DisplayOutput {
  index: number;
}

/** True when content of type `mime` travels as text (else base64), as the daemon decides. */
export function isTextMime(mime: string): boolean {
  return (
    mime.startsWith('text/') ||
    ['/json', '+json', '/xml', '+xml'].some((s) => mime.endsWith(s)) ||
    mime === 'application/javascript'
  );
}

/** The `run.files` entries for `files` (a `TypeError` names a bad entry). */
export function fileEntries(files: RunFiles): FileEntry[] {
  const pairs = files instanceof Map ? [...files.entries()] : Object.entries(files);
  return pairs.map(([path, content]) => {
    if (typeof content === 'string') return { path, text: content };
    if (content instanceof Uint8Array) {
      return { path, base64: Buffer.from(content.buffer, content.byteOffset, content.byteLength).toString('base64') };
    }
    throw new TypeError(`files[${JSON.stringify(path)}] must be a string or a Uint8Array`);
  });
}

/** The content of `mime` in `output` as bytes (decoded base64, or UTF-8 text); throws if absent. */
export function outputBytes(output: DisplayOutput, mime: string): Buffer {
  const value = output.data[mime];
  if (value === undefined) throw new RangeError(`the output has no ${mime} (it has ${Object.keys(output.data).join(', ')})`);
  return isTextMime(mime) ? Buffer.from(value, 'utf8') : Buffer.from(value, 'base64');
}

/** A returned file's bytes; throws for an omitted file. */
export function fileBytes(file: OutFile): Buffer {
  if (file.omitted || file.base64 === undefined) {
    throw new RangeError(`${file.path} was omitted: the run's outputs budget ran out before it`);
  }
  return Buffer.from(file.base64, 'base64');
}

/** `file.path` without its leading `out/`, checked to stay inside the folder it is saved to. */
export function relativeOutPath(file: OutFile): string {
  const parts = file.path.split('/').filter((s) => s !== '' && s !== '.');
  if (parts[0] === 'out') parts.shift();
  if (parts.length === 0 || parts.includes('..') || file.path.startsWith('/')) {
    throw new RangeError(`refusing to save ${JSON.stringify(file.path)} outside the target folder`);
  }
  return parts.join('/');
}
