package spool

import (
	"math"
	"syscall"
	"testing"
)

// CephFS says its free inodes are the largest number: no floor on inodes
// there, rather than "-1 inodes free".
func TestSpaceOfUnlimitedInodes(t *testing.T) {
	sp := spaceOf(&syscall.Statfs_t{Bsize: 4096, Bavail: 10, Blocks: 20, Ffree: math.MaxUint64, Files: 5})
	if sp.Inodes != 0 || sp.FreeInodes != 0 || sp.Free != 40960 {
		t.Errorf("spaceOf = %+v; want no inodes judged, 40960 bytes free", sp)
	}
	if err := DefaultFloor.Below("d", Space{Free: 1 << 40, Size: 1 << 41}); err != nil {
		t.Errorf("a filesystem with no inode count: %v", err)
	}
	if err := DefaultFloor.Below("d", spaceOf(&syscall.Statfs_t{Bsize: 4096, Bavail: 1 << 30, Blocks: 1 << 31, Ffree: 10, Files: 1 << 20})); err == nil {
		t.Error("10 inodes free passed the floor")
	}
}
