package spoold

import (
	"os"
	"strings"
	"testing"
)

// spoold's own cgroup is a directory under the cgroup2 mount that
// mountinfo names, wherever /proc/self/cgroup says it is.
func TestOwnCgroup(t *testing.T) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil || !strings.Contains(string(b), "0::") {
		t.Skip("not in a cgroup v2 hierarchy here")
	}
	own, err := ownCgroup()
	if err != nil {
		t.Skipf("no cgroup2 mount for this process's cgroup: %v", err)
	}
	fi, err := os.Stat(own)
	if err != nil || !fi.IsDir() {
		t.Fatalf("ownCgroup() = %s, not a directory: %v", own, err)
	}
	if _, err := os.Stat(own + "/cgroup.procs"); err != nil {
		t.Errorf("ownCgroup() = %s, which has no cgroup.procs: %v", own, err)
	}
}
