package typed

import (
	"fmt"
	"testing"
)

// benchEntry is a typed function of realistic size: a handful of
// parameters, a nested object, a titled result.
func benchEntry(i int) string {
	return fmt.Sprintf(`{"name":"fn%d","description":"Function %d does a thing.","parameters":{"type":"object",
		"properties":{"q":{"type":"string","description":"the query","minLength":1},"limit":{"type":"integer","minimum":1,"maximum":100,"default":10},
		"filters":{"type":"object","properties":{"lang":{"enum":["en","fr","de"]},"since":{"type":"string","format":"date"}},"required":["lang"]},
		"tags":{"type":"array","items":{"type":"string"}},"exact":{"type":"boolean","default":false}},"required":["q"]},
		"returns":{"type":"object","properties":{"hits":{"type":"array","items":{"type":"object","properties":{"url":{"type":"string"},"score":{"type":"number"}},"required":["url"]}},"total":{"type":"integer"}},"required":["hits","total"]}}`, i, i)
}

// BenchmarkRunWarm50 is one run's work in this package with a warm cache:
// 50 typed functions looked up and their methods for the child fetched
// (budget: 0.5 ms per run).
func BenchmarkRunWarm50(b *testing.B) {
	c := NewCache(DefaultCacheEntries, DefaultCacheBytes)
	entries := make([][]byte, 50)
	for i := range entries {
		entries[i] = []byte(benchEntry(i))
		if _, err := c.Compile("p", entries[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, e := range entries {
			f, err := c.Compile("p", e)
			if err != nil {
				b.Fatal(err)
			}
			_ = f.Method("tools")
		}
	}
}

func BenchmarkCompileCold(b *testing.B) {
	entry := []byte(benchEntry(0))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewCache(1, 1<<20).Compile("p", entry); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckArgs and BenchmarkCheckResult: one check of a small object
// (budget: 5 µs each).
func BenchmarkCheckArgs(b *testing.B) {
	f := mustCompile(b, benchEntry(0))
	args := []byte(`{"q":"golang","limit":20,"filters":{"lang":"en"},"tags":["a","b"],"exact":true}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := f.CheckArgs(args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckResult(b *testing.B) {
	f := mustCompile(b, benchEntry(0))
	value := []byte(`{"hits":[{"url":"https://a","score":1.5},{"url":"https://b"}],"total":2}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := f.CheckResult(value); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRender50: the stubs of 50 typed functions with nested schemas
// (budget: 5 ms).
func BenchmarkRender50(b *testing.B) {
	fns := make([]*Function, 50)
	for i := range fns {
		fns[i] = mustCompile(b, benchEntry(i))
	}
	ns := []Namespace{{Global: "tools", Functions: fns[:25]}, {Global: "web_api", Functions: fns[25:]}}
	b.ReportAllocs()
	for b.Loop() {
		Render(testLimits, "3.11", ns)
	}
}
