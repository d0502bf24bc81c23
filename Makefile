# vmspool: make, make test, make demo, make bench, make install.
GO      ?= go
PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR   = $(DESTDIR)$(PREFIX)/bin
BINS     = spool spoold watchd vmgate
# Stamp the VCS revision for --version where a checkout is at hand.
GOBUILD  = $(GO) build -buildvcs=auto -trimpath
FUZZTIME ?= 3s

.PHONY: all build test unit e2e fmt-check vet fuzz-short fuzz bench demo install clean

all: build

build:
	@mkdir -p bin
	$(GOBUILD) -o bin/ $(addprefix ./cmd/,$(BINS))

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change: $$out" >&2; exit 1; fi

vet:
	$(GO) vet ./...

# The unit tests and the end-to-end tests (./tests builds the real binaries
# and drives them over temporary spools), all under the race detector.
test: fmt-check vet build
	$(GO) test -race -timeout 14m ./...
	$(MAKE) fuzz-short

# Every fuzz target for a few seconds, on top of its committed seed corpus.
fuzz-short:
	@./scripts/fuzz.sh $(FUZZTIME)

fuzz:
	@./scripts/fuzz.sh 60s

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./...

demo: build
	@./scripts/demo.sh

install: build
	install -d $(BINDIR)
	install -m 0755 $(addprefix bin/,$(BINS)) $(BINDIR)/

clean:
	rm -rf bin var
