package protocol

import (
	"bytes"
	"encoding/binary"
	"strconv"
)

// The raster image types a client shows a model as images (docs/protocol-files.md
// §12.3), checked by their first bytes: the daemon drops a displayed image of
// one of these types whose bytes do not begin as its format does, or whose
// header declares more than MaxImagePixels; clients check the format again
// where they build image parts. SVG is text: no client shows it as an image.

// ImageHeadBytes is how many leading bytes of an image ImageProblem reads at
// most: the signature and, for PNG, GIF and WebP, the declared dimensions.
const ImageHeadBytes = 30

// MaxImagePixels bounds the pixels an image's header may declare (8192×8192):
// a few kilobytes of PNG can declare a canvas that takes a decoder gigabytes.
const MaxImagePixels = 1 << 26

// rasterFormat is one raster image type: its format's name, how its bytes
// begin, and where its header holds the canvas's dimensions.
type rasterFormat struct {
	name  string
	match func(head []byte) bool
	size  func(head []byte) (w, h uint64, ok bool) // ok=false: not within head
}

var rasterFormats = map[string]rasterFormat{
	"image/png":  {"PNG", func(h []byte) bool { return bytes.HasPrefix(h, []byte("\x89PNG\r\n\x1a\n")) }, pngSize},
	"image/jpeg": {"JPEG", func(h []byte) bool { return bytes.HasPrefix(h, []byte{0xff, 0xd8, 0xff}) }, noSize},
	"image/gif": {"GIF", func(h []byte) bool {
		return bytes.HasPrefix(h, []byte("GIF87a")) || bytes.HasPrefix(h, []byte("GIF89a"))
	}, gifSize},
	"image/webp": {"WebP", func(h []byte) bool {
		return len(h) >= 12 && bytes.HasPrefix(h, []byte("RIFF")) && string(h[8:12]) == "WEBP"
	}, webpSize},
}

// RasterFormat is the format name of a raster image type ("PNG" for
// image/png), or "" for any other type.
func RasterFormat(mime string) string { return rasterFormats[mime].name }

// ImageProblem says why an image of type mime whose bytes begin with head (at
// least its first ImageHeadBytes, or all of it) is not shown to a model: its
// bytes are not of its format, or its header declares more than
// MaxImagePixels. "" when it may be shown, and for every type that is not a
// raster image type.
func ImageProblem(mime string, head []byte) string {
	f, ok := rasterFormats[mime]
	switch {
	case !ok:
		return ""
	case !f.match(head):
		return "its bytes are not " + f.name + " (they start " + hexPrefix(head, 8) + ")"
	}
	if w, h, ok := f.size(head); ok && (w == 0 || h == 0 || w*h > MaxImagePixels) {
		return "its header declares " + strconv.FormatUint(w, 10) + "×" + strconv.FormatUint(h, 10) +
			" pixels (at most " + strconv.Itoa(MaxImagePixels) + " in all)"
	}
	return ""
}

// RefusedImageNote is the log line of a displayed image dropped for problem
// (ImageProblem).
func RefusedImageNote(mime, problem string) string {
	return "[coderun] display: dropped " + mime + ": " + problem + "\n"
}

func hexPrefix(b []byte, n int) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*n)
	for _, c := range b[:min(len(b), n)] {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

func noSize([]byte) (uint64, uint64, bool) { return 0, 0, false }

// pngSize reads the IHDR chunk, which a PNG has first.
func pngSize(h []byte) (uint64, uint64, bool) {
	if len(h) < 24 || string(h[12:16]) != "IHDR" {
		return 0, 0, false
	}
	return uint64(binary.BigEndian.Uint32(h[16:])), uint64(binary.BigEndian.Uint32(h[20:])), true
}

// gifSize reads the logical screen descriptor.
func gifSize(h []byte) (uint64, uint64, bool) {
	if len(h) < 10 {
		return 0, 0, false
	}
	return uint64(binary.LittleEndian.Uint16(h[6:])), uint64(binary.LittleEndian.Uint16(h[8:])), true
}

// webpSize reads the first chunk: the extended format's canvas (VP8X), or the
// lossless (VP8L) or lossy (VP8) bitstream's header.
func webpSize(h []byte) (uint64, uint64, bool) {
	if len(h) < 30 {
		return 0, 0, false
	}
	u24 := func(b []byte) uint64 { return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 }
	switch string(h[12:16]) {
	case "VP8X":
		return u24(h[24:]) + 1, u24(h[27:]) + 1, true
	case "VP8L":
		bits := uint64(binary.LittleEndian.Uint32(h[21:]))
		return bits&0x3fff + 1, bits>>14&0x3fff + 1, true
	case "VP8 ":
		return uint64(binary.LittleEndian.Uint16(h[26:]) & 0x3fff), uint64(binary.LittleEndian.Uint16(h[28:]) & 0x3fff), true
	}
	return 0, 0, false
}
