//go:build linux

package spawn

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/coderun-rpc/coderun-rpc/internal/leakcheck"
	"golang.org/x/sys/unix"
)

func TestSignalName(t *testing.T) {
	leakcheck.Check(t)
	for sig, want := range map[syscall.Signal]string{
		syscall.SIGXCPU: "SIGXCPU", syscall.SIGSEGV: "SIGSEGV", 34: "SIGRTMIN",
		35: "SIGRTMIN+1", 64: "SIGRTMAX", 99: "SIG99",
	} {
		if got := SignalName(sig); got != want {
			t.Errorf("SignalName(%d) = %q, want %q", int(sig), got, want)
		}
	}
}

func TestCloexecFallback(t *testing.T) {
	leakcheck.Check(t)
	fd, err := unix.Open(os.DevNull, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cloexecByProcFd()
	if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); fl&unix.FD_CLOEXEC == 0 {
		t.Error("fd not marked close-on-exec")
	}
	if fl, _ := unix.FcntlInt(2, unix.F_GETFD, 0); fl&unix.FD_CLOEXEC != 0 {
		t.Error("fd 2 marked close-on-exec")
	}
}

func TestParseStartTime(t *testing.T) {
	leakcheck.Check(t)
	fields := func(start string) string {
		// fields 3..22, then a few more
		f := []string{"S", "1", "2", "3", "0", "-1", "4194560", "10", "0", "0", "0", "1", "2", "0", "0", "20", "0", "1", "0", start, "123", "456"}
		return strings.Join(f, " ")
	}
	for _, tc := range []struct {
		line string
		want uint64
		ok   bool
	}{
		{"42 (sleep) " + fields("987654"), 987654, true},
		{"42 (a b) (c) " + fields("5"), 5, true},
		{"42 (x) ( y)) z) " + fields("77"), 77, true},
		{"42 ()) " + fields("18446744073709551615"), 18446744073709551615, true},
		{"42 (sleep " + fields("1"), 0, false},
		{"42 (short) S 1 2 3", 0, false},
		{"42 (bad) " + fields("-1"), 0, false},
		{"", 0, false},
	} {
		got, ok := parseStartTime([]byte(tc.line))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseStartTime(%q) = %d, %v; want %d, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}
