package wireguard

import (
	"bytes"
	"encoding/base64"

	simd "github.com/segmentio/asm/base64"
)

// Base64 payloads: a client's run.files (DecodeBase64), a child's binary
// outputs (base64Size) and the out/ files of a result (EncodeBase64) are
// strict, padded standard base64 (docs/protocol-files.md §12). They are the
// largest strings the daemon handles, a megabyte and more, so they go
// through github.com/segmentio/asm/base64 (AVX2 where the CPU has it, the
// standard library's code otherwise; several times faster than
// encoding/base64 on a megabyte) and are never unescaped or copied first
// when they hold no escape.

var strictBase64 = simd.StdEncoding.Strict()

// base64Chunk is how much base64 base64Size decodes at a time into its
// scratch (a multiple of 4, so every chunk but the last is whole quanta).
const base64Chunk = 32 << 10

// DecodeBase64 decodes the JSON string token tok (a value of a validated
// message) as strict, padded standard base64. An error is
// base64.CorruptInputError with the offset in the decoded string, as
// encoding/base64's Strict decoder reports it.
func DecodeBase64(tok []byte) ([]byte, error) {
	body := tok[1 : len(tok)-1]
	if bytes.IndexByte(body, '\\') >= 0 { // escapes: decode the string first
		s, _ := DecodeString(tok)
		body = []byte(s)
	}
	dst := make([]byte, strictBase64.DecodedLen(len(body)))
	n, err := decodeBase64(dst, body)
	return dst[:n], err
}

// decodeBase64 is strictBase64.Decode, with encoding/base64's own error
// when src is not valid (decoded again by it: the vector part stops before a
// bad quantum and the rest is reported from where it began).
func decodeBase64(dst, src []byte) (int, error) {
	n, err := strictBase64.Decode(dst, src)
	if err != nil {
		return base64.StdEncoding.Strict().Decode(dst, src)
	}
	return n, nil
}

// base64Size is the decoded length of b if it is strict, padded standard
// base64 (no whitespace, no escapes), checked without keeping the bytes:
// decoded a chunk at a time into a scratch buffer, a '=' only in the last.
func base64Size(b []byte) (int64, bool) {
	// The decoder skips CR and LF; strict base64 has none (nor has the body
	// of a validated JSON string, but the check costs two memchr passes).
	if len(b)%4 != 0 || bytes.IndexByte(b, '\n') >= 0 || bytes.IndexByte(b, '\r') >= 0 {
		return 0, false
	}
	var scratch [base64Chunk / 4 * 3]byte
	var size int64
	for len(b) > 0 {
		chunk := b[:min(len(b), base64Chunk)]
		b = b[len(chunk):]
		if len(b) > 0 && bytes.IndexByte(chunk, '=') >= 0 {
			return 0, false
		}
		n, err := strictBase64.Decode(scratch[:], chunk)
		if err != nil {
			return 0, false
		}
		size += int64(n)
	}
	return size, true
}

// EncodeBase64 calls put with the standard base64 of data, a piece of at
// most chunk input bytes (a multiple of 3) at a time, from one buffer that
// put must not keep: a large file is never encoded whole.
func EncodeBase64(data []byte, chunk int, put func([]byte)) {
	enc := make([]byte, strictBase64.EncodedLen(min(len(data), chunk)))
	for len(data) > 0 {
		n := min(len(data), chunk)
		strictBase64.Encode(enc, data[:n])
		put(enc[:strictBase64.EncodedLen(n)])
		data = data[n:]
	}
}
