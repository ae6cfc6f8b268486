//go:build linux

package child_test

import (
	"testing"

	"github.com/coderun-rpc/coderun-rpc/child/internal/childtest"
)

func TestMain(m *testing.M) { childtest.Main(m) }
