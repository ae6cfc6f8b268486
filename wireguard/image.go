package wireguard

import "bytes"

// Displayed raster images are checked against their declared type where they
// are billed (docs/protocol-files.md §12.3): a client hands image/png content
// to a model API or an MCP host as an image, so bytes of another kind (an SVG
// document, a GIF, anything a program chose) must not arrive under that name.

// imageHeadChars is how much of a base64 payload imageHead decodes: whole
// quanta, enough for every signature in rasterKinds.
const imageHeadChars = 16

// rasterKind is one raster image type a client shows as an image: its name
// for a note and whether decoded bytes begin as that format does.
type rasterKind struct {
	name  string
	match func(head []byte) bool
}

var rasterKinds = map[string]rasterKind{
	"image/png":  {"PNG", func(h []byte) bool { return bytes.HasPrefix(h, []byte("\x89PNG\r\n\x1a\n")) }},
	"image/jpeg": {"JPEG", func(h []byte) bool { return bytes.HasPrefix(h, []byte{0xff, 0xd8, 0xff}) }},
	"image/gif": {"GIF", func(h []byte) bool {
		return bytes.HasPrefix(h, []byte("GIF87a")) || bytes.HasPrefix(h, []byte("GIF89a"))
	}},
	"image/webp": {"WebP", func(h []byte) bool {
		return len(h) >= 12 && bytes.HasPrefix(h, []byte("RIFF")) && string(h[8:12]) == "WEBP"
	}},
}

// RasterName is the format name of a raster image type clients show as an
// image ("PNG" for image/png), or "" for any other type.
func RasterName(mime string) string { return rasterKinds[mime].name }

// ImageHead is the first decoded bytes (at most 12) of b, a payload
// payloadSize accepted: strict base64, so its first imageHeadChars characters
// are whole quanta (or all of it).
func ImageHead(b []byte) []byte {
	var head [imageHeadChars / 4 * 3]byte
	n, err := strictBase64.Decode(head[:], b[:min(len(b), imageHeadChars)])
	if err != nil {
		return nil
	}
	return head[:n]
}

// isMislabeled reports whether the base64 payload b of type mime is a raster
// image type whose bytes do not begin as that format does.
func isMislabeled(mime string, b []byte) bool {
	kind, ok := rasterKinds[mime]
	return ok && !kind.match(ImageHead(b))
}
