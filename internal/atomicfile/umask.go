package atomicfile

import (
	"os"
	"strconv"
	"strings"
	"sync"
)

// umask is the process's umask, read once, from /proc/self/status:
// reading it with umask(2) would change it for a moment under the other
// threads. ok is false when it cannot be read.
var umask = sync.OnceValues(func() (os.FileMode, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			return os.FileMode(m), err == nil
		}
	}
	return 0, false
})

// umaskKeeps says whether the umask leaves perm whole, so that a file
// created with perm needs no fchmod (TrustUmask). When the umask cannot
// be read, the answer is no.
func umaskKeeps(perm os.FileMode) bool {
	m, ok := umask()
	return ok && perm&m == 0
}
