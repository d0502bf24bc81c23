package main

import (
	"encoding/json"
	"flag"
	"fmt"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

var fsckCmd = cli.Command{
	Name:  "fsck",
	Usage: "[--fix] [--json] [--lease D]",
	Short: "Report (and with --fix repair) what breaks the tree's invariants.",
	Long: `Reports, one line each, what breaks the invariants of docs/contract.md:
a marker without a spec, a job in two states at once, a lease whose
worker is dead, a temporary older than an hour, a document that does
not parse, a spec left without a marker for over an hour. With --fix,
repairs each (see docs/spool-format.md) and says what it did. Exit 0 if
clean (or, with --fix, if everything found was fixed), 1 otherwise.

A lease's own lease_s is believed up to --lease (default 30s, spoold's):
give it the --lease spoold runs with.`,
	Flags: func(fs *flag.FlagSet) {
		fs.Bool("fix", false, "repair what is found")
		fs.Bool("json", false, "one JSON object a finding, then a last {\"kind\":\"summary\",...} with the counts and \"clean\"")
		cli.Duration(fs, "lease", spool.DefaultLease, "believe a lease's lease_s up to `D`, and judge one without by it (spoold's --lease)")
	},
	Run: fsck,
}

func fsck(c *cli.Call) error {
	if err := c.NoOperands(); err != nil {
		return err
	}
	s, err := open(c)
	if err != nil {
		return err
	}
	defer s.Close()
	fix, lease := c.Bool("fix"), c.Duration("lease")
	if lease <= 0 {
		return c.Usagef("--lease must be positive")
	}
	found, err := s.Fsck(spool.FsckOptions{Fix: fix, Lease: lease})
	if err != nil {
		return err
	}
	left := 0
	enc := json.NewEncoder(c.Stdout)
	for _, f := range found {
		if c.Bool("json") {
			enc.Encode(f)
		} else {
			// A finding names what it found: a temporary's name is
			// anyone's who can write the spool.
			fmt.Fprintln(c.Stdout, spool.Printable(f.String()))
		}
		if !fix || !f.Fixed() {
			left++
		}
	}
	if c.Bool("json") {
		// A last object, always: a clean spool is said, not left to an
		// empty output that a failed run would print too.
		enc.Encode(struct {
			Kind     string `json:"kind"`
			Findings int    `json:"findings"`
			Left     int    `json:"left"`
			Clean    bool   `json:"clean"`
		}{"summary", len(found), left, left == 0})
	}
	switch {
	case left > 0 && !fix:
		return cli.Failf(cli.ExitFail, "%d findings; 'spool fsck --fix' repairs them", left)
	case left > 0:
		return cli.Failf(cli.ExitFail, "%d of %d findings left unrepaired", left, len(found))
	}
	return nil
}
