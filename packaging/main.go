// Command vmspool-pkg builds vmspool's Debian package: `make deb` runs
// it over a tree that `make install PREFIX=/usr` staged. It writes the
// man pages from the staged commands' own -h (man.go), the changelog from
// git (changelog.go), then the .deb with goreleaser's nfpm from nfpm.yaml
// (deb.go).
//
// It is a module of its own: nfpm brings some 120 modules with it (git,
// ssh, signing, every package format), which stay out of the go.mod the
// four binaries are built from, and out of their `go vet ./...` and
// `go test ./...`. It is neither installed nor shipped.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

const usageText = `usage: vmspool-pkg deb --version V --arch A --stage DIR --out DIR [--config FILE]
       vmspool-pkg man [--version V] BIN...

deb builds DIR/vmspool_V_A.deb from the tree in --stage (make install
PREFIX=/usr DESTDIR=...) and the files nfpm.yaml names, and prints its path.
man prints the man page of BIN, made from BIN -h and each subcommand's -h.
`

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "vmspool-pkg: %v\n", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("no command: deb or man (-h for the usage)")}
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, usageText)
		return nil
	case "deb":
		fs := flag.NewFlagSet("deb", flag.ContinueOnError)
		var o debOptions
		fs.StringVar(&o.version, "version", "", "the package's version (packaging/version.sh)")
		fs.StringVar(&o.arch, "arch", "", "the package's architecture, as Go or Debian names it")
		fs.StringVar(&o.stage, "stage", "", "the tree make install staged (PREFIX=/usr)")
		fs.StringVar(&o.out, "out", "", "the directory the .deb goes to")
		fs.StringVar(&o.config, "config", "packaging/nfpm.yaml", "nfpm's configuration")
		fs.StringVar(&o.maintainer, "maintainer", "", `"Name <address>" of the package (default: git's author of HEAD)`)
		if err := fs.Parse(args[1:]); err != nil {
			return usageError{err}
		}
		if o.version == "" || o.arch == "" || o.stage == "" || o.out == "" || fs.NArg() > 0 {
			return usageError{errors.New("deb needs --version, --arch, --stage and --out, and no arguments")}
		}
		path, err := buildDeb(o)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, path)
		return nil
	case "man":
		fs := flag.NewFlagSet("man", flag.ContinueOnError)
		version := fs.String("version", "devel", "the version the page's footer names")
		if err := fs.Parse(args[1:]); err != nil {
			return usageError{err}
		}
		if fs.NArg() == 0 {
			return usageError{errors.New("man needs the binaries")}
		}
		pages, err := manPages(fs.Args(), page{version: *version, date: sourceDate()})
		if err != nil {
			return err
		}
		for _, bin := range fs.Args() {
			stdout.Write(pages[filepath.Base(bin)])
		}
		return nil
	}
	return usageError{fmt.Errorf("unknown command %q: deb or man", args[0])}
}

// manPages reads each binary's usage and writes its page; each page's
// SEE ALSO names the others.
func manPages(bins []string, p page) (map[string][]byte, error) {
	var cmds []command
	for _, bin := range bins {
		c, err := readCommand(bin)
		if err != nil {
			return nil, err
		}
		cmds = append(cmds, c)
	}
	pages := map[string][]byte{}
	for _, c := range cmds {
		q := p
		q.seeAlso = nil
		for _, o := range cmds {
			if o.name != c.name {
				q.seeAlso = append(q.seeAlso, o.name)
			}
		}
		pages[c.name] = roff(c, q)
	}
	return pages, nil
}
