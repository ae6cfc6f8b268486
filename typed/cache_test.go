package typed

import (
	"fmt"
	"sync"
	"testing"
)

func TestCacheReturnsTheSameFunctionForTheSameContent(t *testing.T) {
	c := NewCache(8, 1<<20)
	a, err := c.Compile("x", []byte(`{"name":"f","returns":{"type":"string"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Compile("y", []byte(" {\n \"name\" : \"f\", \"returns\": {\"type\": \"string\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a != b || c.Len() != 2 { // the compact key and the as-sent alias
		t.Fatalf("same content compiled twice (len %d)", c.Len())
	}
	other, _ := c.Compile("z", []byte(`{"name":"f","returns":{"type":"integer"}}`))
	if other == a || c.Len() != 3 {
		t.Fatal("different content shared a function")
	}
}

func TestCacheIsBounded(t *testing.T) {
	c := NewCache(3, 1<<20)
	entry := func(i int) []byte { return []byte(fmt.Sprintf(`{"name":"f%d"}`, i)) }
	first, _ := c.Compile("p", entry(0))
	for i := 1; i < 10; i++ {
		if _, err := c.Compile("p", entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if c.Len() != 3 {
		t.Fatalf("Len = %d, want 3", c.Len())
	}
	if again, _ := c.Compile("p", entry(0)); again == first {
		t.Fatal("evicted entry still served")
	}

	small := NewCache(100, 40*40) // room for 40 bytes of declarations
	for i := range 10 {
		small.Compile("p", entry(i))
	}
	if small.Len() != 3 { // each entry is 12-13 bytes
		t.Fatalf("byte-bounded Len = %d, want 3", small.Len())
	}
}

func TestCacheErrorsAreNotCached(t *testing.T) {
	c := NewCache(8, 1<<20)
	for _, p := range []string{"a", "b"} {
		_, err := c.Compile(p, []byte(`{"name":"f","parameters":{}}`))
		if err == nil || err.Error()[:1] != p {
			t.Fatalf("error %v does not start with path %s", err, p)
		}
	}
	if c.Len() != 0 {
		t.Fatal("an error was cached")
	}
}

func TestCacheConcurrentUse(t *testing.T) {
	c := NewCache(4, 1<<20)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				f, err := c.Compile("p", []byte(fmt.Sprintf(`{"name":"f%d","parameters":{"type":"object"}}`, (g+i)%6)))
				if err != nil {
					t.Error(err)
					return
				}
				if err := f.CheckArgs([]byte(`{}`)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if c.Len() > 4 {
		t.Fatalf("Len = %d over bound", c.Len())
	}
}
