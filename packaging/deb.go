package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
)

// commands are the binaries a page is written for, as make install
// stages them.
var commands = []string{"spool", "spoold", "watchd", "vmgate"}

type debOptions struct {
	version, arch, stage, out, config, maintainer string
}

// buildDeb writes the generated files (man pages, changelog, copyright) under
// out/deb/gen, then the package, and returns the package's path. What
// goes where is nfpm.yaml's: it reads $STAGE (the staged tree), $GEN
// (the generated files) and the package's $VERSION, $ARCH, $MAINTAINER.
func buildDeb(o debOptions) (string, error) {
	date := sourceDate()
	if o.maintainer == "" {
		m, err := git("log", "-1", "--format=%an <%ae>")
		if err != nil {
			return "", fmt.Errorf("no --maintainer, and none from git: %w", err)
		}
		o.maintainer = m
	}
	gen := filepath.Join(o.out, "deb", "gen")
	if err := os.RemoveAll(gen); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(gen, "man"), 0o755); err != nil {
		return "", err
	}
	var bins []string
	for _, c := range commands {
		bins = append(bins, filepath.Join(o.stage, "usr", "bin", c))
	}
	pages, err := manPages(bins, page{version: o.version, date: date,
		docs: "/usr/share/doc/vmspool/operations.md"})
	if err != nil {
		return "", err
	}
	for name, p := range pages {
		if err := writeGzip(filepath.Join(gen, "man", name+".1.gz"), p); err != nil {
			return "", err
		}
	}
	if err := writeGzip(filepath.Join(gen, "changelog.gz"), changelog(o.version, o.maintainer, date)); err != nil {
		return "", err
	}
	copyright, err := copyrightFile(".", bins)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(gen, "copyright"), copyright, 0o644); err != nil {
		return "", err
	}

	env := map[string]string{"VERSION": o.version, "ARCH": o.arch, "MAINTAINER": o.maintainer,
		"STAGE": o.stage, "GEN": gen}
	cfg, err := nfpm.ParseFileWithEnvMapping(o.config, func(k string) string { return env[k] })
	if err != nil {
		return "", fmt.Errorf("%s: %w", o.config, err)
	}
	info, err := cfg.Get("deb")
	if err != nil {
		return "", err
	}
	info.MTime = date
	if err := nfpm.Validate(info); err != nil {
		return "", fmt.Errorf("%s: %w", o.config, err)
	}
	pkg, err := nfpm.Get("deb")
	if err != nil {
		return "", err
	}
	target := filepath.Join(o.out, pkg.ConventionalFileName(info))
	f, err := os.CreateTemp(o.out, ".vmspool-deb-")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	if err := pkg.Package(info, f); err != nil {
		f.Close()
		return "", fmt.Errorf("packaging: %w", err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(f.Name(), target); err != nil {
		return "", err
	}
	return target, nil
}

// writeGzip writes b compressed as Debian wants a man page or a
// changelog: the most compression, and no name or time in the header.
func writeGzip(path string, b []byte) error {
	var buf bytes.Buffer
	z, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	z.Write(b)
	if err := z.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
