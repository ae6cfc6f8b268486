package rpc

import (
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wheelset"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// The fixtures of the tests here that validate params through package wire.

var cfgLimits = protocol.Limits{CPUSeconds: 60, MaxWallMs: 600000, AddressSpaceMb: 512, MaxLogBytes: 65536, MaxValueBytes: 32768}

// noPackages is the allow-list of a daemon with packages on demand off.
var noPackages = wheelset.AllowList{}

func tools(fns string) string { return `[{"global":"tools","functions":` + fns + `}]` }

func quote(s string) string { return string(wireguard.AppendString(nil, s)) }

// searchDecl is a typed function with nested schemas.
const searchDecl = `{"name":"search","description":"Find documents.","parameters":{"type":"object",` +
	`"properties":{"q":{"type":"string"},"limit":{"type":"integer","default":10}},"required":["q"]},` +
	`"returns":{"type":"array","items":{"type":"string"}}}`
