package wireguard

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// base64SizeSlow is base64Size one byte at a time: the definition of strict,
// padded standard base64 the chunked decoder must reproduce.
func base64SizeSlow(b []byte) (int64, bool) {
	n, err := base64.StdEncoding.Strict().Decode(make([]byte, len(b)), b)
	if err != nil || bytes.ContainsAny(b, "\r\n") {
		return 0, false
	}
	return int64(n), true
}

// base64Cases are valid base64 of several lengths (across the vector
// decoder's 32-byte blocks and base64Chunk) and byte-level damage to each:
// a character outside the alphabet, '=' in the middle, padding with non-zero
// tail bits, a missing or extra byte.
func base64Cases() [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	var cases [][]byte
	for _, n := range []int{0, 1, 2, 3, 44, 45, 46, 47, 100, 1000, base64Chunk/4*3 - 1, base64Chunk / 4 * 3, base64Chunk/4*3 + 1, 3 * base64Chunk} {
		raw := make([]byte, n)
		for i := range raw {
			raw[i] = byte(r.IntN(256))
		}
		enc := []byte(base64.StdEncoding.EncodeToString(raw))
		cases = append(cases, enc)
		if len(enc) == 0 {
			continue
		}
		for _, bad := range []byte{'=', '-', '_', '\\', ' ', 0x80, '"'} {
			for _, at := range []int{0, len(enc) / 2, len(enc) - 5, len(enc) - 1} {
				if at >= 0 {
					c := bytes.Clone(enc)
					c[at] = bad
					cases = append(cases, c)
				}
			}
		}
		cases = append(cases, enc[:len(enc)-1], append(bytes.Clone(enc), 'A'))
		if pad := bytes.Count(enc[len(enc)-2:], []byte("=")); pad > 0 {
			c := bytes.Clone(enc)
			c[len(enc)-pad-1] = '/' // non-zero tail bits
			cases = append(cases, c)
		}
	}
	return cases
}

func TestBase64SizeAgreesWithStrictDecoding(t *testing.T) {
	for _, c := range base64Cases() {
		got, ok := base64Size(c)
		want, wantOK := base64SizeSlow(c)
		if got != want || ok != wantOK {
			t.Errorf("base64Size(%d bytes, %.20q…) = %d, %v; want %d, %v", len(c), c, got, ok, want, wantOK)
		}
	}
}

// DecodeBase64 returns what encoding/base64's Strict decoder does, error
// offset included, for a token with or without escapes.
func TestDecodeBase64AgreesWithStrictDecoding(t *testing.T) {
	for _, c := range base64Cases() {
		if bytes.ContainsAny(c, "\"\\\x80") {
			continue // not a JSON string body as it stands
		}
		want, wantErr := base64.StdEncoding.Strict().DecodeString(string(c))
		for _, tok := range [][]byte{
			append(append([]byte{'"'}, c...), '"'),
			append(append([]byte{'"'}, bytes.ReplaceAll(c, []byte("/"), []byte(`\/`))...), '"'),
		} {
			got, err := DecodeBase64(tok)
			if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() ||
				err == nil && !bytes.Equal(got, want) {
				t.Errorf("DecodeBase64(%.30q…) = %d bytes, %v; want %d bytes, %v", tok, len(got), err, len(want), wantErr)
			}
		}
	}
}

func TestEncodeBase64InPieces(t *testing.T) {
	data := make([]byte, 100_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, chunk := range []int{3, 48 << 10, 1 << 20} {
		var got []byte
		pieces := 0
		EncodeBase64(data, chunk, func(p []byte) { got = append(got, p...); pieces++ })
		if want := base64.StdEncoding.EncodeToString(data); string(got) != want {
			t.Errorf("chunk %d: encoding differs", chunk)
		}
		if want := (len(data) + chunk - 1) / chunk; pieces != want {
			t.Errorf("chunk %d: %d pieces, want %d", chunk, pieces, want)
		}
	}
}

// FuzzBase64Size: the chunked vector check accepts exactly what the strict
// decoder does, and measures it the same.
func FuzzBase64Size(f *testing.F) {
	for _, c := range base64Cases() {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := base64Size(b)
		want, wantOK := base64SizeSlow(b)
		if got != want || ok != wantOK {
			t.Errorf("base64Size(%q) = %d, %v; want %d, %v", b, got, ok, want, wantOK)
		}
	})
}
