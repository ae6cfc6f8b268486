package serve

import "testing"

// A token-less WebSocket listener answers only its own loopback Host:
// names an attacker can rebind, other ports and lookalikes are refused.
func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.7:8080": true, "[::1]:8080": true, "localhost:8080": true, "LocalHost:8080": true,
		"evil.example:8080": false, "127.0.0.1.evil.example:8080": false, "localhost.evil.example:8080": false,
		"127.0.0.1:8081": false, "127.0.0.1": false, "localhost": false, "[::1]": false, "10.0.0.1:8080": false,
		"0.0.0.0:8080": false, "[::]:8080": false, "": false, ":8080": false,
	} {
		if got := loopbackHost(host, "8080"); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
