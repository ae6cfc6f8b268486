package session_test

import (
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/session"
)

// noBindings is a Client for programs that declare no binding: any call is
// answered with an error, log events are not streamed (Stream is off), and
// nothing is buffered.
type noBindings struct{}

func (noBindings) CallBinding(_, namespace, function string, _ []byte, answer func(session.Answer)) func() {
	msg := "no binding " + namespace + "." + function
	answer(session.Answer{HasError: true, Message: &msg})
	return func() {}
}

func (noBindings) Log(string, protocol.LogEvent) {}

func (noBindings) Flush() {}

// The Manager runs a program in a fresh python3 child and hands its settled
// result to the callback: the completion value, the log entries and stats.
func ExampleManager() {
	m := session.NewManager(session.Config{
		Python: interpreter(),
		Limits: protocol.Limits{CPUSeconds: 10, MaxWallMs: 10000, AddressSpaceMb: 512,
			MaxLogBytes: 65536, MaxValueBytes: 65536},
		Grace:         100 * time.Millisecond,
		MaxConcurrent: 1,
		MaxQueued:     1,
	})
	defer m.Shutdown()

	results := make(chan protocol.Result, 1)
	_, err := m.Submit(`"example"`, protocol.RunParams{Program: "print('hello')\nreturn 1"}, noBindings{},
		func(res protocol.Result) { results <- res })
	if err != nil {
		fmt.Println("submit:", err)
		return
	}
	res := <-results
	fmt.Println(string(res.Value), res.Logs, res.Error)
	// Output: 1 [hello] <nil>
}

// interpreter resolves python3 to the interpreter binary itself (python3 may
// be a wrapper script that needs the environment the child does not get).
func interpreter() string {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "python3"
	}
	return strings.TrimSpace(string(out))
}
