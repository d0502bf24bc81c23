package spool

import (
	"strings"
	"unicode/utf8"
)

// Printable returns s as a terminal may show it: every control character
// (C0, DEL, C1), every character that reorders the text around it (the
// bidirectional marks, embeddings, overrides and isolates) and every byte
// that is not UTF-8 is written as a Go escape (\n, \x1b, \u009b, \u202e,
// \xff); all else, a backslash too, is left as it is.
//
// Text of the tree is anyone's who may write the spool (a job's status,
// a question, a document planted by hand): printed raw, a status of
// "done\x1b]52;c;...\a" sets the operator's clipboard and "\x1b[2J"
// clears the screen. It is the one escaper of what the commands print for
// people (spool ls, show, fsck, gc, the commands' errors, watchd follow);
// their --json output is for programs, which decode it: JSON escapes C0
// by itself, and leaves DEL and C1 to its reader.
func Printable(s string) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			writeEscape(&b, 'x', rune(s[i]), 2)
		case !hidden(r):
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			writeEscape(&b, 'x', r, 2)
		default:
			writeEscape(&b, 'u', r, 4)
		}
		i += size
	}
	return b.String()
}

// hidden says whether r does something on a terminal other than show a
// character: a control (C0, DEL, C1), or a bidirectional mark, embedding,
// override or isolate, which reorders the text around it (U+061C,
// U+200E-U+200F, U+202A-U+202E, U+2066-U+2069).
func hidden(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// writeEscape writes r as \<kind> and digits hexadecimal digits.
func writeEscape(b *strings.Builder, kind byte, r rune, digits int) {
	const hex = "0123456789abcdef"
	b.WriteByte('\\')
	b.WriteByte(kind)
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		b.WriteByte(hex[(r>>shift)&0xf])
	}
}
