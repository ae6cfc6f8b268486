/**
 * JSON Schema as the client handles it: plain JSON objects sent to the daemon as given (the
 * daemon compiles and enforces them), plus compile-time types that read an `as const` schema,
 * so a handler declared with {@link defineFunction} gets its argument type from `parameters`.
 * No validation happens here: the daemon is the one validator.
 */
import type { JsonValue } from './json.js';
import type { BindingCallInfo, TypedFunction } from './types.js';

/** A JSON value inside a schema. Readonly, so `as const` literals fit as well as mutable ones. */
export type JsonSchemaValue =
  | null
  | boolean
  | number
  | string
  | readonly JsonSchemaValue[]
  | { readonly [key: string]: JsonSchemaValue };

/**
 * A JSON Schema 2020-12 document (a `$schema` naming draft-07 is accepted too) as a plain JSON
 * object. `$ref` may only point inside the same schema (`#/$defs/…`). It must be lossless JSON,
 * like every value the client sends.
 */
export type JsonSchema = { readonly [key: string]: JsonSchemaValue };

/** The schema of a function's `parameters`: it must describe an object (`"type": "object"`). */
export type ObjectSchema = JsonSchema & { readonly type: 'object' };

/**
 * The TypeScript type of the values a schema accepts, for the common keywords: `type` (a name
 * or a list), `properties` with `required`, `items`, `enum`, `const`, `anyOf`, `oneOf`.
 * Anything it does not read is {@link JsonValue}. `integer` is `number`.
 */
export type SchemaType<S> = S extends { readonly const: infer C }
  ? C
  : S extends { readonly enum: readonly (infer E)[] }
    ? E
    : S extends { readonly anyOf: readonly (infer A)[] }
      ? SchemaType<A>
      : S extends { readonly oneOf: readonly (infer A)[] }
        ? SchemaType<A>
        : S extends { readonly type: infer T }
          ? TypeNamed<T, S>
          : JsonValue;

/** The type of one `type` name (or of each name of a list, as a union) of schema `S`. */
type TypeNamed<T, S> = T extends readonly (infer U)[]
  ? TypeNamed<U, S>
  : T extends 'string'
    ? string
    : T extends 'integer' | 'number'
      ? number
      : T extends 'boolean'
        ? boolean
        : T extends 'null'
          ? null
          : T extends 'array'
            ? S extends { readonly items: infer I }
              ? SchemaType<I>[]
              : JsonValue[]
            : T extends 'object'
              ? ObjectType<S>
              : JsonValue;

type RequiredNames<S> = S extends { readonly required: readonly (infer K)[] } ? K : never;

/** `properties` as members, optional unless listed in `required`; without them, any object. */
type ObjectType<S> = S extends { readonly properties: infer P }
  ? Flatten<
      { -readonly [K in keyof P & string as K extends RequiredNames<S> ? K : never]: SchemaType<P[K]> } & {
        -readonly [K in keyof P & string as K extends RequiredNames<S> ? never : K]?: SchemaType<P[K]>;
      }
    >
  : { [key: string]: JsonValue };

type Flatten<T> = { [K in keyof T]: T[K] } & {};

/** What a handler declared with `parameters` P receives (without them: the program's JSON argument). */
export type ArgsOf<P> = [P] extends [ObjectSchema] ? SchemaType<P> : JsonValue;

/** What a handler declared with `returns` R must produce (without it: anything lossless). */
export type ResultOf<R> = [R] extends [JsonSchema] ? SchemaType<R> : unknown;

/** A {@link TypedFunction} whose handler is typed from its own `parameters` and `returns`. */
export interface TypedFunctionSpec<P extends ObjectSchema | undefined, R extends JsonSchema | undefined> {
  handler: (args: ArgsOf<P>, signal: AbortSignal, call: BindingCallInfo) => ResultOf<R> | Promise<ResultOf<R>>;
  description?: string;
  parameters?: P;
  returns?: R;
}

/**
 * Declares a typed binding function whose handler's argument type is read from `parameters`
 * (write the schema inline, or `as const`) and whose result type is read from `returns`.
 * Returns the entry unchanged, as a {@link TypedFunction} to put in a binding's `functions`.
 */
export function defineFunction<
  const P extends ObjectSchema | undefined = undefined,
  const R extends JsonSchema | undefined = undefined,
>(spec: TypedFunctionSpec<P, R>): TypedFunction {
  // Sound because the daemon validates the arguments against `parameters` before it sends a
  // `binding/call`: the handler only ever receives values of the schema's type.
  return spec as unknown as TypedFunction;
}
