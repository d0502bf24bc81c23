package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// Quarantine moves a name of the root that cannot be read as its name says
// into corrupt/, with <name>.why beside it saying why, so that nothing is
// lost and nothing is read again as what it is not. It returns the name it
// was given in corrupt/ (a number is added when the name is taken).
func (s *Spool) Quarantine(name, why string) (string, error) {
	if name == "" || name == "." || name == ".." {
		return "", fmt.Errorf("quarantine %q: not a name of the tree", name)
	}
	if err := s.mkdir(CorruptDir); err != nil {
		return "", err
	}
	// corrupt/ is flat: a name of a subdirectory (progress/c,
	// chats/c/answer.json) keeps its path with "/" turned into "_".
	base := strings.ReplaceAll(name, "/", "_")
	dst := base
	for i := 1; ; i++ {
		_, err1 := s.root.Lstat(CorruptDir + "/" + dst)
		_, err2 := s.root.Lstat(CorruptDir + "/" + dst + ".why")
		if errors.Is(err1, fs.ErrNotExist) && errors.Is(err2, fs.ErrNotExist) {
			break
		}
		dst = base + "." + strconv.Itoa(i)
	}
	if err := s.root.Rename(name, CorruptDir+"/"+dst); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", s.Path(name), err)
	}
	dir, err := s.subRoot(CorruptDir, false)
	if err != nil {
		return dst, err
	}
	defer dir.Close()
	if err := writeFile(dir, dst+".why", []byte(why+"\n")); err != nil {
		return dst, fmt.Errorf("quarantine %s: writing reason: %w", s.Path(name), err)
	}
	return dst, syncDir(s.root)
}
