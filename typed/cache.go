package typed

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
)

// Default bounds of the package cache: enough for a host that sends a few
// hundred bindings on every run, small enough to be irrelevant to memory.
const (
	DefaultCacheEntries = 4096
	DefaultCacheBytes   = 64 << 20 // estimated memory of the cached functions
)

// A compiled function holds about 35 bytes per byte of its declaration
// (measured: 1000 one-kilobyte declarations keep 25 MB); an alias entry
// holds only a key.
const (
	retainedPerByte = 40
	aliasCost       = 128
)

// Cache holds compiled functions keyed by the SHA-256 of their declaration's
// compact JSON text (and of the text as sent, when that differs, so a repeat
// costs one hash and no compaction), least recently used evicted first,
// bounded both in entries and in estimated memory. Only successes are cached (an error names
// the caller's path). Safe for concurrent use; a miss compiles outside the
// lock, so two runs missing on the same declaration may both compile it.
type Cache struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int
	bytes      int
	order      list.List // of *cached, most recent at the front
	byKey      map[[sha256.Size]byte]*list.Element
}

type cached struct {
	key  [sha256.Size]byte
	size int
	fn   *Function
}

// NewCache returns an empty cache holding at most maxEntries functions whose
// estimated memory (40 bytes per byte of declaration) sums to at most
// maxBytes.
func NewCache(maxEntries, maxBytes int) *Cache {
	return &Cache{maxEntries: maxEntries, maxBytes: maxBytes, byKey: map[[sha256.Size]byte]*list.Element{}}
}

var shared = NewCache(DefaultCacheEntries, DefaultCacheBytes)

// Compile is Cache.Compile on the package's shared cache.
func Compile(path string, entry []byte) (*Function, error) { return shared.Compile(path, entry) }

// Compile returns the function one functions entry declares (a string name
// or an object, docs/protocol-typed.md §10.1), compiling it on a miss. path is the entry's
// location in the request (e.g. "bindings[0].functions[1]"); every error
// starts with it, or with path plus the member at fault
// ("bindings[0].functions[1].parameters: ...").
func (c *Cache) Compile(path string, entry []byte) (*Function, error) {
	entry = bytes.TrimSpace(entry)
	asSent := sha256.Sum256(entry)
	if fn := c.get(asSent); fn != nil {
		return fn, nil // the usual case: a host sends the same bytes every run
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, entry); err != nil {
		return nil, fmt.Errorf("%s: %v", path, syntaxError(err))
	}
	canonical := sha256.Sum256(compact.Bytes())
	fn := c.get(canonical)
	if fn == nil {
		var err error
		if fn, err = compileEntry(path, compact.Bytes()); err != nil {
			return nil, err
		}
		c.put(canonical, compact.Len()*retainedPerByte, fn)
	}
	if asSent != canonical {
		c.put(asSent, aliasCost, fn)
	}
	return fn, nil
}

func (c *Cache) get(key [sha256.Size]byte) *Function {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*cached).fn
}

func (c *Cache) put(key [sha256.Size]byte, size int, fn *Function) {
	if size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok {
		return
	}
	c.byKey[key] = c.order.PushFront(&cached{key: key, size: size, fn: fn})
	c.bytes += size
	for c.order.Len() > c.maxEntries || c.bytes > c.maxBytes {
		oldest := c.order.Remove(c.order.Back()).(*cached)
		delete(c.byKey, oldest.key)
		c.bytes -= oldest.size
	}
}

// Len is the number of cached functions.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
