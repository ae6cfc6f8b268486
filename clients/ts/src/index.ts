/**
 * @coderun/client — core (no process spawning). For Node.js use `@coderun/client/node`,
 * whose `CodeRunClient.start()` spawns the daemon.
 */
export { CodeRunClient, CLIENT_NAME, CLIENT_VERSION } from './client.js';
export type { ClientOptions, PeerExit, Transport } from './client.js';
export { Session } from './session.js';
export { encodeMessage, encodeMessageText, losslessJsonEncoder, BINDING_ERROR_CODE } from './encoder.js';
export {
  bindingResult,
  canonicalNumber,
  LOSSLESS_PREFIX,
  MAX_MESSAGE_BYTES,
  RawJson,
  serializeLossless,
  utf8Length,
} from './json.js';
export type { JsonValue, SerializeOptions, SerializeResult } from './json.js';
export * from './errors.js';
export { defineFunction } from './schema.js';
export { formatRun, modelImages, modelText } from './format.js';
export type { ModelImage, ModelOutput } from './format.js';
export { fileBytes, fileEntries, isTextMime, outputBytes } from './outputs.js';
export type { DisplayOutput, FileContent, FileEntry, OutFile, OutputEvent, RunFiles } from './outputs.js';
export type {
  ArgsOf,
  JsonSchema,
  JsonSchemaValue,
  ObjectSchema,
  ResultOf,
  SchemaType,
  TypedFunctionSpec,
} from './schema.js';
export type * from './types.js';
