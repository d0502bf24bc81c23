package atomicfile

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkWriteFile is one replace of a 1 KiB file: through renameio
// (WithRoot, fsync'd), and on the descriptor path with and without the
// fsync (InDir: progress is the last, on spoold's hot path).
func BenchmarkWriteFile(b *testing.B) {
	data := make([]byte, 1024)
	dir := b.TempDir()
	r, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	for _, c := range []struct {
		name string
		opts []Option
	}{
		{"WithRoot", []Option{WithRoot(r), WithMode(0o640)}},
		{"InDir", []Option{InDir(fd), WithMode(0o640)}},
		{"InDir-NoSync", []Option{InDir(fd), WithMode(0o640), NoSync()}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := WriteFile("doc", data, c.opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
