package wireguard

import "github.com/coderun-rpc/coderun-rpc/protocol"

// Displayed raster images are checked against their declared type where they
// are billed (docs/protocol-files.md §12.3): a client hands image/png content
// to a model API or an MCP host as an image, so bytes of another kind (an SVG
// document, a GIF, anything a program chose) must not arrive under that name,
// nor a header that makes a decoder allocate gigabytes.

// imageHead is the first decoded bytes of b, a payload payloadSize accepted,
// that protocol.ImageProblem reads for type mime (whole base64 quanta: its
// first characters are those of a strict encoding, or all of it).
func imageHead(mime string, b []byte) []byte {
	src := b[:min(len(b), (protocol.ImageHeadLen(mime)+2)/3*4)]
	head := make([]byte, len(src)/4*3) // a small image's, not the whole window
	n, err := strictBase64.Decode(head, src)
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
	return protocol.ImageProblem(mime, imageHead(mime, b))
}
