package egress

import (
	"os"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Suite(m)) }
