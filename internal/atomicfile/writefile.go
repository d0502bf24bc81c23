package atomicfile

// WriteFile replaces name with data, atomically (renameio's WriteFile,
// with this package's options).
func WriteFile(name string, data []byte, opts ...Option) error {
	return writeFile(name, data, false, nil, opts)
}

// CreateFile creates name with data, atomically, only if nothing stands
// at name: otherwise the error wraps fs.ErrExist and nothing is left.
func CreateFile(name string, data []byte, nr *NoReplace, opts ...Option) error {
	return writeFile(name, data, true, nr, opts)
}

// writeFile keeps its PendingFile on the stack: a batch writes thousands.
func writeFile(name string, data []byte, create bool, nr *NoReplace, opts []Option) error {
	var p PendingFile
	if err := p.init(name, opts); err != nil {
		return err
	}
	defer p.Cleanup()
	if _, err := p.Write(data); err != nil {
		return err
	}
	if create {
		return p.CloseAtomicallyCreate(nr)
	}
	return p.CloseAtomicallyReplace()
}
