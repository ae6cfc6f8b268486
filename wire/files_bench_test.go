package wire

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// BenchmarkValidateFilesMiB validates run params carrying a 1 MiB file as
// base64 (the outputs group of bench/cmd): the scan of the request, the
// split of files, the strict decode.
func BenchmarkValidateFilesMiB(b *testing.B) {
	csv := strings.Repeat("1234567,89\n", 1<<20/11+1)[:1<<20]
	raw := []byte(`{"program":"return 1","files":[{"path":"in.csv","base64":"` +
		base64.StdEncoding.EncodeToString([]byte(csv)) + `"}]}`)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		p, err := ValidateRun(raw, protocol.Limits{MaxFileBytes: 16 << 20}, noPackages)
		if err != nil || len(p.Files) != 1 || len(p.Files[0].Data) != 1<<20 {
			b.Fatalf("ValidateRun: %v", err)
		}
	}
}
