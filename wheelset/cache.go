package wheelset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Options configure a Cache.
type Options struct {
	UV     string // the uv binary
	Python string // the interpreter the sets are installed for
	Root   string // the cache's directory, made if missing
	// Index is the package index's URL; "" installs from FindLinks only.
	Index     string
	FindLinks []string // directories or URLs of wheels
	// MaxBytes bounds the published sets together (eviction, least
	// recently used first, never a set a run holds); 0: no bound.
	MaxBytes int64
	Allow    AllowList
	// Timeout bounds one resolution and installation.
	Timeout time.Duration
	// AddressSpace bounds each bytecode compiler's address space (RLIMIT_AS,
	// bytes), as a run's is bounded when its import compiles a source: a
	// source that needs more is left without bytecode; 0: no bound.
	AddressSpace int64
}

// Cache is the content-addressed store of installed package sets
// (docs/packages.md §3). Its directory may be shared by daemons of one
// user: every set is published by one rename, and a set a run uses is
// held by a shared lock that eviction, with an exclusive one, respects.
//
//	sets/<key>       a published set, read-only; key hashes the interpreter and the installed content
//	locks/<key>      the set's lock file; its content is the set's size in bytes
//	requests/<rkey>  the set key a request was resolved to
//	staging/         installations in progress and sets being removed
//
// uv runs without a cache of its own (--no-cache), its temporary files in
// the installation's staging folder: the sets are the cache, and nothing
// else grows, even when an installation is killed.
type Cache struct {
	o       Options
	pyID    string     // the interpreter's identity, hashed into every key
	evictMu sync.Mutex // one eviction pass at a time in this daemon

	mu       sync.Mutex
	resolved map[string]string  // request key → set key
	flights  map[string]*flight // installations under way, by request key
}

// flight is one installation that the callers asking for its request
// share; it is stopped when the last of them stops waiting.
type flight struct {
	done    chan struct{} // closed when key and err are set
	key     string
	err     error
	waiters int // under Cache.mu
	stop    context.CancelFunc
}

// Subdirectories of the cache root.
const (
	dirSets     = "sets"
	dirLocks    = "locks"
	dirRequests = "requests"
	dirStaging  = "staging"
)

// Open makes (or checks) the cache's directories: each must be a directory
// owned by the daemon's user and writable by no one else, since a set in it
// is run by every daemon that shares it.
func Open(o Options) (*Cache, error) {
	if err := ownDir(o.Root); err != nil {
		return nil, err
	}
	for _, d := range []string{dirSets, dirLocks, dirRequests, dirStaging} {
		if err := ownDir(filepath.Join(o.Root, d)); err != nil {
			return nil, err
		}
	}
	id, err := interpreterID(o.Python)
	if err != nil {
		return nil, err
	}
	sweepStaging(filepath.Join(o.Root, dirStaging), 2*o.Timeout)
	return &Cache{o: o, pyID: id, resolved: map[string]string{}, flights: map[string]*flight{}}, nil
}

// ownDir makes dir (0755) if missing and checks that it is a directory,
// not a link, owned by this user and not writable by group or others.
func ownDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("package cache: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("package cache: %w", err)
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.IsDir():
		return fmt.Errorf("package cache: %s is not a directory", dir)
	case sys == nil || int(sys.Uid) != os.Geteuid():
		return fmt.Errorf("package cache: %s is not owned by the daemon's user", dir)
	case st.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("package cache: %s is writable by group or others", dir)
	}
	return nil
}

// sweepStaging removes what daemons killed during an installation or an
// eviction left in staging: entries older than staleAfter, which no
// installation under way can be (each is stopped at its timeout).
func sweepStaging(dir string, staleAfter time.Duration) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleAfter {
			removeTree(filepath.Join(dir, e.Name()))
		}
	}
}

