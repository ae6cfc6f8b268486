package wire

import "strconv"

// AppendHead opens a message up to the value of its last member: jsonrpc; the id, as
// JSON text ("" for a notification); the method ("" for a response); then the name
// of the member whose value the caller appends before closing the object.
func AppendHead(b []byte, id, method, last string) []byte {
	b = append(b, `{"jsonrpc":"2.0"`...)
	if id != "" {
		b = append(append(b, `,"id":`...), id...)
	}
	if method != "" {
		b = appendString(append(b, `,"method":`...), method)
	}
	return append(append(append(b, `,"`...), last...), `":`...)
}

// EncodeError is an error response; id is "null" when the request's id is unknown
// or unusable.
func EncodeError(id string, code int64, msg string) []byte {
	b := AppendHead(make([]byte, 0, 96+len(msg)), id, "", "error")
	b = strconv.AppendInt(append(b, `{"code":`...), code, 10)
	b = appendString(append(b, `,"message":`...), msg)
	return append(b, "}}"...)
}

// ErrorBody is the body of an error response with "id": null, encoded like
// every other message (rpc/encode.go): what a listener answers a connection it
// refuses before a server serves it (docs/service.md §2).
func ErrorBody(code int64, msg string) []byte { return EncodeError("null", code, msg) }
