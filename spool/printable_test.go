package spool

import (
	"testing"
	"unicode/utf8"
)

// What a terminal would act on is escaped; what it only shows is kept.
func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"step 12", "step 12"},
		{`C:\dir and \x1b as typed`, `C:\dir and \x1b as typed`},
		{"héllo, 世界 👋🏽", "héllo, 世界 👋🏽"},
		// The clipboard, the screen, the title, a bell.
		{"done\x1b]52;c;ZWNobyBoaQ==\a\x1b[2J", `done\x1b]52;c;ZWNobyBoaQ==\x07\x1b[2J`},
		{"\x1b]0;title\x1b\\", `\x1b]0;title\x1b\`},
		{"a\nb\rc\td", `a\nb\rc\td`},
		{"\x00\x7f", `\x00\x7f`},
		// C1 as UTF-8 (CSI, OSC), and as lone bytes.
		{"\u009b2J\u009d", `\u009b2J\u009d`},
		{"\x9b2J\xff", `\x9b2J\xff`},
		// Text that reorders itself.
		{"abc\u202edcb\u2066x\u2069\u200f", `abc\u202edcb\u2066x\u2069\u200f`},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// Whatever the input, the output holds nothing a terminal acts on and is
// valid UTF-8.
func FuzzPrintable(f *testing.F) {
	f.Add("done\x1b]52;c;x\a\x1b[2J")
	f.Add("\xc2\x9b\xe2\x80\xae\xff")
	f.Fuzz(func(t *testing.T, s string) {
		p := Printable(s)
		if !utf8.ValidString(p) {
			t.Fatalf("Printable(%q) = %q: not UTF-8", s, p)
		}
		for _, r := range p {
			if hidden(r) {
				t.Fatalf("Printable(%q) = %q: holds %U", s, p, r)
			}
		}
	})
}
