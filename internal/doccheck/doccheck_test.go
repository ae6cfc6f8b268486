// Package doccheck holds the checks of the repository's Markdown: every
// relative link leads to a file (and a heading, when it names one), every
// reference page under docs/ stays readable in one sitting, and nothing
// points outside the repository.
package doccheck

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

const root = "../.."

// skipped are trees that are not the repository's own text: installed
// packages, build output, the project's virtual environment.
var skipped = map[string]bool{".git": true, "node_modules": true, ".venv": true, "bin": true, "dist": true, "__pycache__": true}

// walk calls f with the repository-relative path of every regular file
// outside the skipped trees.
func walk(t *testing.T, f func(rel string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skipped[d.Name()] {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			f(filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func markdownFiles(t *testing.T) []string {
	var out []string
	walk(t, func(rel string) {
		if strings.HasSuffix(rel, ".md") {
			out = append(out, rel)
		}
	})
	return out
}

var (
	link      = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	fence     = regexp.MustCompile("(?m)^\\s*```[^\\n]*\\n(?s:.*?)^\\s*```")
	codeSpan  = regexp.MustCompile("`[^`\\n]*`")
	heading   = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	hasScheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// prose is a Markdown text without its code blocks and code spans, where
// a "](x)" is not a link.
func prose(text string) string {
	return codeSpan.ReplaceAllString(fence.ReplaceAllString(text, ""), "")
}

// anchors are the heading anchors GitHub gives a Markdown text: lower case,
// punctuation dropped, spaces as hyphens, "-1", "-2"… after a repeat.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a += "-" + itoa(n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// TestRelativeLinks: every relative link of every Markdown file leads to a
// file or directory of the repository, and to a heading of it when it
// names one.
func TestRelativeLinks(t *testing.T) {
	texts := map[string]string{}
	read := func(rel string) string {
		if s, ok := texts[rel]; ok {
			return s
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		texts[rel] = string(b)
		return texts[rel]
	}
	for _, md := range markdownFiles(t) {
		for _, m := range link.FindAllStringSubmatch(prose(read(md)), -1) {
			target := m[1]
			if hasScheme.MatchString(target) {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			rel := md
			if file != "" {
				rel = filepath.ToSlash(filepath.Join(filepath.Dir(md), file))
				if strings.HasPrefix(rel, "../") {
					t.Errorf("%s: link %q leaves the repository", md, target)
					continue
				}
				fi, err := os.Stat(filepath.Join(root, rel))
				if err != nil {
					t.Errorf("%s: link %q: no such file", md, target)
					continue
				}
				if fi.IsDir() || !strings.HasSuffix(rel, ".md") {
					if anchor != "" && !fi.IsDir() {
						t.Errorf("%s: link %q names a heading of a file that is not Markdown", md, target)
					}
					continue
				}
			}
			if anchor != "" && !anchors(read(rel))[anchor] {
				t.Errorf("%s: link %q: %s has no heading with that anchor", md, target, rel)
			}
		}
	}
}

// maxReferencePage is the most a page of docs/ may hold: a reference page
// a reader takes in one sitting.
const maxReferencePage = 40 << 10

// TestReferencePagesAreShort: every page under docs/ is at most 40 KiB.
func TestReferencePagesAreShort(t *testing.T) {
	for _, md := range markdownFiles(t) {
		if !strings.HasPrefix(md, "docs/") {
			continue
		}
		fi, err := os.Stat(filepath.Join(root, md))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > maxReferencePage {
			t.Errorf("%s is %d bytes, over the %d of a reference page: split it by topic", md, fi.Size(), maxReferencePage)
		}
	}
}

// TestNothingPointsOutside: no file of the repository names the directory
// beside it that only its authors' machine has.
func TestNothingPointsOutside(t *testing.T) {
	outside := []byte("../" + "shared")
	walk(t, func(rel string) {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, outside) {
			t.Errorf("%s names %s", rel, outside)
		}
	})
}
