package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// ProbeFunc runs argv (path + args) with the daemon's environment and working
// directory, kills its process group at the deadline and keeps at most maxOut
// bytes of stdout (child.Probe's signature).
type ProbeFunc func(path string, args []string, deadline time.Duration, maxOut int) ([]byte, error)

// ProbeArgs is the version probe's argv after the interpreter (docs/configuration.md §3 step 3).
var ProbeArgs = []string{"-I", "-c",
	"import sys; print(sys.implementation.name, *sys.version_info[:3]); print(sys.executable)"}

func (o Options) probe() ProbeFunc {
	if o.Probe != nil {
		return o.Probe
	}
	return defaultProbe
}

// minPython is the oldest CPython served (docs/configuration.md §3 step 3).
var minPython = [2]uint64{3, 10}

var minPythonText = strconv.FormatUint(minPython[0], 10) + "." + strconv.FormatUint(minPython[1], 10)

var versionLine = regexp.MustCompile(`^(\S+) (\d+) (\d+) (\d+)$`)

// probePython is docs/configuration.md §3 step 3 once locatePython has
// found value at abs: probe the version, follow a shim to the interpreter
// it reports.
func probePython(value, abs string, probe ProbeFunc) (exe, version string, err error) {
	fail := func(rule string) (string, string, error) {
		return "", "", &Error{Var: VarPythonBin, Value: value, Rule: rule}
	}
	out, perr := probe(abs, ProbeArgs, protocol.ProbeDeadline, protocol.ProbeOutputKept)
	q := strconv.Quote(abs)
	if perr != nil {
		return fail("interpreter " + q + " failed the CPython version probe: " + perr.Error())
	}
	first, rest, _ := strings.Cut(string(out), "\n")
	m := versionLine.FindStringSubmatch(strings.TrimRight(first, " \t\r\n\v\f"))
	if m == nil {
		return fail("interpreter " + q + " did not report a CPython version")
	}
	impl := m[1]
	var v [3]uint64
	for i := range v {
		n, err := strconv.ParseUint(m[i+2], 10, 32)
		if err != nil {
			return fail("interpreter " + q + " did not report a CPython version")
		}
		v[i] = n
	}
	version = strconv.FormatUint(v[0], 10) + "." + strconv.FormatUint(v[1], 10) + "." + strconv.FormatUint(v[2], 10)
	if impl != "cpython" {
		return fail("interpreter " + q + " must be CPython, got " + impl)
	}
	if v[0] < minPython[0] || (v[0] == minPython[0] && v[1] < minPython[1]) {
		return fail("interpreter " + q + " must be CPython " + minPythonText + " or newer, got " + impl + " " + version)
	}
	return shimTarget(abs, rest), version, nil
}

// shimTarget returns the probe's second line when it is a complete line
// holding an absolute path to an executable regular file, else abs.
func shimTarget(abs, rest string) string {
	line, _, complete := strings.Cut(rest, "\n")
	line = strings.TrimSuffix(line, "\r")
	if complete && filepath.IsAbs(line) && isExecutableFile(line) {
		return line
	}
	return abs
}

// locatePython returns the absolute interpreter path, or the rule it breaks.
func locatePython(value string) (string, string) {
	if value == "" {
		return "", "must be a non-empty path"
	}
	if strings.Contains(value, "/") {
		p := value
		if !filepath.IsAbs(p) {
			wd, err := os.Getwd()
			if err != nil {
				return "", "is not an executable regular file"
			}
			p = filepath.Join(wd, p) // lexical: symlinks are kept
		}
		if !isExecutableFile(p) {
			return "", "is not an executable regular file"
		}
		return p, ""
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if p := filepath.Join(dir, value); isExecutableFile(p) {
			return p, ""
		}
	}
	return "", "does not resolve on PATH"
}

func isExecutableFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
