// Package typed owns typed bindings' schemas (SPEC-2 §1): it parses a
// functions entry, compiles its parameters and returns schemas, caches the
// result by content, derives the Python calling shape, checks arguments and
// results both ways, and renders the stubs a model reads.
//
// # Validator
//
// Schemas are compiled by github.com/santhosh-tekuri/jsonschema/v6: it
// implements 2020-12 and draft-07 completely, compares numbers as big.Rat
// (so constants beyond 2^53 and decimals are exact, and 1.0 is an integer),
// takes json.Number input, and lets the loader be replaced. The loader here
// refuses every address: a schema is registered under a synthetic URL and a
// $ref may only be a pointer inside it ("#/$defs/x"); $id, $dynamicRef,
// $recursiveRef and $vocabulary are refused. `format` is an annotation under
// 2020-12 and an assertion under draft-07 (each draft's default); content
// keywords are annotations. Patterns are Go RE2 regular expressions, so
// ECMA-262 lookaround and backreferences are refused at compile time.
//
// # Bounds
//
// A schema is at most MaxSchemaBytes, nested at most MaxDepth, its number
// literals at most 64 characters; a description is at most
// MaxDescriptionBytes; a $ref cycle that never descends into the value is
// refused. Compile errors, validation and rendering therefore cost time and
// memory in proportion to these bounds, never to what a host sends.
//
// # Caching
//
// Compile returns an immutable *Function shared by every run declaring the
// same entry (same compact JSON text): a warm lookup is a hash and a map
// access. The cache is an LRU bounded in entries and bytes; errors are not
// cached.
//
// # Errors
//
// A declaration error is one line starting with the caller's path, e.g.
// `bindings[0].functions[1].parameters: must be an object schema ("type":
// "object")`. A check error lists each failing location, one per line, as a
// JSON Pointer ("(root)" for the whole value) and the rule broken, sorted,
// at most MaxListed lines and then "and N more":
//
//	/limit: expected integer, but got string
package typed
