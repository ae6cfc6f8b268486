//go:build linux

package sandbox

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The trees a Config grants are the daemon's to choose (session builds
// them); these helpers keep two kinds of path out of them — the daemon's
// own executable and the parent of the run directories — without losing
// what lies beside them.

// maxCarveDepth bounds how deep Carve descends towards a private path; a
// path deeper than that below a granted tree leaves the deeper parts of the
// tree ungranted rather than granting the path.
const maxCarveDepth = 16

// Carve is trees with each tree that holds a private path carved: the
// parts to grant read-only, and the folders carved around a private path,
// to grant listing only (the import system lists a package's folder).
func Carve(trees, private []string) (read, list []string) {
	for _, t := range trees {
		read, list = carve(t, private, 0, read, list)
	}
	return read, list
}

// carve appends tree to read when it holds no private path; else it appends
// tree to list and carves each of its entries in turn, so that everything
// of tree is granted but the private paths. Symbolic links among the entries
// are left out: a Landlock rule is opened through its path, so a link would
// grant its target; a link inside a granted part still resolves there at
// access time. A folder that cannot be listed grants nothing of it.
func carve(tree string, private []string, depth int, read, list []string) ([]string, []string) {
	inside := within(tree, private)
	if len(inside) == 0 {
		return append(read, tree), list
	}
	if depth >= maxCarveDepth || slices.Contains(inside, filepath.Clean(tree)) {
		return read, list
	}
	entries, err := os.ReadDir(tree)
	if err != nil {
		return read, list
	}
	list = append(list, tree)
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 {
			read, list = carve(filepath.Join(tree, e.Name()), inside, depth+1, read, list)
		}
	}
	return read, list
}

// within is the paths of private that tree contains (tree itself included).
func within(tree string, private []string) []string {
	var in []string
	for _, p := range private {
		if contains(tree, p) {
			in = append(in, filepath.Clean(p))
		}
	}
	return in
}

// WithoutAncestors drops every tree that contains one of the private paths.
func WithoutAncestors(trees, private []string) []string {
	out := trees[:0]
	for _, t := range trees {
		if !containsAny(t, private) {
			out = append(out, t)
		}
	}
	return out
}

func containsAny(tree string, paths []string) bool {
	return slices.ContainsFunc(paths, func(p string) bool { return contains(tree, p) })
}

// contains reports whether path is tree or lies below it.
func contains(tree, path string) bool {
	rel, err := filepath.Rel(tree, filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