// interpreterID names the interpreter a set was installed for: its real
// path, size and modification time (an upgrade in place changes them).
func interpreterID(python string) (string, error) {
	real, err := filepath.EvalSymlinks(python)
	if err != nil {
		return "", fmt.Errorf("package cache: interpreter: %w", err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("package cache: interpreter: %w", err)
	}
	return real + "\x00" + strconv.FormatInt(st.Size(), 10) + "\x00" + strconv.FormatInt(st.ModTime().UnixNano(), 10), nil
}

// SetsDir is the directory of published sets: tier sandbox grants it
// read-only to every run.
func (c *Cache) SetsDir() string { return filepath.Join(c.o.Root, dirSets) }

// Lease is a run's hold on an installed set: eviction leaves the set alone
// until Release.
type Lease struct {
	// Dir is the set's directory, for sys.path.
	Dir string
	// Installed says this call waited for an installation (its own or one
	// it shared) rather than finding the set cached.
	Installed bool
	c         *Cache
	key       string
	lock      atomic.Pointer[os.File]
}

// Release ends the hold; repeats are no-ops, and it may be called from any
// goroutine.
func (l *Lease) Release() {
	if l == nil {
		return
	}
	if f := l.lock.Swap(nil); f != nil {
		_ = f.Close() // closing drops the flock
	}
}

// Again is another hold on l's set (a session's fork imports from its
// source's set and may outlive it); nil for nil.
func (l *Lease) Again() (*Lease, error) {
	if l == nil {
		return nil, nil
	}
	again, err := l.c.lease(l.key)
	if err == nil && again == nil {
		err = errors.New("package cache: the set of the session was removed")
	}
	return again, err
}

// InstallError is a resolution or installation failure, in one line that
// names the requested packages and uv's reason.
type InstallError struct{ Msg string }

func (e *InstallError) Error() string { return e.Msg }

// maxAttempts bounds how often Acquire looks again for a set evicted
// between its lookup and its lock.
const maxAttempts = 3

// Acquire returns a lease on the set that satisfies reqs (validated, and
// allowed by the allow-list), installing it first unless cached. Concurrent
// calls for one request share one installation; ctx ends this caller's
// wait, and the installation with the last caller's. A failure to resolve or
// install is an *InstallError.
func (c *Cache) Acquire(ctx context.Context, reqs []Requirement) (*Lease, error) {
	rkey := c.requestKey(reqs)
	for range maxAttempts {
		key, cached := c.lookup(rkey)
		if !cached {
			var err error
			if key, err = c.await(ctx, reqs, rkey); err != nil {
				return nil, err
			}
		}
		lease, err := c.lease(key)
		if err != nil {
			return nil, err
		}
		if lease != nil {
			lease.Installed = !cached
			return lease, nil
		}
		c.forget(rkey) // evicted between lookup and lock: resolve again
	}
	return nil, &InstallError{Msg: "packages " + listOf(reqs) + ": the installed set was evicted again and again; try again"}
}

// await joins the installation of rkey (starting it if none is under way)
// and waits for it or for ctx; the installation is stopped when its last
// caller stops waiting.
func (c *Cache) await(ctx context.Context, reqs []Requirement, rkey string) (string, error) {
	c.mu.Lock()
	f := c.flights[rkey]
	if f == nil {
		installCtx, stop := context.WithTimeout(context.Background(), c.o.Timeout)
		f = &flight{done: make(chan struct{}), stop: stop}
		c.flights[rkey] = f
		go func() {
			defer stop()
			key, err := c.install(installCtx, reqs, rkey)
			c.mu.Lock()
			f.key, f.err = key, err
			if c.flights[rkey] == f {
				delete(c.flights, rkey)
			}
			c.mu.Unlock()
			close(f.done)
		}()
	}
	f.waiters++
	c.mu.Unlock()
	select {
	case <-f.done:
		c.leave(rkey, f)
		return f.key, f.err
	case <-ctx.Done():
		c.leave(rkey, f)
		return "", ctx.Err()
	}
}

// leave counts a caller of f gone; the last one stops an unfinished
// installation, which a later request then starts afresh.
func (c *Cache) leave(rkey string, f *flight) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.waiters--; f.waiters > 0 {
		return
	}
	select {
	case <-f.done:
	default:
		f.stop()
		if c.flights[rkey] == f {
			delete(c.flights, rkey)
		}
	}
}

// requestKey hashes what decides a resolution: the interpreter, the
// sources, the allow-list's constraints and the sorted requests.
func (c *Cache) requestKey(reqs []Requirement) string {
	lines := []string{"request", c.pyID, "index=" + c.o.Index}
	for _, f := range c.o.FindLinks {
		lines = append(lines, "find-links="+f)
	}
	for _, r := range c.o.Allow.Constraints() {
		lines = append(lines, "constraint="+r.String())
	}
	rs := make([]string, len(reqs))
	for i, r := range reqs {
		rs[i] = "require=" + r.String()
	}
	slices.Sort(rs)
	return hashLines(append(lines, rs...))
}

func hashLines(lines []string) string {
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// lookup finds the set a request was resolved to, in memory or on disk.
func (c *Cache) lookup(rkey string) (string, bool) {
	c.mu.Lock()
	key, ok := c.resolved[rkey]
	c.mu.Unlock()
	if ok {
		return key, true
	}
	b, err := os.ReadFile(filepath.Join(c.o.Root, dirRequests, rkey))
	if err != nil || !isKey(string(b)) {
		return "", false
	}
	c.remember(rkey, string(b))
	return string(b), true
}

func (c *Cache) remember(rkey, key string) {
	c.mu.Lock()
	c.resolved[rkey] = key
	c.mu.Unlock()
}

func (c *Cache) forget(rkey string) {
	c.mu.Lock()
	delete(c.resolved, rkey)
	c.mu.Unlock()
	_ = os.Remove(filepath.Join(c.o.Root, dirRequests, rkey))
}

// isKey: 64 lower-case hex digits, so a key read from disk names a file
// inside the cache and nothing else.
func isKey(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// lease takes a shared lock on the set key and checks that the set is
// still published and sealed (nil, nil: it is gone).
func (c *Cache) lease(key string) (*Lease, error) {
	f, err := os.OpenFile(filepath.Join(c.o.Root, dirLocks, key), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("package cache: %w", err)
	}
	if err := flock(f, syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, fmt.Errorf("package cache: %w", err)
	}
	dir := filepath.Join(c.SetsDir(), key)
	st, err := os.Lstat(dir)
	if err != nil {
		f.Close()
		return nil, nil
	}
	if err := sealedDir(st); err != nil {
		f.Close()
		return nil, fmt.Errorf("package cache: set %s: %w", key, err)
	}
	now := time.Now()
	_ = os.Chtimes(f.Name(), now, now) // least recently used goes first
	l := &Lease{Dir: dir, c: c, key: key}
	l.lock.Store(f)
	return l, nil
}

// sealedDir checks a published set's directory: this user's, read-only.
func sealedDir(st fs.FileInfo) error {
	sys, _ := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.IsDir():
		return errors.New("not a directory")
	case sys == nil || int(sys.Uid) != os.Geteuid():
		return errors.New("not owned by the daemon's user")
	case st.Mode().Perm()&0o222 != 0:
		return errors.New("writable")
	}
	return nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

func listOf(reqs []Requirement) string {
	s := make([]string, len(reqs))
	for i, r := range reqs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}
