package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"

	"github.com/coderun-rpc/coderun-rpc/internal/lspclient"
)

// startPeer starts cmd with its stdio wired to a new client; onRequest
// answers the peer's requests (binding/call), nil for a peer that sends none.
// The client stamps each response when its frame has been read, before it is
// decoded: the benchmark's arrival times (Message.At).
func startPeer(cmd *exec.Cmd, onRequest func(*lspclient.Message, lspclient.Reply)) (*lspclient.Client, error) {
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
	return lspclient.New(in, out, lspclient.Options{OnRequest: onRequest}), nil
}

// call sends a request with params encoded (none when nil; already encoded
// params, a json.RawMessage, are sent as they are) and waits for its
// response; an error response is returned as an error.
func call(c *lspclient.Client, method string, params any) (*lspclient.Message, error) {
	raw, ok := params.(json.RawMessage)
	if !ok && params != nil {
		var err error
		if raw, err = json.Marshal(params); err != nil {
			return nil, err
		}
	}
	m, err := c.Call(context.Background(), method, raw)
	if err == nil && m.Error != nil {
		return nil, fmt.Errorf("%s: %w", method, m.Error)
	}
	return m, err
}
