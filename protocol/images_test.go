package protocol

import (
	"encoding/binary"
	"strings"
	"testing"
)

func pngHead(w, h uint32) []byte {
	b := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR"), make([]byte, 8)...)
	binary.BigEndian.PutUint32(b[16:], w)
	binary.BigEndian.PutUint32(b[20:], h)
	return b
}

func webpHead(chunk string, body []byte) []byte {
	b := append([]byte("RIFF\x00\x00\x00\x00WEBP"+chunk+"\x00\x00\x00\x00"), body...)
	return append(b, make([]byte, 30)...)[:30]
}

// C1165: ImageProblem refuses bytes that are not of the declared raster format
// and headers that declare an empty canvas or more than MaxImagePixels (PNG's
// IHDR, GIF's screen, WebP's VP8X, VP8L and VP8 headers); it accepts real
// headers within the bound, a signature whose header is cut short, and every
// other type (SVG is text).
func TestImageProblem(t *testing.T) {
	gif := func(w, h uint16) []byte {
		b := []byte("GIF89a\x00\x00\x00\x00")
		binary.LittleEndian.PutUint16(b[6:], w)
		binary.LittleEndian.PutUint16(b[8:], h)
		return b
	}
	vp8x := func(w, h uint32) []byte {
		body := make([]byte, 10)
		body[4], body[5], body[6] = byte(w-1), byte((w-1)>>8), byte((w-1)>>16)
		body[7], body[8], body[9] = byte(h-1), byte((h-1)>>8), byte((h-1)>>16)
		return webpHead("VP8X", body)
	}
	vp8l := func(w, h uint32) []byte {
		body := make([]byte, 5)
		body[0] = 0x2f
		binary.LittleEndian.PutUint32(body[1:], (w-1)|(h-1)<<14)
		return webpHead("VP8L", body)
	}
	vp8 := func(w, h uint16) []byte {
		body := []byte{0, 0, 0, 0x9d, 0x01, 0x2a, 0, 0, 0, 0}
		binary.LittleEndian.PutUint16(body[6:], w)
		binary.LittleEndian.PutUint16(body[8:], h)
		return webpHead("VP8 ", body)
	}
	// jpeg is SOI, an APP0 segment and then APP1 segments of pad bytes in all, then a
	// baseline frame header of w×h and an end of image.
	jpeg := func(w, h uint16, pad int) []byte {
		b := []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
		for pad > 0 {
			n := min(pad, 65533)
			b = append(b, 0xff, 0xe1, byte((n+2)>>8), byte(n+2))
			b = append(b, make([]byte, n)...)
			pad -= n
		}
		b = append(b, 0xff, 0xc0, 0, 11, 8, byte(h>>8), byte(h), byte(w>>8), byte(w), 1, 1, 0x11, 0)
		return append(b, 0xff, 0xd9)
	}
	// twoFrames is a JPEG with two frame headers before its scan: decoders
	// differ on which one they take (Pillow takes the last).
	twoFrames := func(w1, h1, w2, h2 uint16) []byte {
		b := jpeg(w1, h1, 0)
		b = b[:len(b)-2]
		b = append(b, 0xff, 0xc0, 0, 11, 8, byte(h2>>8), byte(h2), byte(w2>>8), byte(w2), 1, 1, 0x11, 0)
		return append(b, 0xff, 0xda, 0, 8, 1, 1, 0, 0, 0x3f, 0, 0xff, 0xd9)
	}
	// gifFrame is a GIF whose screen is 1×1 (with a global colour table and a
	// comment of pad bytes first) and whose first frame is w×h at (x, y).
	gifFrame := func(x, y, w, h uint16, pad int) []byte {
		b := append(gif(1, 1), 0x80, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff)
		for pad > 0 {
			n := min(pad, 255)
			b = append(append(b, 0x21, 0xfe, byte(n)), make([]byte, n)...)
			b = append(b, 0)
			pad -= n
		}
		b = append(b, 0x2c, byte(x), byte(x>>8), byte(y), byte(y>>8), byte(w), byte(w>>8), byte(h), byte(h>>8), 0)
		return append(b, 2, 2, 0x4c, 1, 0, 0x3b)
	}
	cases := []struct {
		mime    string
		head    []byte
		problem string // a substring; "" for none
	}{
		{"image/png", pngHead(640, 480), ""},
		{"image/png", pngHead(8192, 8192), ""},
		{"image/png", pngHead(8193, 8192), "declares 8193×8192 pixels"},
		{"image/png", pngHead(100000, 100000), "declares 100000×100000 pixels (at most 67108864 in all)"},
		{"image/png", pngHead(0, 10), "declares 0×10"},
		{"image/png", []byte("\x89PNG\r\n\x1a\n"), ""},
		{"image/png", []byte("GIF89a"), "its bytes are not PNG (they start 474946383961)"},
		{"image/png", nil, "its bytes are not PNG (they start )"},
		{"image/jpeg", []byte("\xff\xd8\xff\xe0"), ""},
		{"image/jpeg", jpeg(640, 480, 100), ""},
		{"image/jpeg", jpeg(65535, 65535, 100), "declares 65535×65535 pixels"},
		{"image/jpeg", jpeg(100, 100, 70000), ""},
		{"image/jpeg", jpeg(65535, 65535, 70000), "declares 65535×65535"},
		{"image/jpeg", jpeg(10, 10, FrameScanBytes), "the headers before its image data do not end within its first 262144 bytes"},
		{"image/jpeg", twoFrames(1, 1, 12000, 12000), "declares 12000×12000 pixels"},
		{"image/jpeg", twoFrames(640, 480, 0, 10), "declares 0×10 pixels"},
		{"image/jpeg", twoFrames(640, 480, 320, 200), ""},
		{"image/jpeg", []byte("<svg onload='x'/>"), "its bytes are not JPEG (they start 3c737667206f6e6c)"},
		{"image/gif", gif(1, 1), ""},
		{"image/gif", gif(65535, 65535), "declares 65535×65535"},
		{"image/gif", []byte("GIF87a"), ""},
		{"image/gif", gifFrame(0, 0, 1, 1, 0), ""},
		{"image/gif", gifFrame(0, 0, 640, 480, 1000), ""},
		{"image/gif", gifFrame(0, 0, 30000, 30000, 0), "declares 30000×30000 pixels"},
		{"image/gif", gifFrame(60000, 60000, 2, 2, 0), "declares 60002×60002 pixels"},
		{"image/gif", gifFrame(0, 0, 30000, 30000, 70000), "declares 30000×30000"},
		{"image/gif", gifFrame(0, 0, 1, 1, FrameScanBytes), "the headers before its image data do not end within its first 262144 bytes"},
		{"image/webp", vp8x(1000, 1000), ""},
		{"image/webp", vp8x(1<<24, 1<<24), "declares 16777216×16777216"},
		{"image/webp", vp8l(16384, 16384), "declares 16384×16384"},
		{"image/webp", vp8l(100, 50), ""},
		{"image/webp", vp8(16383, 16383), "declares 16383×16383"},
		{"image/webp", vp8(320, 200), ""},
		{"image/webp", []byte("RIFF\x00\x00\x00\x00WAVEfmt "), "its bytes are not WebP"},
		{"image/svg+xml", []byte("<svg><script>alert(1)</script></svg>"), ""},
		{"application/pdf", []byte("anything"), ""},
	}
	for _, c := range cases {
		got := ImageProblem(c.mime, c.head)
		if (c.problem == "") != (got == "") || !strings.Contains(got, c.problem) {
			t.Errorf("%s %.40q: problem %q, want %q", c.mime, c.head, got, c.problem)
		}
	}
}
