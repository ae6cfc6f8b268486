package config

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// sandboxPresent is a sandbox probe that finds every feature (the real one
// starts the daemon's init, which a test binary is not).
func sandboxPresent() error { return nil }

// fakeTrees lists one tree of the interpreter at python.
func fakeTrees(python string) ([]string, error) { return []string{python + ".trees"}, nil }

// fakeProbe reports a CPython 3.12.1 behind no shim.
func fakeProbe(path string, args []string, d time.Duration, max int) ([]byte, error) {
	return []byte("cpython 3 12 1\n" + path + "\n"), nil
}

func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "CODERUN_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

func load(t *testing.T, env map[string]string) (*Config, error) {
	t.Helper()
	clearEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	if _, ok := env[VarPythonBin]; !ok {
		t.Setenv(VarPythonBin, "/bin/sh") // any executable; the probe is faked
	}
	return Load(Options{Probe: fakeProbe, SandboxProbe: sandboxPresent, InterpreterTrees: fakeTrees, NumCPU: 3})
}

func TestDefaults(t *testing.T) {
	c, err := load(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := c.Limits
	if l.CPUSeconds != 60 || l.MaxWallMs != 600000 || l.AddressSpaceMb != 512 ||
		l.MaxLogBytes != 65536 || l.MaxValueBytes != 32768 || c.GraceMs != 3000 {
		t.Errorf("limits %+v grace %d", l, c.GraceMs)
	}
	if c.MaxConcurrentRuns != 6 || c.WarmPool != 2 || c.MaxQueuedRuns != 1024 ||
		c.Isolation != "sandbox" || c.StartMode != "fork" || c.LogLevel.String() != "INFO" {
		t.Errorf("config %+v", c)
	}
	if c.Python != "/bin/sh" || c.PythonVersion != "3.12.1" {
		t.Errorf("python %q %q", c.Python, c.PythonVersion)
	}
	c, err = load(t, map[string]string{VarMaxConcurrentRuns: "1"})
	if err != nil || c.WarmPool != 1 {
		t.Fatalf("warm pool default with 1 run: %v %+v", err, c)
	}
}

// TestVariableNames pins the split_words names (no envconfig tags).
func TestVariableNames(t *testing.T) {
	for v, want := range map[string]string{VarCPUSeconds: "7", VarMaxWallMs: "8",
		VarAddressSpaceMB: "1024", VarMaxLogBytes: "100", VarMaxValueBytes: "9", VarGraceMs: "10",
		VarMaxConcurrentRuns: "11", VarMaxQueuedRuns: "0", VarWarmPool: "0", VarLogLevel: "debug"} {
		c, err := load(t, map[string]string{v: want})
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		got := map[string]int64{VarCPUSeconds: c.Limits.CPUSeconds, VarMaxWallMs: c.Limits.MaxWallMs,
			VarAddressSpaceMB: c.Limits.AddressSpaceMb, VarMaxLogBytes: c.Limits.MaxLogBytes,
			VarMaxValueBytes: c.Limits.MaxValueBytes, VarGraceMs: c.GraceMs,
			VarMaxConcurrentRuns: int64(c.MaxConcurrentRuns), VarMaxQueuedRuns: int64(c.MaxQueuedRuns),
			VarWarmPool: int64(c.WarmPool)}
		if v == VarLogLevel {
			if c.LogLevel.String() != "DEBUG" {
				t.Errorf("log level %v", c.LogLevel)
			}
			continue
		}
		if n, ok := got[v]; !ok || strconv.FormatInt(n, 10) != want {
			t.Errorf("%s=%s read as %d", v, want, n)
		}
	}
	// The unprefixed name is never read.
	clearEnv(t)
	t.Setenv("CPU_SECONDS", "5")
	t.Setenv("CPUSECONDS", "5")
	t.Setenv(VarPythonBin, "/bin/sh")
	c, err := Load(Options{Probe: fakeProbe, SandboxProbe: sandboxPresent, InterpreterTrees: fakeTrees})
	if err != nil || c.Limits.CPUSeconds != 60 {
		t.Errorf("unprefixed variable read: %v %+v", err, c)
	}
}

const (
	pos        = "must be a positive integer"
	nonNegRule = "must be a non-negative integer"
	frameCap   = "must be at most 67108800 (a frame carrying it must fit the 67108864-byte fd-3 frame cap)"
	ruleCount  = "must be at most 9007199254740991"
)

func TestRules(t *testing.T) {
	cases := []struct {
		env       map[string]string
		varName   string
		value     string
		rule      string
		substring bool
	}{
		// C6
		{map[string]string{VarCPUSeconds: "0"}, VarCPUSeconds, "0", pos, false},
		{map[string]string{VarMaxWallMs: "-1"}, VarMaxWallMs, "-1", pos, false},
		// C7 and the spelling rules
		{map[string]string{VarCPUSeconds: "1.5"}, VarCPUSeconds, "1.5", pos, false},
		{map[string]string{VarCPUSeconds: "010"}, VarCPUSeconds, "010", pos, false},
		{map[string]string{VarCPUSeconds: "+5"}, VarCPUSeconds, "+5", pos, false},
		{map[string]string{VarCPUSeconds: "0x10"}, VarCPUSeconds, "0x10", pos, false},
		{map[string]string{VarCPUSeconds: "1_000"}, VarCPUSeconds, "1_000", pos, false},
		{map[string]string{VarCPUSeconds: " 5"}, VarCPUSeconds, " 5", pos, false},
		{map[string]string{VarCPUSeconds: ""}, VarCPUSeconds, "", pos, false},
		{map[string]string{VarCPUSeconds: "abc"}, VarCPUSeconds, "abc", pos, false},
		{map[string]string{VarGraceMs: "9223372036854775808"}, VarGraceMs, "9223372036854775808",
			"must be at most 9223372034854 (graceMs + 2000 must stay a valid time.Duration)", false},
		{map[string]string{VarMaxQueuedRuns: "-1"}, VarMaxQueuedRuns, "-1", nonNegRule, false},
		{map[string]string{VarWarmPool: "00"}, VarWarmPool, "00", nonNegRule, false},
		{map[string]string{VarWarmPool: ""}, VarWarmPool, "", nonNegRule, false},
		{map[string]string{VarMaxConcurrentRuns: "0"}, VarMaxConcurrentRuns, "0", pos, false},
		// C8 ceilings
		{map[string]string{VarAddressSpaceMB: "8589934592"}, VarAddressSpaceMB, "8589934592",
			"must be at most 8589934591 (its byte count must stay an exact JSON integer)", false},
		{map[string]string{VarCPUSeconds: "9007199254740991"}, VarCPUSeconds, "9007199254740991",
			"must be at most 9007199254740990 (it and its +1 hard limit must stay exact JSON integers)", false},
		{map[string]string{VarAddressSpaceMB: "1e308"}, VarAddressSpaceMB, "1e308", pos, false},
		// Digits beyond int64 break the ceiling, not the spelling rule.
		{map[string]string{VarCPUSeconds: "99999999999999999999"}, VarCPUSeconds, "99999999999999999999",
			"must be at most 9007199254740990 (it and its +1 hard limit must stay exact JSON integers)", false},
		{map[string]string{VarWarmPool: "99999999999999999999"}, VarWarmPool, "99999999999999999999", ruleCount, false},
		{map[string]string{VarMaxWallMs: "9223372036855"}, VarMaxWallMs, "9223372036855",
			"must be at most 9223372036854 (the largest whole-millisecond time.Duration)", false},
		{map[string]string{VarGraceMs: "9223372034855"}, VarGraceMs, "9223372034855",
			"must be at most 9223372034854 (graceMs + 2000 must stay a valid time.Duration)", false},
		// C9
		{map[string]string{VarMaxLogBytes: "67108801"}, VarMaxLogBytes, "67108801", frameCap, false},
		{map[string]string{VarMaxValueBytes: "67108801"}, VarMaxValueBytes, "67108801", frameCap, false},
		// C163
		{map[string]string{VarMaxLogBytes: "63"}, VarMaxLogBytes, "63", "must be at least 64 (a marker-only log must fit)", false},
		{map[string]string{VarMaxConcurrentRuns: "9007199254740992"}, VarMaxConcurrentRuns, "9007199254740992",
			"must be at most 9007199254740991", false},
		{map[string]string{VarMaxQueuedRuns: "9007199254740992"}, VarMaxQueuedRuns, "9007199254740992",
			"must be at most 9007199254740991", false},
		{map[string]string{VarIsolation: "docker"}, VarIsolation, "docker", `must be "process", "sandbox" or "auto"`, false},
		{map[string]string{VarIsolation: ""}, VarIsolation, "", `must be "process", "sandbox" or "auto"`, false},
		{map[string]string{VarStartMode: "vfork"}, VarStartMode, "vfork", `must be "auto", "fork" or "spawn"`, false},
		{map[string]string{VarStartMode: ""}, VarStartMode, "", `must be "auto", "fork" or "spawn"`, false},
		{map[string]string{VarLogLevel: "INFO"}, VarLogLevel, "INFO", "must be one of debug, info, warn, error", false},
		// Warm pool against the effective concurrency.
		{map[string]string{VarMaxConcurrentRuns: "2", VarWarmPool: "3"}, VarWarmPool, "3",
			"must be at most CODERUN_MAX_CONCURRENT_RUNS (2)", false},
		{map[string]string{VarWarmPool: "7"}, VarWarmPool, "7", "must be at most CODERUN_MAX_CONCURRENT_RUNS (6)", false},
		// ...and it comes before later variables' rules.
		{map[string]string{VarWarmPool: "7", VarLogLevel: "loud"}, VarWarmPool, "7",
			"must be at most CODERUN_MAX_CONCURRENT_RUNS (6)", false},
		// Order: the first variable in docs/configuration.md §3 order wins.
		{map[string]string{VarLogLevel: "x", VarCPUSeconds: "x"}, VarCPUSeconds, "x", pos, false},
		{map[string]string{VarMaxLogBytes: "x", VarMaxWallMs: "0"}, VarMaxWallMs, "0", pos, false},
		// C53 address-space room
		{map[string]string{VarMaxLogBytes: "50000000", VarAddressSpaceMB: "256"}, VarMaxLogBytes, "50000000",
			"times the 12x worst-case Unicode expansion must fit within the 201326592 bytes left after the 67108864-byte interpreter baseline of the 268435456-byte CODERUN_ADDRESS_SPACE_MB; the most it may be is 16777215", false},
		{map[string]string{VarMaxValueBytes: "50000000", VarAddressSpaceMB: "256"}, VarMaxValueBytes, "50000000",
			"times the 12x worst-case Unicode expansion must fit within the 201326592 bytes left after the 67108864-byte interpreter baseline of the 268435456-byte CODERUN_ADDRESS_SPACE_MB; the most it may be is 16777215", false},
		{map[string]string{VarMaxLogBytes: "50331648"}, VarMaxLogBytes, "50331648", "the most it may be is 39146837", true},
		{map[string]string{VarAddressSpaceMB: "64"}, VarAddressSpaceMB, "64",
			"must exceed the 67108864-byte interpreter baseline with room for the output budgets, got 64 MiB (67108864 bytes)", false},
		{map[string]string{VarAddressSpaceMB: "32"}, VarAddressSpaceMB, "32",
			"must exceed the 67108864-byte interpreter baseline with room for the output budgets, got 32 MiB (33554432 bytes)", false},
		// Room is checked after every per-variable rule.
		{map[string]string{VarAddressSpaceMB: "64", VarLogLevel: "x"}, VarLogLevel, "x", "must be one of debug, info, warn, error", false},
		// C11
		{map[string]string{VarPythonBin: ""}, VarPythonBin, "", "must be a non-empty path", false},
	}
	for _, c := range cases {
		_, err := load(t, c.env)
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("%v: want a configuration error, got %v", c.env, err)
			continue
		}
		okRule := ce.Rule == c.rule || c.substring && strings.Contains(ce.Rule, c.rule)
		if ce.Var != c.varName || ce.Value != c.value || !okRule {
			t.Errorf("%v:\n got %s\nwant %s=%q: %s", c.env, ce.Line(), c.varName, c.value, c.rule)
		}
	}
}

