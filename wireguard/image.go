package wireguard

import "github.com/coderun-rpc/coderun-rpc/protocol"

// Displayed raster images are checked against their declared type where they
// are billed (docs/protocol-files.md §12.3): a client hands image/png content
// to a model API or an MCP host as an image, so bytes of another kind (an SVG
// document, a GIF, anything a program chose) must not arrive under that name.

// imageHeadChars is how much of a base64 payload ImageHead decodes: whole
// quanta, protocol.ImageSignatureBytes decoded.
const imageHeadChars = protocol.ImageSignatureBytes / 3 * 4

// ImageHead is the first decoded bytes (at most protocol.ImageSignatureBytes)
// of b, a payload payloadSize accepted: strict base64, so its first
// imageHeadChars characters are whole quanta (or all of it).
func ImageHead(b []byte) []byte {
	var head [protocol.ImageSignatureBytes]byte
	n, err := strictBase64.Decode(head[:], b[:min(len(b), imageHeadChars)])
	if err != nil {
		return nil
	}
	return head[:n]
}

// isMislabeled reports whether the base64 payload b of type mime is a raster
// image type whose bytes do not begin as that format does.
func isMislabeled(mime string, b []byte) bool {
	return protocol.RasterFormat(mime) != "" && !protocol.ImageBytesMatch(mime, ImageHead(b))
}
