// Package typed owns typed bindings' schemas (docs/protocol-typed.md §10): it parses a
// functions entry, compiles its parameters and returns schemas, caches the
// result by content, derives the Python calling shape, checks arguments and
// results both ways, and renders the stubs a model reads.
//
// The flow for a run: Compile each entry (a cache hit is one SHA-256 of the
// entry's bytes), send each Function's Params and Method(global) to the
// child, call CheckArgs before a binding/call and CheckResult on the host's
// reply; bindings/describe calls Render. Nothing here keeps per-run state.
//
// # Validator
//
// Schemas are compiled by github.com/santhosh-tekuri/jsonschema/v6: it
// implements 2020-12 and draft-07 completely, compares numbers as big.Rat
// (constants beyond 2^53 and decimals are exact, 1.0 is an integer, and
// multipleOf 0.1 accepts 0.3), and lets the loader be replaced. The loader
// here refuses every address: a schema is registered under a synthetic URL
// and a $ref may only be a pointer inside it ("#/$defs/x"); $id, $dynamicRef,
// $recursiveRef and $vocabulary are refused, $schema may only name 2020-12
// or draft-07. `format` is an annotation under 2020-12 and an assertion
// under draft-07 (each draft's default in the library); content keywords are
// annotations. Patterns are Go RE2 regular expressions, so ECMA-262
// lookaround and backreferences are refused when the schema is compiled.
// Values to check are decoded by this package (iteratively, numbers kept as
// their text), since lossless JSON may nest deeper than encoding/json allows.
// A schema written only with the common keywords also gets an accept-only
// fast check (fast.go): a value it accepts skips the library; any value it is
// unsure of goes to the library, which decides and words every error.
//
// # Bounds
//
// A schema is at most MaxSchemaBytes, nested at most MaxDepth, its number
// literals at most 64 characters; a description is at most
// MaxDescriptionBytes. A $ref cycle that never descends into the value, and
// a schema where more than 4096 subschemas would apply to one value through
// $ref/allOf/anyOf/oneOf, are refused, so a check cannot go exponential
// through unions of unions. A check is bounded in work too (MaxCheckSteps,
// cost.go): a value whose check could visit more (subschema, part) pairs —
// alternatives that both recurse, around a deeply nested value — is refused
// with ErrTooCostly before the library runs; the fast check gives a value up
// to them after MaxFastSteps. Arguments may not repeat a key
// within an object. Rendering nests types at most 16 deep (deeper is Any) and
// renders each $ref target once.
//
// # Caching
//
// Compile returns an immutable *Function shared by every run declaring the
// same entry (same compact JSON text): a warm lookup is a hash and a map
// access. The cache is an LRU bounded in entries and in estimated memory
// (DefaultCacheBytes for the shared one); errors are not cached (they carry
// the caller's path).
//
// # Errors
//
// A declaration error is one line starting with the caller's path, then
// the member, then what is wrong, e.g.
// `bindings[0].functions[1].parameters: must be an object schema ("type":
// "object")`; the rpc layer maps it to −32602. A check error lists each
// failing location, one per line, as a JSON Pointer ("(root)" for the whole
// value) and the rule broken, sorted, at most MaxListed lines and then
// "and N more":
//
//	/limit: expected integer, but got string
//	/q: required property is missing
package typed