func TestAccepted(t *testing.T) {
	for _, env := range []map[string]string{
		{VarAddressSpaceMB: "8589934591"},
		{VarCPUSeconds: "9007199254740990"},
		{VarMaxValueBytes: "67108800", VarAddressSpaceMB: "4096"},
		{VarMaxValueBytes: "52428800", VarAddressSpaceMB: "1024"},
		{VarMaxValueBytes: "1"},
		{VarMaxLogBytes: "39146837"},
		{VarMaxQueuedRuns: "0", VarWarmPool: "0"},
		{"CODERUN_RPC_BIN": "/nonexistent", "CODERUN_WHATEVER": "x"},
	} {
		if _, err := load(t, env); err != nil {
			t.Errorf("%v: %v", env, err)
		}
	}
}

func TestLine(t *testing.T) {
	e := &Error{Var: VarMaxLogBytes, Value: "3.5", Rule: "must be a positive integer"}
	if got := e.Line(); got != `coderun-rpc: configuration error: CODERUN_MAX_LOG_BYTES="3.5": must be a positive integer` {
		t.Error(got)
	}
}

func writeStub(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSandboxRule(t *testing.T) {
	clearEnv(t)
	t.Setenv(VarPythonBin, "/bin/sh")
	t.Setenv(VarIsolation, "sandbox")
	missing := func() error {
		return errors.New("sandbox isolation needs Landlock, which this kernel does not provide")
	}
	_, err := Load(Options{Probe: fakeProbe, SandboxProbe: missing, InterpreterTrees: fakeTrees})
	var ce *Error
	if !errors.As(err, &ce) || ce.Line() != `coderun-rpc: configuration error: CODERUN_ISOLATION="sandbox": sandbox isolation needs Landlock, which this kernel does not provide` {
		t.Errorf("missing feature: %v", err)
	}
	c, err := Load(Options{Probe: fakeProbe, SandboxProbe: sandboxPresent, InterpreterTrees: fakeTrees})
	if err != nil || c.Isolation != "sandbox" {
		t.Errorf("sandbox with every feature: %v", err)
	}
}

// TestSandboxProbesBesideVersionProbe: the sandbox's two probes run while
// the version probe does (each fake waits for the other two to have
// started), and a failing version probe is reported first, once all three
// have ended.
func TestSandboxProbesBesideVersionProbe(t *testing.T) {
	clearEnv(t)
	t.Setenv(VarPythonBin, "/bin/sh")
	t.Setenv(VarIsolation, "sandbox")
	for _, version := range []string{"cpython 3 12 1\n", "python 2\n"} {
		var all sync.WaitGroup
		all.Add(3)
		ended := make(chan string, 3)
		together := func(name string) error {
			defer func() { ended <- name }()
			all.Done()
			done := make(chan struct{})
			go func() { all.Wait(); close(done) }()
			select {
			case <-done:
				return nil
			case <-time.After(10 * time.Second):
				return errors.New(name + " ran alone")
			}
		}
		c, err := Load(Options{
			Probe: func(path string, args []string, d time.Duration, max int) ([]byte, error) {
				return []byte(version), together("version probe")
			},
			SandboxProbe:     func() error { return together("feature probe") },
			InterpreterTrees: func(string) ([]string, error) { return []string{"/t"}, together("trees") },
		})
		var ce *Error
		switch {
		case len(ended) != 3:
			t.Errorf("%q: Load returned with %d of the 3 probes ended", version, len(ended))
		case version == "python 2\n" && (!errors.As(err, &ce) || ce.Var != VarPythonBin):
			t.Errorf("%q: got %v, want the version probe's verdict", version, err)
		case version != "python 2\n" && (err != nil || c.Isolation != "sandbox" || !slices.Equal(c.PythonTrees, []string{"/t"})):
			t.Errorf("%q: got %v %+v, want tier sandbox with trees [/t]", version, err, c)
		}
	}
}

// TestIsolationAuto: auto is the sandbox where every feature is present,
// else process, flagged for main's warning; the reason says which.
func TestIsolationAuto(t *testing.T) {
	missing := func() error {
		return errors.New("sandbox isolation needs Landlock, which this kernel does not provide")
	}
	for _, tc := range []struct {
		setting string
		probe   func() error
		tier    string
		fell    bool
		reason  string
	}{
		{"auto", missing, "process", true, "auto: sandbox isolation needs Landlock, which this kernel does not provide"},
		{"auto", sandboxPresent, "sandbox", false, "auto: the kernel provides every sandbox feature"},
		{"", missing, "process", true, "auto: sandbox isolation needs Landlock"}, // unset: the default, auto
		{"", sandboxPresent, "sandbox", false, "auto: the kernel provides every sandbox feature"},
		{"process", missing, "process", false, "CODERUN_ISOLATION=process"},
		{"sandbox", sandboxPresent, "sandbox", false, "CODERUN_ISOLATION=sandbox"},
	} {
		clearEnv(t)
		t.Setenv(VarPythonBin, "/bin/sh")
		if tc.setting != "" {
			t.Setenv(VarIsolation, tc.setting)
		}
		c, err := Load(Options{Probe: fakeProbe, SandboxProbe: tc.probe, InterpreterTrees: fakeTrees})
		if err != nil || c.Isolation != tc.tier || c.IsolationFellBack != tc.fell || !strings.HasPrefix(c.IsolationReason, tc.reason) {
			t.Errorf("%s: %v %+v", tc.setting, err, c)
		}
		// The sandbox is granted the trees of the interpreter as located.
		if want := tc.tier == "sandbox"; err == nil && want != slices.Equal(c.PythonTrees, []string{"/bin/sh.trees"}) {
			t.Errorf("%s: tier %s with trees %q", tc.setting, c.Isolation, c.PythonTrees)
		}
	}
}

// TestStartModeRule: auto is fork in both tiers (tier sandbox has a
// sandboxed fork server); an explicit mode is kept.
func TestStartModeRule(t *testing.T) {
	for _, tc := range []struct{ isolation, mode, want, refused string }{
		{"process", "", "fork", ""},
		{"process", "spawn", "spawn", ""},
		{"process", "fork", "fork", ""},
		{"sandbox", "", "fork", ""},
		{"sandbox", "auto", "fork", ""},
		{"sandbox", "fork", "fork", ""},
		{"sandbox", "spawn", "spawn", ""},
	} {
		clearEnv(t)
		t.Setenv(VarPythonBin, "/bin/sh")
		t.Setenv(VarIsolation, tc.isolation)
		if tc.mode != "" {
			t.Setenv(VarStartMode, tc.mode)
		}
		c, err := Load(Options{Probe: fakeProbe, SandboxProbe: sandboxPresent, InterpreterTrees: fakeTrees})
		var ce *Error
		switch {
		case tc.refused != "":
			if !errors.As(err, &ce) || ce.Line() != tc.refused {
				t.Errorf("%s/%s: %v", tc.isolation, tc.mode, err)
			}
		case err != nil || c.StartMode != tc.want:
			t.Errorf("%s/%s: %v %+v, want %s", tc.isolation, tc.mode, err, c, tc.want)
		}
	}
}

// TestHelpListsTable: --help has one line per table variable, in table
// order, naming it with its default and its rule's summary.
func TestHelpListsTable(t *testing.T) {
	var b strings.Builder
	Help(&b)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(table) {
		t.Fatalf("%d help lines for %d variables:\n%s", len(lines), len(table), b.String())
	}
	for i, v := range table {
		fields := strings.Fields(lines[i])
		if fields[0] != v.name || fields[1] != "default" ||
			!strings.Contains(lines[i], " default "+v.def+" ") || !strings.Contains(lines[i], v.rule.summary()) {
			t.Errorf("help line %d %q does not list %s with default %q", i, lines[i], v.name, v.def)
		}
	}
}

// TestEveryVariableValidated: each table variable has a rule that refuses
// a bad value, naming the variable and the value, and every default that is
// not computed passes its own rule.
func TestEveryVariableValidated(t *testing.T) {
	bad := map[string]string{VarCPUSeconds: "0", VarMaxWallMs: "x", VarAddressSpaceMB: "0x10",
		VarMaxLogBytes: "63", VarMaxValueBytes: "67108801", VarMaxFileBytes: "1073741825",
		VarMaxOutputBytes: "0", VarMaxDiskMB: "1048577", VarGraceMs: "-1", VarMaxConcurrentRuns: "0",
		VarMaxQueuedRuns: "-1", VarWarmPool: "1e3", VarIsolation: "docker", VarStartMode: "vfork",
		VarLogLevel: "INFO", VarMCPConfig: "/nonexistent/mcp.json", VarPythonBin: "", VarMaxSessions: "-1", VarSessionIdleMs: "0",
		VarSessionCPUSeconds: "9007199254740991", VarMaxConnections: "0",
		VarMaxRunsPerConnection: "-1", VarMaxSessionsPerConn: "0", VarAuthToken: "two words", VarDrainMs: "0", VarWriteStallMs: "1.5",
		VarTraceContent: "yes"}
	// The upstream MCP servers' bounds (docs/mcp.md §2.5).
	maps.Copy(bad, map[string]string{VarMaxUpstreamBytes: "1073741825", VarMCPMaxPages: "0", VarMCPMaxTools: "-1",
		VarMCPMaxStubBytes: "1e3", VarMCPListMs: "0", VarMCPToolsTTLMs: "x"})
	bad[VarMaxUnauthenticated], bad[VarAuthTimeoutMs], bad[VarMaxUnsentBytes] = "0", "-5", "1099511627777"
	bad[VarMaxUnsentTotal] = "0"
	maps.Copy(bad, badPackageValues) // packages_test.go
	// Egress (docs/containment.md §6).
	maps.Copy(bad, map[string]string{VarEgress: "/nonexistent/egress.json", VarMaxEgressRequests: "0",
		VarMaxEgressBytes: "1099511627777", VarEgressHosts: "a.test=999.1.1.1"})
	bad[VarPreload] = "numpy,,pandas"
	if len(bad) != len(table) {
		t.Errorf("%d bad values for %d variables", len(bad), len(table))
	}
	for _, v := range table {
		value, ok := bad[v.name]
		if !ok {
			t.Errorf("%s: no bad value in this test", v.name)
			continue
		}
		_, err := load(t, map[string]string{v.name: value})
		var ce *Error
		shown := value
		if v.secret {
			shown = hiddenValue // never printed
		}
		if !errors.As(err, &ce) || ce.Var != v.name || ce.Value != shown || ce.Rule == "" {
			t.Errorf("%s=%q: want its configuration error, got %v", v.name, value, err)
		}
		if v.defaultOf == nil {
			if _, err := v.rule.parse(v.def); err != nil {
				t.Errorf("%s: default %q breaks its rule: %v", v.name, v.def, err)
			}
		}
	}
}

// TestEnvconfigNames: envconfig's split_words spelling of the spec built
// from the table is exactly each variable's name, in table order.
func TestEnvconfigNames(t *testing.T) {
	var b strings.Builder
	if err := envconfig.Usagef(Prefix, envSpec().Interface(), &b, "{{range .}}{{usage_key .}}\n{{end}}"); err != nil {
		t.Fatal(err)
	}
	keys := strings.Fields(b.String())
	if len(keys) != len(table) {
		t.Fatalf("envconfig keys %v", keys)
	}
	for i, v := range table {
		if keys[i] != v.name {
			t.Errorf("envconfig reads %s for %s", keys[i], v.name)
		}
	}
}

// A variable one or two edits from a table name is reported with that name;
// one further away, or the table's own, is not.
func TestMisspelled(t *testing.T) {
	c, err := load(t, map[string]string{"CODERUN_MAX_WALLMS": "2000", "CODERUN_CPU_SECOND": "3",
		"CODERUN_ISOLATOIN": "process", "CODERUN_MAX_WALL_MS": "1000", "CODERUN_RPC_BIN": "/x",
		"CODERUN_WHATEVER": "x", "CODERUN_SOAK": "1", "CODERUN_TEST_HEAVY": "1"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range c.Misspelled {
		got[m.Name] = m.Closest
	}
	want := map[string]string{"CODERUN_MAX_WALLMS": VarMaxWallMs, "CODERUN_CPU_SECOND": VarCPUSeconds,
		"CODERUN_ISOLATOIN": VarIsolation}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if line := (Misspelling{Name: "CODERUN_MAX_WALLMS", Closest: VarMaxWallMs}).Line(); line !=
		"CODERUN_MAX_WALLMS is not a coderun-rpc variable and is ignored; did you mean CODERUN_MAX_WALL_MS?" {
		t.Error(line)
	}
}

// TestC806EgressPolicyFile: an invalid policy file is one line naming the
// file, the entry and the rule; a valid one is the configuration's policy.
func TestC806EgressPolicyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "egress.json")
	if err := os.WriteFile(path, []byte(`{"allow": ["api.example.com", "*.com"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := load(t, map[string]string{VarEgress: path})
	var ce *Error
	want := `coderun-rpc: configuration error: CODERUN_EGRESS="` + path + `": allow[1]: a wildcard must be followed by at least two labels (*.example.com)`
	if !errors.As(err, &ce) || ce.Line() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if err := os.WriteFile(path, []byte(`{"allow": ["api.example.com:8443"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := load(t, map[string]string{VarEgress: path, VarEgressHosts: "api.example.com=127.0.0.1"})
	if err != nil || strings.Join(c.Egress.Entries(), ",") != "api.example.com:8443" || c.EgressHosts["api.example.com"].String() != "127.0.0.1" {
		t.Fatalf("valid policy: %v %+v", err, c)
	}
}
