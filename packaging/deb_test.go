package main

import (
	"strings"
	"testing"
	"time"
)

func TestWrapItem(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"short", "  * short\n"},
		{strings.Repeat("word ", 20), "  * word word word word word word word word word word word word word word word\n    word word word word word\n"},
		{strings.Repeat("x", 90), "  * " + strings.Repeat("x", 90) + "\n"},
	} {
		if got := wrapItem(tc.in); got != tc.want {
			t.Errorf("wrapItem(%q) =\n%s\nwant\n%s", tc.in, got, tc.want)
		}
		for _, l := range strings.Split(strings.TrimRight(wrapItem(tc.in), "\n"), "\n") {
			if len(l) > 78 && strings.Contains(strings.TrimSpace(l[3:]), " ") {
				t.Errorf("a line past 78 columns that could wrap: %q", l)
			}
		}
	}
}

// The changelog is Debian's format: a header naming the version, items,
// and the trailer with the maintainer and an RFC 2822 date.
func TestChangelog(t *testing.T) {
	date := time.Date(2026, 12, 3, 4, 18, 22, 0, time.UTC)
	cl := string(changelog("1.2.3+4.gabc", "Someone <someone@example.org>", date))
	lines := strings.Split(strings.TrimRight(cl, "\n"), "\n")
	if lines[0] != "vmspool (1.2.3+4.gabc) unstable; urgency=medium" || lines[1] != "" {
		t.Errorf("header %q", lines[:2])
	}
	if want := " -- Someone <someone@example.org>  Thu, 03 Dec 2026 04:18:22 +0000"; lines[len(lines)-1] != want {
		t.Errorf("trailer %q, want %q", lines[len(lines)-1], want)
	}
	if !strings.HasPrefix(lines[2], "  * ") {
		t.Errorf("no item: %q", lines[2])
	}
}

func TestLicenseName(t *testing.T) {
	for _, tc := range []struct {
		text   string
		name   string
		common bool
	}{
		{"                                 Apache License\n                           Version 2.0, January 2004", "Apache-2.0", true},
		{"The MIT License (MIT)\n\nPermission is hereby granted, free of charge, to any person", "Expat", false},
		{"Redistribution and use in source and binary forms, with or without\nmodification... Neither the name of", "BSD-3-Clause", false},
		{"Redistribution and use in source and binary forms, with or without", "BSD-2-Clause", false},
		{"Mozilla Public License Version 2.0", "MPL-2.0", true},
		{"All rights reserved.", "other", false},
	} {
		if name, common := licenseName([]byte(tc.text)); name != tc.name || common != tc.common {
			t.Errorf("licenseName(%.30q) = %s %v, want %s %v", tc.text, name, common, tc.name, tc.common)
		}
	}
}

func TestCopyrightLines(t *testing.T) {
	bsd := "Copyright (c) 2009 The Go Authors. All rights reserved.\n\n" +
		"   * Redistributions of source code must retain the above\ncopyright notice, this list of conditions\n"
	if got := copyrightLines([]byte(bsd), []byte("Copyright 2015 The Prometheus Authors\n")); strings.Join(got, "|") !=
		"Copyright (c) 2009 The Go Authors. All rights reserved.|Copyright 2015 The Prometheus Authors" {
		t.Errorf("copyrightLines: %q", got)
	}
}

func TestEscapeModulePath(t *testing.T) {
	if got := escapeModulePath("github.com/BurntSushi/toml"); got != "github.com/!burnt!sushi/toml" {
		t.Errorf("escapeModulePath: %q", got)
	}
}
