package main

import (
	"encoding/json"
	"fmt"

	"github.com/vmspool/vmspool/internal/cli"
	"github.com/vmspool/vmspool/spool"
)

const fsckUsage = `usage: spool fsck [--fix] [--json] [--lease D]

Reports, one line each, what breaks the invariants of docs/contract.md: a marker without
a spec, a job in two states at once, a lease whose worker is dead, a
temporary older than an hour, a document that does not parse, a spec left
without a marker for over an hour. With --fix, repairs each (see
docs/spool-format.md) and says what it did. Exit 0 if clean (or, with
--fix, if everything found was fixed), 1 otherwise.

A lease's own lease_s is believed up to --lease (default 30s, spoold's):
give it the --lease spoold runs with.
`

func (a *app) fsck(args []string) error {
	c := a.newCommand("fsck", fsckUsage)
	fix := c.Bool("fix", false, "repair what is found")
	asJSON := c.Bool("json", false, "one JSON object a finding")
	lease := durationFlag{d: spool.DefaultLease}
	c.Var(&lease, "lease", "believe a lease's lease_s up to `D`, and judge one without by it (default 30s, spoold's --lease)")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("fsck", "unexpected argument %q", pos[0])
	}
	s, err := a.open()
	if err != nil {
		return err
	}
	defer s.Close()
	if lease.d <= 0 {
		return usageErr("fsck", "--lease must be positive")
	}
	found, err := s.Fsck(spool.FsckOptions{Fix: *fix, Lease: lease.d})
	if err != nil {
		return err
	}
	left := 0
	enc := json.NewEncoder(a.stdout)
	for _, f := range found {
		if *asJSON {
			enc.Encode(f)
		} else {
			fmt.Fprintln(a.stdout, f.String())
		}
		if !*fix || !f.Fixed() {
			left++
		}
	}
	switch {
	case left > 0 && !*fix:
		return cli.Failf(cli.ExitFail, "%d findings; 'spool fsck --fix' repairs them", left)
	case left > 0:
		return cli.Failf(cli.ExitFail, "%d of %d findings left unrepaired", left, len(found))
	}
	return nil
}
