package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os/exec"
	"sync"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	coderun "github.com/coderun-rpc/coderun-rpc/clients/go"
)

// peer is the benchmark's JSON-RPC connection to a daemon (or to the
// echo server of the floor): a jsonrpc2.Conn over the Go client's frame
// stream (coderun.NewObjectStream), which sends params as the groups built
// them and answers every binding/call with its arguments, on the read
// goroutine. It stamps each response when its frame has been read, before
// it is decoded: the benchmark's arrival times (reply.At).
type peer struct {
	conn *jsonrpc2.Conn

	mu      sync.Mutex
	arrived map[jsonrpc2.ID]time.Time // by request id, until its call takes it
	ids     uint64
}

// reply is one response: its result as read and when it arrived.
type reply struct {
	Result json.RawMessage
	At     time.Time
}

// newPeer speaks over rwc; echo answers binding/call (the daemon's peer),
// else each request is answered with its params (the echo server).
func newPeer(rwc io.ReadWriteCloser, echo bool) *peer {
	p := &peer{arrived: map[jsonrpc2.ID]time.Time{}}
	stream := &stampStream{ObjectStream: coderun.NewObjectStream(rwc)}
	var h jsonrpc2.Handler = echoParams{}
	if echo {
		h = echoArgs{}
	}
	stamp := jsonrpc2.OnRecv(func(_ *jsonrpc2.Request, resp *jsonrpc2.Response) {
		if resp != nil {
			p.mu.Lock()
			p.arrived[resp.ID] = stream.at
			p.mu.Unlock()
		}
	})
	// A connection the load test closes is not a protocol error to print.
	quiet := jsonrpc2.SetLogger(log.New(io.Discard, "", 0))
	p.conn = jsonrpc2.NewConn(context.Background(), stream, h, stamp, quiet)
	return p
}

// stampStream notes when each message's frame had been read.
type stampStream struct {
	jsonrpc2.ObjectStream
	at time.Time // the last message's; the read goroutine's only
}

func (s *stampStream) ReadObject(v any) error {
	var body json.RawMessage
	if err := s.ObjectStream.ReadObject(&body); err != nil {
		return err
	}
	s.at = time.Now()
	return json.Unmarshal(body, v)
}

// echoArgs answers a binding/call with its args.
type echoArgs struct{}

func (echoArgs) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	if req.Notif || req.Params == nil {
		return
	}
	var p struct {
		Args json.RawMessage `json:"args"`
	}
	_ = json.Unmarshal(*req.Params, &p)
	_ = conn.Reply(ctx, req.ID, p.Args)
}

// echoParams answers every request with its params.
type echoParams struct{}

func (echoParams) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	if !req.Notif {
		_ = conn.Reply(ctx, req.ID, req.Params)
	}
}

// startPeer starts cmd with its stdio wired to a new peer.
func startPeer(cmd *exec.Cmd, echo bool) (*peer, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return newPeer(stdio{out, in}, echo), nil
}

// stdio is a child's stdout and stdin as one stream; closing it closes
// stdin.
type stdio struct {
	io.Reader
	io.WriteCloser
}

// call sends a request with params encoded (none when nil) and waits for its
// response; an error response is returned as an error.
func call(p *peer, method string, params any) (*reply, error) {
	return callCtx(context.Background(), p, method, params)
}

func callCtx(ctx context.Context, p *peer, method string, params any) (*reply, error) {
	p.mu.Lock()
	p.ids++
	id := jsonrpc2.ID{Num: p.ids}
	p.mu.Unlock()
	var result json.RawMessage
	err := p.conn.Call(ctx, method, params, &result, jsonrpc2.PickID(id))
	p.mu.Lock()
	at := p.arrived[id]
	delete(p.arrived, id)
	p.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return &reply{Result: result, At: at}, nil
}
