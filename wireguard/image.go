package wireguard

import "github.com/coderun-rpc/coderun-rpc/protocol"

// Displayed raster images are checked against their declared type where they
// are billed (docs/protocol-files.md §12.3): a client hands image/png content
// to a model API or an MCP host as an image, so bytes of another kind (an SVG
// document, a GIF, anything a program chose) must not arrive under that name,
// nor a header that makes a decoder allocate gigabytes.

// imageHeadChars is how much of a base64 payload ImageHead decodes: whole
// quanta, protocol.ImageHeadBytes decoded.
const imageHeadChars = protocol.ImageHeadBytes / 3 * 4

// ImageHead is the first decoded bytes (at most protocol.ImageHeadBytes)
// of b, a payload payloadSize accepted: strict base64, so its first
// imageHeadChars characters are whole quanta (or all of it).
func ImageHead(b []byte) []byte {
	var head [protocol.ImageHeadBytes]byte
	n, err := strictBase64.Decode(head[:], b[:min(len(b), imageHeadChars)])
	if err != nil {
		return nil
	}
	return head[:n]
}

// imageProblem is protocol.ImageProblem of the base64 payload b of type mime.
func imageProblem(mime string, b []byte) string {
	if protocol.RasterFormat(mime) == "" {
		return ""
	}
	return protocol.ImageProblem(mime, ImageHead(b))
}
