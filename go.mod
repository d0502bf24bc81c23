module github.com/vmspool/vmspool

go 1.26.0

require (
	github.com/fsnotify/fsnotify v1.10.1 // indirect
	github.com/google/renameio/v2 v2.0.2 // indirect
	github.com/oklog/ulid/v2 v2.1.2 // indirect
	github.com/rogpeppe/go-internal v1.16.0 // indirect
	github.com/sirupsen/logrus v1.10.2 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/term v0.48.0 // indirect
	mvdan.cc/sh/v3 v3.14.1 // indirect
)
