package wire

import (
	"context"
	"strconv"

	"github.com/coderun-rpc/coderun-rpc/mcp/upstream"
	"github.com/coderun-rpc/coderun-rpc/protocol"
	"github.com/coderun-rpc/coderun-rpc/wireguard"
)

// mcpErrorClass is what an mcp binding raises a tool's failure as unless it
// declares its own errorClass: one class every mcp binding shares, its
// instances naming the tool and the server.
func mcpErrorClass(server string) *protocol.ErrorClass {
	return &protocol.ErrorClass{Name: upstream.ErrorClassName, MemberNameProperty: "tool",
		Attributes: map[string]string{"server": server}}
}

// validateMCPMember reads a binding's "mcp" member m when it is present: a
// non-empty server key, and then no "functions" (hasFunctions).
func validateMCPMember(at string, m *wireguard.Member, hasFunctions bool, ns *protocol.Namespace) (bool, error) {
	if !given(m) {
		return false, nil
	}
	key, ok := wireguard.DecodeString(m.Value)
	if !ok || key == "" {
		return true, reject(at + ".mcp must be the name of a configured MCP server")
	}
	if hasFunctions {
		return true, reject(at + " has both \"mcp\" and \"functions\"; an mcp binding takes its functions from the server")
	}
	if ns.Global == upstream.ErrorClassName && ns.ErrorClass == nil {
		// the shared class would take the binding's own name
		return true, reject(at + ".global " + quote(ns.Global) + " is the name of the error class MCP bindings share; choose another global")
	}
	ns.MCP = key
	ns.Names = []string{}
	return true, nil
}

// sharesMCPClass reports whether an mcp binding without its own errorClass
// may inject the shared class: no other kind of global took its name.
func sharesMCPClass(ns *protocol.Namespace, injected, errorClasses map[string]bool) bool {
	n := upstream.ErrorClassName
	return ns.MCP != "" && ns.ErrorClass == nil && (!injected[n] || errorClasses[n])
}

func HasMCP(nss []protocol.Namespace) bool {
	for _, ns := range nss {
		if ns.MCP != "" {
			return true
		}
	}
	return false
}

// ResolveMCP fills every mcp namespace of nss from its server's tools,
// connecting to the server when needed, and returns the routes (global →
// server) for upstream.Client and a comment line per server whose tools a
// cap cut ("\n# mcp server …: tools omitted: …"). An error names the server.
func ResolveMCP(ctx context.Context, pool *upstream.Pool, nss []protocol.Namespace) (map[string]*upstream.Server, string, error) {
	routes := map[string]*upstream.Server{}
	cuts := ""
	for i := range nss {
		ns := &nss[i]
		if ns.MCP == "" {
			continue
		}
		srv := pool.Server(ns.MCP)
		tools, err := srv.Tools(ctx)
		if err != nil {
			return nil, "", err
		}
		if tools.Cut != "" {
			cuts += "\n# " + tools.Cut
		}
		ns.Names = make([]string, len(tools.Functions))
		for j, fn := range tools.Functions {
			ns.Names[j] = fn.Name
		}
		addTyped(ns, tools.Functions)
		routes[ns.Global] = srv
	}
	return routes, cuts, nil
}

// stubView is nss as the stubs show them: in an mcp namespace a tool whose
// name is not an identifier appears once, as the method of its identifier
// form, when it has one (docs/mcp.md); the program can use both.
func stubView(nss []protocol.Namespace) []protocol.Namespace {
	out := make([]protocol.Namespace, len(nss))
	for i, ns := range nss {
		out[i] = ns
		if ns.MCP == "" {
			continue
		}
		has := make(map[string]bool, len(ns.Names))
		for _, n := range ns.Names {
			has[n] = true
		}
		out[i].Names, out[i].Checks = nil, nil
		for j, n := range ns.Names {
			if alias := upstream.Identifier(n); alias == n || !has[alias] {
				out[i].Names = append(out[i].Names, n)
				out[i].Checks = append(out[i].Checks, ns.Checks[j])
			}
		}
	}
	return out
}

// CheckMCPServers refuses an mcp binding naming a server pool was not
// configured with (−32602).
func CheckMCPServers(pool *upstream.Pool, nss []protocol.Namespace) error {
	for i, ns := range nss {
		if ns.MCP != "" && pool.Server(ns.MCP) == nil {
			return reject("bindings[" + strconv.Itoa(i) + "].mcp " + quote(ns.MCP) + " is not a configured MCP server")
		}
	}
	return nil
}
