package coderun

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/gorilla/websocket"
	"github.com/sourcegraph/jsonrpc2"
	jsonrpc2ws "github.com/sourcegraph/jsonrpc2/websocket"
)

// Connect connects to a daemon in service mode (`coderun-rpc serve`,
// docs/service.md) at "unix:PATH", "tcp:HOST:PORT" or "ws://HOST:PORT/PATH"
// ("wss://" too), presents Options.Token when set, and performs initialize.
// ctx bounds the connection and initialize. The Client's API is Start's;
// Close ends this connection, its runs and its sessions, not the daemon.
func Connect(ctx context.Context, address string, opts Options) (*Client, error) {
	stream, err := dial(ctx, address, opts.Token)
	if err != nil {
		return nil, err
	}
	return newClient(ctx, stream, opts, nil, false)
}

// Attach speaks to a daemon over streams the caller already has, typically
// its stdio: rwc reads the daemon's output and writes its input, and its
// Close ends the daemon's input. It performs initialize; Close sends
// shutdown and exit, as for Start.
func Attach(ctx context.Context, rwc io.ReadWriteCloser, opts Options) (*Client, error) {
	return newClient(ctx, NewObjectStream(rwc), opts, nil, true)
}

// dial opens the transport of address and authenticates on it.
func dial(ctx context.Context, address, token string) (jsonrpc2.ObjectStream, error) {
	if strings.HasPrefix(address, "ws://") || strings.HasPrefix(address, "wss://") {
		header := http.Header{}
		if token != "" {
			header.Set("Authorization", "Bearer "+token)
		}
		conn, resp, err := websocket.DefaultDialer.DialContext(ctx, address, header)
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("coderun: connecting to %s: %w", address, err)
		}
		conn.SetReadLimit(maxMessageBytes)
		return jsonrpc2ws.NewObjectStream(conn), nil
	}
	network, where, ok := strings.Cut(address, ":")
	if !ok || network != "unix" && network != "tcp" {
		return nil, fmt.Errorf("coderun: address %q is not unix:PATH, tcp:HOST:PORT, ws://… or wss://…", address)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, where)
	if err != nil {
		return nil, fmt.Errorf("coderun: connecting to %s: %w", address, err)
	}
	if token != "" {
		if _, err := io.WriteString(conn, "Authorization: Bearer "+token+"\r\n"); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("coderun: connecting to %s: %w", address, err)
		}
	}
	return NewObjectStream(conn), nil
}
