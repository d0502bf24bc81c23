package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The package's changelog is Debian's format (a native package's
// /usr/share/doc/vmspool/changelog.gz), written at build time from git:
// one entry for the version being built, whose items are the subjects of
// the commits since the last release tag (v*), or of the latest ones when
// there is none yet. Not promised: an entry per earlier release; the
// history is git's.

// maxChanges bounds the items of the entry; the rest is one line.
const maxChanges = 40

// git runs git in the current directory and returns its output.
func git(args ...string) (string, error) {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimRight(string(out), "\n"), nil
}

// sourceDate is the build's date: $SOURCE_DATE_EPOCH, else the time of
// the commit built, else now. The man pages and the files' mtimes take
// it, so that two builds of one commit are the same.
func sourceDate() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	if s, err := git("log", "-1", "--format=%ct"); err == nil {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	return time.Now().UTC()
}

// changes lists the subjects of the commits since the last v* tag (all of
// them when there is none), newest first, and how many there are in all.
func changes() (subjects []string, total int, err error) {
	rng := "HEAD"
	if tag, err := git("describe", "--tags", "--abbrev=0", "--match", "v[0-9]*"); err == nil {
		rng = tag + "..HEAD"
	}
	n, err := git("rev-list", "--count", "--no-merges", rng)
	if err != nil {
		return nil, 0, err
	}
	total, _ = strconv.Atoi(n)
	log, err := git("log", "--no-merges", "--format=%s", "-n", strconv.Itoa(maxChanges), rng)
	if err != nil {
		return nil, 0, err
	}
	if log != "" {
		subjects = strings.Split(log, "\n")
	}
	return subjects, total, nil
}

// changelog writes the entry. Without git it says so.
func changelog(version, maintainer string, date time.Time) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "vmspool (%s) unstable; urgency=medium\n\n", version)
	subjects, total, err := changes()
	switch {
	case err != nil:
		b.WriteString("  * Built outside a git checkout: no list of changes.\n")
	case len(subjects) == 0:
		b.WriteString("  * No change since the last release.\n")
	default:
		for _, s := range subjects {
			b.WriteString(wrapItem(s))
		}
		if rest := total - len(subjects); rest > 0 {
			b.WriteString(wrapItem(fmt.Sprintf("And %d earlier changes: see the git history.", rest)))
		}
	}
	fmt.Fprintf(&b, "\n -- %s  %s\n", maintainer, date.Format("Mon, 02 Jan 2006 15:04:05 -0700"))
	return b.Bytes()
}

// wrapItem writes one "  * " item wrapped at 78 columns, as dch does.
func wrapItem(s string) string {
	var b strings.Builder
	line := "  *"
	for _, w := range strings.Fields(s) {
		if len(line)+1+len(w) > 78 && len(line) > 4 {
			b.WriteString(line + "\n")
			line = "   "
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
	return b.String()
}
