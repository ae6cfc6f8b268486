package rpc

// ErrorBody is the body of an error response with "id": null, encoded like
// every other message (encode.go): what a listener answers a connection it
// refuses before any Server serves it (docs/service.md §2).
func ErrorBody(code int64, msg string) []byte { return encodeError("null", code, msg) }
