package protocol

import (
	"bytes"
	"encoding/binary"
	"strconv"
)

// The raster image types a client shows a model as images (docs/protocol-files.md
// §12.3), checked by their first bytes: the daemon drops a displayed image of
// one of these types whose bytes do not begin as its format does, or whose
// header declares more than MaxImagePixels (a JPEG's frame headers and a
// GIF's first frame within its first FrameScanBytes); clients check the format again
// where they build image parts. SVG is text: no client shows it as an image.

// ImageHeadBytes is how many leading bytes of a PNG or WebP image
// ImageProblem reads at most: the signature and the declared dimensions.
const ImageHeadBytes = 30

// FrameScanBytes is how far into a JPEG or a GIF ImageProblem reads its
// headers, which follow a variable run of segments (EXIF, ICC profiles) or
// extension blocks (comments, application data).
const FrameScanBytes = 1 << 18

// MaxImagePixels bounds the pixels an image's header may declare (8192×8192):
// a few kilobytes of PNG can declare a canvas that takes a decoder gigabytes.
const MaxImagePixels = 1 << 26

// rasterFormat is one raster image type: its format's name, how its bytes
// begin, and where its header holds the canvas's dimensions.
type rasterFormat struct {
	name  string
	match func(head []byte) bool
	size  func(head []byte) (w, h uint64, ok bool) // ok=false: not within head
	scan  int                                      // JPEG: the bytes size searches, else 0
}

var rasterFormats = map[string]rasterFormat{
	"image/png":  {"PNG", func(h []byte) bool { return bytes.HasPrefix(h, []byte("\x89PNG\r\n\x1a\n")) }, pngSize, 0},
	"image/jpeg": {"JPEG", func(h []byte) bool { return bytes.HasPrefix(h, []byte{0xff, 0xd8, 0xff}) }, jpegSize, FrameScanBytes},
	"image/gif": {"GIF", func(h []byte) bool {
		return bytes.HasPrefix(h, []byte("GIF87a")) || bytes.HasPrefix(h, []byte("GIF89a"))
	}, gifSize, FrameScanBytes},
	"image/webp": {"WebP", func(h []byte) bool {
		return len(h) >= 12 && bytes.HasPrefix(h, []byte("RIFF")) && string(h[8:12]) == "WEBP"
	}, webpSize, 0},
}

// RasterFormat is the format name of a raster image type ("PNG" for
// image/png), or "" for any other type.
func RasterFormat(mime string) string { return rasterFormats[mime].name }

// ImageHeadLen is how many leading bytes of an image of type mime
// ImageProblem reads at most.
func ImageHeadLen(mime string) int { return max(ImageHeadBytes, rasterFormats[mime].scan) }

// ImageProblem says why an image of type mime whose bytes begin with head (at
// least its first ImageHeadLen(mime), or all of it) is not shown to a model:
// its bytes are not of its format, its header declares an empty canvas or more
// than MaxImagePixels, or the headers a JPEG or a GIF has before its image
// data do not end within FrameScanBytes.
// "" when it may be shown, and for every type that is not a raster image type.
func ImageProblem(mime string, head []byte) string {
	f, ok := rasterFormats[mime]
	switch {
	case !ok:
		return ""
	case !f.match(head):
		return "its bytes are not " + f.name + " (they start " + hexPrefix(head, 8) + ")"
	}
	if f.scan > 0 && len(head) > f.scan {
		head = head[:f.scan] // the same verdict whoever passes more
	}
	w, h, found := f.size(head)
	switch {
	case found && (w == 0 || h == 0 || w*h > MaxImagePixels):
		return "its header declares " + strconv.FormatUint(w, 10) + "×" + strconv.FormatUint(h, 10) +
			" pixels (at most " + strconv.Itoa(MaxImagePixels) + " in all)"
	case !found && f.scan > 0 && len(head) >= f.scan:
		return "the headers before its image data do not end within its first " + strconv.Itoa(f.scan) + " bytes"
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

// jpegSize walks the segments after the start of image up to its first
// scan, and returns the largest frame header (SOF0–SOF15 but DHT, JPG and
// DAC) among them, or an empty one: decoders differ on which frame header
// they take when there are several (Pillow takes the last). ok=false when
// there is none, or when the walk reaches the end of a head of
// FrameScanBytes before the scan (a frame header may follow past the
// window). A segment run that is not well formed ends the walk: no decoder
// gets further either.
func jpegSize(h []byte) (w, ht uint64, ok bool) {
	for i := 2; i+3 < len(h); {
		if h[i] != 0xff {
			return w, ht, ok
		}
		switch m := h[i+1]; {
		case m == 0xff: // a fill byte
			i++
		case m == 0x01 || m == 0xd8 || m >= 0xd0 && m <= 0xd7: // markers without a length
			i += 2
		case m == 0xd9 || m == 0xda: // the end, or the scan
			return w, ht, ok
		case m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc:
			if i+9 > len(h) {
				return w, ht, ok && len(h) < FrameScanBytes
			}
			fw, fh := uint64(binary.BigEndian.Uint16(h[i+7:])), uint64(binary.BigEndian.Uint16(h[i+5:]))
			if !ok || w*ht > 0 && (fw*fh == 0 || fw*fh > w*ht) {
				w, ht, ok = fw, fh, true
			}
			i += 2 + int(binary.BigEndian.Uint16(h[i+2:]))
		default:
			n := int(binary.BigEndian.Uint16(h[i+2:]))
			if n < 2 {
				return w, ht, ok
			}
			i += 2 + n
		}
	}
	return w, ht, ok && len(h) < FrameScanBytes
}

// pngSize reads the IHDR chunk, which a PNG has first.
func pngSize(h []byte) (uint64, uint64, bool) {
	if len(h) < 24 || string(h[12:16]) != "IHDR" {
		return 0, 0, false
	}
	return uint64(binary.BigEndian.Uint32(h[16:])), uint64(binary.BigEndian.Uint32(h[20:])), true
}

// gifSize reads the logical screen descriptor and walks past the global
// colour table and the extension blocks to the first frame's descriptor: a
// decoder grows its canvas to a frame that reaches past the screen (Pillow
// does), so the size is the screen's extended to that frame. ok=false when
// the walk reaches the end of a head of FrameScanBytes first: the frame
// header is past the window. A GIF whose bytes end before a frame, or that
// holds none, has its screen's size.
func gifSize(h []byte) (uint64, uint64, bool) {
	if len(h) < 10 {
		return 0, 0, false
	}
	u16 := func(i int) uint64 { return uint64(binary.LittleEndian.Uint16(h[i:])) }
	w, ht := u16(6), u16(8)
	i := 13
	if len(h) > 10 && h[10]&0x80 != 0 {
		i += 3 << (h[10]&7 + 1)
	}
	for i < len(h) {
		switch h[i] {
		case 0x21: // an extension: its label, then sub-blocks up to an empty one
			i += 2
			for i < len(h) && h[i] != 0 {
				i += 1 + int(h[i])
			}
			i++
		case 0x2c: // an image descriptor: left, top, width, height
			if i+9 > len(h) {
				return w, ht, len(h) < FrameScanBytes
			}
			return max(w, u16(i+1)+u16(i+5)), max(ht, u16(i+3)+u16(i+7)), true
		default: // the trailer, or bytes no decoder reads as a frame
			return w, ht, true
		}
	}
	return w, ht, len(h) < FrameScanBytes
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
