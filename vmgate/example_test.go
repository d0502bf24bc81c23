package vmgate_test

import (
	"fmt"

	"github.com/vmspool/vmspool/vmgate"
)

func Example() {
	for _, script := range []string{
		"cd /mnt/project && git status --short && git diff --stat",
		"cd /mnt/project && git add -A && git commit -m wip",
	} {
		v := vmgate.Check(script)
		if v.Allowed {
			fmt.Println("allowed")
			continue
		}
		fmt.Printf("refused: %s %s at %d:%d (%s)\n", *v.Reason, *v.Git, v.Line, v.Col, v.Command)
	}
	// Output:
	// allowed
	// refused: git-write add at 1:20 (git add -A)
}
