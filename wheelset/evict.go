package wheelset

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cachedSet is one published set as eviction sees it.
type cachedSet struct {
	key  string
	size int64
	used time.Time // the lock file's modification time: the last lease
}

// evict removes least recently used sets until the published ones fit
// MaxBytes, never keep (the set just installed) and never a set whose lock
// another holder has: a run, of this daemon or another, that uses it.
func (c *Cache) evict(keep string) {
	if c.o.MaxBytes <= 0 {
		return
	}
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	sets, total := c.published()
	slices.SortFunc(sets, func(a, b cachedSet) int { return a.used.Compare(b.used) })
	for _, s := range sets {
		if total <= c.o.MaxBytes {
			return
		}
		if s.key != keep && c.remove(s.key) {
			total -= s.size
		}
	}
}

// published lists the published sets and their total size.
func (c *Cache) published() ([]cachedSet, int64) {
	entries, err := os.ReadDir(c.SetsDir())
	if err != nil {
		return nil, 0
	}
	var sets []cachedSet
	var total int64
	for _, e := range entries {
		if !isKey(e.Name()) {
			continue
		}
		lock := filepath.Join(c.o.Root, dirLocks, e.Name())
		st, err := os.Lstat(lock)
		if err != nil {
			continue // published by a daemon that has not written its size yet
		}
		b, _ := os.ReadFile(lock)
		size, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		sets = append(sets, cachedSet{key: e.Name(), size: max(size, 0), used: st.ModTime()})
		total += max(size, 0)
	}
	return sets, total
}

// remove evicts one set when no one holds it: under its exclusive lock
// the set is renamed into staging (so it vanishes at once for every
// reader), then deleted. The lock file stays: a lease taken on it later
// must lock the same file eviction would.
func (c *Cache) remove(key string) bool {
	f, err := os.OpenFile(filepath.Join(c.o.Root, dirLocks, key), os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if flock(f, syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false // in use
	}
	gone, err := os.MkdirTemp(filepath.Join(c.o.Root, dirStaging), "evict-")
	if err != nil {
		return false
	}
	defer removeTree(gone)
	return os.Rename(filepath.Join(c.SetsDir(), key), filepath.Join(gone, "set")) == nil
}
