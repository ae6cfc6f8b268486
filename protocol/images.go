package protocol

import "bytes"

// The raster image types a client shows a model as images (docs/protocol-files.md
// §12.3), and how their bytes begin: the daemon drops a displayed image whose
// bytes do not begin so, and clients check again where they build image parts.

// ImageSignatureBytes is how many leading bytes ImageBytesMatch needs at most.
const ImageSignatureBytes = 12

// rasterFormats maps each raster image type to its format's name and a test
// of its first bytes.
var rasterFormats = map[string]struct {
	name  string
	match func(head []byte) bool
}{
	"image/png":  {"PNG", func(h []byte) bool { return bytes.HasPrefix(h, []byte("\x89PNG\r\n\x1a\n")) }},
	"image/jpeg": {"JPEG", func(h []byte) bool { return bytes.HasPrefix(h, []byte{0xff, 0xd8, 0xff}) }},
	"image/gif": {"GIF", func(h []byte) bool {
		return bytes.HasPrefix(h, []byte("GIF87a")) || bytes.HasPrefix(h, []byte("GIF89a"))
	}},
	"image/webp": {"WebP", func(h []byte) bool {
		return len(h) >= 12 && bytes.HasPrefix(h, []byte("RIFF")) && string(h[8:12]) == "WEBP"
	}},
}

// RasterFormat is the format name of a raster image type ("PNG" for
// image/png), or "" for any other type (SVG is text: never shown as an image).
func RasterFormat(mime string) string { return rasterFormats[mime].name }

// ImageBytesMatch reports whether data (or its first ImageSignatureBytes)
// begins as the raster image type mime's format does; false for a type that
// is not a raster image type.
func ImageBytesMatch(mime string, data []byte) bool {
	f, ok := rasterFormats[mime]
	return ok && f.match(data)
}
