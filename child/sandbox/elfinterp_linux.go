//go:build linux

package sandbox

import (
	"encoding/binary"
	"io"
	"os"
	"strings"
)

// elfInterp returns the PT_INTERP path of an ELF file (its dynamic
// loader), or "" (not an ELF, no PT_INTERP, unreadable).
func elfInterp(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	return interpOf(f)
}

// interpOf reads the ELF header and the program headers of r, and the
// PT_INTERP segment's text up to its first NUL (at most 4 KiB). It reads
// nothing else: debug/elf would parse every section header too, and its
// package initialisation (and compress/zlib's and debug/dwarf's) would run
// at every start of the init's binary, which calls this once per run.
func interpOf(r io.ReaderAt) string {
	var h [64]byte
	n, _ := r.ReadAt(h[:], 0)
	if n < 52 || string(h[:4]) != "\x7fELF" {
		return ""
	}
	var bo binary.ByteOrder = binary.LittleEndian
	switch h[5] {
	case 1: // ELFDATA2LSB
	case 2: // ELFDATA2MSB
		bo = binary.BigEndian
	default:
		return ""
	}
	// Offsets in the ELF header, and in one program header of
	// p_offset, p_filesz and the header's least size, per class.
	var phoff uint64
	var phentsize, phnum uint16
	var offAt, sizeAt, entryMin int
	switch {
	case h[4] == 2 && n == len(h): // ELFCLASS64
		phoff, phentsize, phnum = bo.Uint64(h[32:]), bo.Uint16(h[54:]), bo.Uint16(h[56:])
		offAt, sizeAt, entryMin = 8, 32, 56
	case h[4] == 1: // ELFCLASS32
		phoff, phentsize, phnum = uint64(bo.Uint32(h[28:])), bo.Uint16(h[42:]), bo.Uint16(h[44:])
		offAt, sizeAt, entryMin = 4, 16, 32
	default:
		return ""
	}
	word := func(b []byte) uint64 {
		if entryMin == 56 {
			return bo.Uint64(b)
		}
		return uint64(bo.Uint32(b))
	}
	size := int(phentsize) * int(phnum)
	if int(phentsize) < entryMin || phoff > 1<<40 || size > 1<<20 {
		return ""
	}
	ph := make([]byte, size)
	if _, err := r.ReadAt(ph, int64(phoff)); err != nil {
		return ""
	}
	for p := ph; len(p) >= int(phentsize); p = p[phentsize:] {
		if bo.Uint32(p) != 3 { // PT_INTERP
			continue
		}
		off := word(p[offAt:])
		if off > 1<<40 {
			return ""
		}
		b := make([]byte, min(word(p[sizeAt:]), 4096))
		if _, err := r.ReadAt(b, int64(off)); err != nil {
			return ""
		}
		s, _, _ := strings.Cut(string(b), "\x00")
		return s
	}
	return ""
}
