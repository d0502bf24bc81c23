package main

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The binaries are static Go programs: each holds, besides vmspool's own
// code, the Go standard library and the modules it imports, and their
// licenses ask that their notices come with the binary. So the copyright
// file is written at build time from the binaries themselves: the
// modules their build information names (as `go version -m` lists them),
// each with the license file of its source in the module cache. Licenses
// Debian keeps in /usr/share/common-licenses (Apache-2.0, MPL-2.0) are
// named there, as Debian asks, with the module's NOTICE; the others are
// quoted whole.

const dep5 = "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"

// notYetLicensed stands for vmspool's own license while the project has
// none: the packager says so rather than guessing one.
const notYetLicensed = `License: not-yet-chosen
 The vmspool authors have not published a license for vmspool yet; when
 they add a LICENSE file to the project, the package's copyright file
 carries it.
`

type module struct {
	path, version string
	dir           string // its source, in the module cache
}

// linkedModules reads the modules compiled into the binaries.
func linkedModules(bins []string) ([]module, error) {
	cache, err := goEnv("GOMODCACHE")
	if err != nil {
		return nil, err
	}
	seen := map[string]module{}
	for _, bin := range bins {
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", bin, err)
		}
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			dir := filepath.Join(cache, escapeModulePath(d.Path)+"@"+d.Version)
			if strings.HasPrefix(d.Version, "v0.0.0-") || d.Version == "" || d.Version == "(devel)" {
				if d.Replace != nil && filepath.IsAbs(d.Path) {
					dir = d.Path
				}
			}
			seen[d.Path] = module{path: d.Path, version: d.Version, dir: dir}
		}
	}
	var mods []module
	for _, m := range seen {
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].path < mods[j].path })
	return mods, nil
}

// escapeModulePath is the module cache's spelling of a path: an upper
// case letter is ! and the letter in lower case.
func escapeModulePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// licenseFile finds the license of the source in dir.
func licenseFile(dir string) ([]byte, error) {
	for _, name := range []string{"LICENSE", "LICENSE.txt", "LICENSE.md", "LICENCE", "COPYING"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%s: no LICENSE file", dir)
}

// licenseName names a license text as the copyright format does, and
// says whether Debian keeps its text in /usr/share/common-licenses.
func licenseName(text []byte) (name string, common bool) {
	t := string(bytes.Join(bytes.Fields(text), []byte(" ")))
	switch {
	case strings.Contains(t, "Apache License") && strings.Contains(t, "Version 2.0"):
		return "Apache-2.0", true
	case strings.Contains(t, "Mozilla Public License") && strings.Contains(t, "2.0"):
		return "MPL-2.0", true
	case strings.Contains(t, "Permission is hereby granted, free of charge"):
		return "Expat", false
	case strings.Contains(t, "Redistribution and use in source and binary forms") && strings.Contains(t, "Neither the name"):
		return "BSD-3-Clause", false
	case strings.Contains(t, "Redistribution and use in source and binary forms"):
		return "BSD-2-Clause", false
	}
	return "other", false
}

var copyrightLine = regexp.MustCompile(`^Copyright\s*(\([cC]\)|©)?\s*[0-9]`)

// copyrightLines are the "Copyright ..." lines of a license or notice.
func copyrightLines(texts ...[]byte) []string {
	var lines []string
	seen := map[string]bool{}
	for _, text := range texts {
		for _, l := range strings.Split(string(text), "\n") {
			l = strings.TrimSpace(l)
			if copyrightLine.MatchString(l) && !seen[l] {
				seen[l] = true
				lines = append(lines, l)
			}
		}
	}
	return lines
}

// field writes a multi-line field's continuation: each line after a
// space, an empty line as " .".
func field(text string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		l = strings.TrimRight(l, " \t\r")
		if l == "" {
			l = "."
		}
		b.WriteString(" " + l + "\n")
	}
	return b.String()
}

// licenseParagraph is the License: field (and its text) of a Files: paragraph.
func licenseParagraph(text []byte) string {
	name, common := licenseName(text)
	if common {
		return fmt.Sprintf("License: %s\n On Debian systems the full text of this license is in\n /usr/share/common-licenses/%s.\n", name, name)
	}
	return "License: " + name + "\n" + field(string(text))
}

// copyrightFile writes the copyright file for the binaries. top is the
// checkout, whose LICENSE (when there is one) is vmspool's own.
func copyrightFile(top string, bins []string) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Format: %s\nUpstream-Name: vmspool\n", dep5)
	b.WriteString("Comment: The programs in /usr/bin are statically linked Go binaries: they\n" +
		" hold, besides vmspool's own code, the Go standard library and the Go\n" +
		" modules below, each under its own license. This file is written when the\n" +
		" package is built, from the binaries' build information and each module's\n" +
		" license file.\n\n")
	b.WriteString("Files: *\nCopyright: The vmspool authors\n")
	if own, err := os.ReadFile(filepath.Join(top, "LICENSE")); err == nil {
		b.WriteString(licenseParagraph(own))
	} else {
		b.WriteString(notYetLicensed)
	}

	goroot, err := goEnv("GOROOT")
	if err != nil {
		return nil, err
	}
	std, err := licenseFile(goroot)
	if err != nil {
		return nil, fmt.Errorf("the Go standard library's license: %w", err)
	}
	writeFiles(&b, "the Go standard library (compiled into /usr/bin/*)", "The Go Authors", std, nil)

	mods, err := linkedModules(bins)
	if err != nil {
		return nil, err
	}
	for _, m := range mods {
		lic, err := licenseFile(m.dir)
		if err != nil {
			return nil, fmt.Errorf("module %s %s: %w (its source is read from the module cache: run go mod download)", m.path, m.version, err)
		}
		notice, _ := os.ReadFile(filepath.Join(m.dir, "NOTICE"))
		writeFiles(&b, fmt.Sprintf("Go module %s %s (compiled into /usr/bin/*)", m.path, m.version),
			"the authors of "+m.path, lic, notice)
	}
	return b.Bytes(), nil
}

// writeFiles writes a Files: paragraph; authors stands in for the
// copyright lines when neither the license nor the notice has one.
func writeFiles(b *bytes.Buffer, what, authors string, license, notice []byte) {
	fmt.Fprintf(b, "\nFiles: %s\n", what)
	lines := copyrightLines(license, notice)
	if len(lines) == 0 {
		lines = []string{authors}
	}
	b.WriteString("Copyright:")
	for i, l := range lines {
		if i > 0 {
			b.WriteString("          ")
		}
		l = strings.TrimSpace(strings.TrimPrefix(l, "Copyright"))
		b.WriteString(" " + l + "\n")
	}
	b.WriteString(licenseParagraph(license))
	if len(bytes.TrimSpace(notice)) > 0 {
		b.WriteString("Comment: The module's NOTICE:\n" + field(string(notice)))
	}
}
