package spool

import (
	"io/fs"
	"syscall"
)

// FileStamp tells one version of a file of the tree from another without
// reading it: its device and inode (a replace by rename always brings a
// new inode), its size, mtime and ctime (a write in place, a touch). It is
// comparable: two looks at one version give equal stamps. What it does not
// promise is a new stamp for two writes in place within the filesystem's
// time granularity that leave the size as it was. A directory's is
// DirStamp (watch.go), which counts its links rather than its size.
type FileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

// FileStampOf is the stamp of what fi describes (an lstat of the name).
func FileStampOf(fi fs.FileInfo) FileStamp {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	}
	return FileStamp{dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}
