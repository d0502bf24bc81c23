# vmspool: make, make test, make demo, make bench, make install.
GO      ?= go
PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR   = $(DESTDIR)$(PREFIX)/bin
BINS     = spool spoold watchd vmgate
# Stamp the VCS revision for --version where a checkout is at hand.
# Static binaries (no cgo): they run as they are in a container (README,
# "With Open WebUI") or on another distribution.
GOBUILD  = CGO_ENABLED=0 $(GO) build -buildvcs=auto -trimpath
FUZZTIME ?= 3s
# The Python client and the Open WebUI tools are tested with this Python
# (3.9+; the tools' tests need pydantic, and skip saying so without it).
PYTHON  ?= python3

.PHONY: all build test unit e2e fmt-check vet fuzz-short fuzz bench bench-peers demo install clean python-test test-deps

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
	$(GO) test -race -timeout 24m ./...
	$(MAKE) python-test
	$(MAKE) fuzz-short
	$(MAKE) deb-test

# What some tests need beyond Go and Python, from Debian's packages, as
# root (CI runs it); elsewhere it says what is missing, and those tests
# skip: chromium (the live page's browser test), python3-pydantic (the Open
# WebUI tools; python3-uvloop runs their tests on Open WebUI's loop, else
# asyncio's, saying so), logrotate (dist/logrotate), openssh-server and sshfs (many
# hosts over sshfs from a loopback sshd), lintian (the package),
# debootstrap and systemd-container (the units under systemd, TestSystemd);
# and the engines of the many-hosts proof (scripts/engines/: GlusterFS,
# CephFS, iptables for the faults, libfaketime for a host's clock), without
# their recommends; Prometheus and its node exporter (TestOpsPrometheus:
# the dashboard and the alert rules of dist/), without theirs.
test-deps:
	@missing=; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	[ -f /usr/share/javascript/marked/marked.min.js ] || missing="$$missing libjs-marked"; \
	[ -f /usr/share/nodejs/dompurify/dist/purify.min.js ] || missing="$$missing node-dompurify"; \
	python3 -c 'import pydantic' 2>/dev/null || /usr/bin/python3 -c 'import pydantic' 2>/dev/null || missing="$$missing python3-pydantic"; \
	python3 -c 'import uvloop' 2>/dev/null || /usr/bin/python3 -c 'import uvloop' 2>/dev/null || missing="$$missing python3-uvloop"; \
	command -v logrotate >/dev/null || [ -x /usr/sbin/logrotate ] || missing="$$missing logrotate"; \
	[ -x /usr/sbin/sshd ] || missing="$$missing openssh-server"; \
	command -v sshfs >/dev/null || missing="$$missing sshfs"; \
	command -v lintian >/dev/null || missing="$$missing lintian"; \
	command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || missing="$$missing debootstrap"; \
	command -v systemd-nspawn >/dev/null || missing="$$missing systemd-container"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "test-deps: installing$$missing"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; } || \
			echo "test-deps: installing$$missing failed: the tests that need them will skip"; \
	else echo "test-deps:$$missing missing and not root: the tests that need them will skip"; fi
	@missing=; \
	command -v prometheus >/dev/null && command -v promtool >/dev/null || missing="$$missing prometheus"; \
	command -v prometheus-node-exporter >/dev/null || missing="$$missing prometheus-node-exporter"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "test-deps: installing$$missing"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; } || \
			echo "test-deps: installing$$missing failed: TestOpsPrometheus will skip"; \
	else echo "test-deps:$$missing missing and not root: TestOpsPrometheus will skip"; fi
	@missing=; \
	command -v glusterd >/dev/null || missing="$$missing glusterfs-server"; \
	command -v glusterfs >/dev/null || missing="$$missing glusterfs-client"; \
	for p in ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse; do command -v $$p >/dev/null || missing="$$missing $$p"; done; \
	command -v ceph >/dev/null || missing="$$missing ceph-common"; \
	command -v uuidgen >/dev/null || missing="$$missing uuid-runtime"; \
	command -v iptables >/dev/null || missing="$$missing iptables"; \
	ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || missing="$$missing libfaketime"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "test-deps: installing$$missing"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; } || \
			echo "test-deps: installing$$missing failed: the engines that need them will skip"; \
	else echo "test-deps:$$missing missing and not root: the engines that need them will skip"; fi

# clients/: the Python client against the real binaries in bin/, then the
# Open WebUI tools called as Open WebUI calls them.
python-test: build
	cd clients && $(PYTHON) -m unittest discover -s python -t python
	cd clients && $(PYTHON) -m unittest discover -s openwebui -t openwebui

# Every fuzz target for a few seconds, on top of its committed seed corpus.
fuzz-short:
	@./scripts/fuzz.sh $(FUZZTIME)

fuzz:
	@./scripts/fuzz.sh 60s

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./...

# vmspool beside task-spooler and nq (Debian's packages, installed here
# when missing and root), in one run: scripts/bench_peers.py. Not part of
# make test: it takes a minute or two and measures, it does not check.
bench-peers: build
	@missing=; command -v tsp >/dev/null || missing="$$missing task-spooler"; \
	command -v nq >/dev/null || missing="$$missing nq"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "bench-peers: installing$$missing"; \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || \
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; }; \
		else echo "bench-peers:$$missing missing: install them (apt-get install$$missing)" >&2; exit 1; fi; \
	fi
	$(PYTHON) scripts/bench_peers.py

demo: build
	@./scripts/demo.sh

# The binaries, the systemd units (their /usr/local paths rewritten to
# PREFIX), sysusers and tmpfiles under PREFIX/lib, cron and logrotate under
# SYSCONFDIR, and docs/operations.md (docs/operations.md says what goes where).
SYSCONFDIR ?= /etc
LIBDIR      = $(DESTDIR)$(PREFIX)/lib
install: build
	install -d $(BINDIR) $(LIBDIR)/systemd/system $(LIBDIR)/sysusers.d $(LIBDIR)/tmpfiles.d \
		$(DESTDIR)$(SYSCONFDIR)/cron.d $(DESTDIR)$(SYSCONFDIR)/logrotate.d $(DESTDIR)$(PREFIX)/share/doc/vmspool
	install -m 0755 $(addprefix bin/,$(BINS)) $(BINDIR)/
	for u in dist/systemd/*.service; do \
		sed 's|/usr/local/|$(PREFIX)/|g' $$u > $(LIBDIR)/systemd/system/$${u##*/} && \
		chmod 0644 $(LIBDIR)/systemd/system/$${u##*/} || exit 1; done
	install -m 0644 dist/sysusers.d/vmspool.conf $(LIBDIR)/sysusers.d/vmspool.conf
	install -m 0644 dist/tmpfiles.d/vmspool.conf $(LIBDIR)/tmpfiles.d/vmspool.conf
	install -m 0644 dist/cron/vmspool $(DESTDIR)$(SYSCONFDIR)/cron.d/vmspool
	install -m 0644 dist/logrotate/vmspool $(DESTDIR)$(SYSCONFDIR)/logrotate.d/vmspool
	install -m 0644 docs/operations.md $(DESTDIR)$(PREFIX)/share/doc/vmspool/operations.md
	install -d $(LIBDIR)/vmspool $(DESTDIR)$(PREFIX)/share/vmspool/openwebui \
		$(DESTDIR)$(PREFIX)/share/vmspool/grafana $(DESTDIR)$(PREFIX)/share/vmspool/prometheus
	install -m 0644 clients/python/vmspool.py $(LIBDIR)/vmspool/vmspool.py
	install -m 0644 clients/openwebui/vm_agent.py clients/openwebui/vm_agent_progress.py $(DESTDIR)$(PREFIX)/share/vmspool/openwebui/
	install -m 0644 dist/grafana/vmspool.json $(DESTDIR)$(PREFIX)/share/vmspool/grafana/vmspool.json
	install -m 0644 dist/prometheus/vmspool.rules.yml $(DESTDIR)$(PREFIX)/share/vmspool/prometheus/vmspool.rules.yml

clean:
	rm -rf bin var build

# The Debian package, build/vmspool_<version>_<arch>.deb (README, "Install";
# packaging/): what make install stages with PREFIX=/usr, the man pages
# written from the staged commands' own -h, packed by goreleaser's nfpm.
# The packager is a module of its own (packaging/go.mod), so that nfpm's
# dependencies stay out of the binaries'. The version comes from git
# describe (packaging/version.sh). The binaries are linked again for it
# without their symbol table and DWARF (-s -w), as Debian ships them:
# panics still print their stacks.
.PHONY: deb deb-lint deb-install-test deb-test
DEB_VERSION ?= $(shell ./packaging/version.sh)
DEB_ARCH    ?= $(shell $(GO) env GOARCH)
# "Name <address>" of the package's Maintainer; empty: HEAD's git author.
DEB_MAINTAINER ?=
DEB_STAGE    = build/deb/root
deb:
	rm -rf $(DEB_STAGE) build/vmspool_*.deb
	$(MAKE) install PREFIX=/usr SYSCONFDIR=/etc DESTDIR=$(CURDIR)/$(DEB_STAGE)
	$(GOBUILD) -ldflags='-s -w' -o $(DEB_STAGE)/usr/bin/ $(addprefix ./cmd/,$(BINS))
	cd packaging && CGO_ENABLED=0 $(GO) build -trimpath -o ../build/vmspool-pkg .
	build/vmspool-pkg deb --version '$(DEB_VERSION)' --arch '$(DEB_ARCH)' --stage $(DEB_STAGE) --out build \
		--maintainer '$(DEB_MAINTAINER)'

# lintian on the package: no error (warnings are shown). Skips, saying so,
# where lintian is not installed (make test-deps installs it).
deb-lint: deb
	@if command -v lintian >/dev/null; then \
		lintian --fail-on error --display-level '>=warning' build/vmspool_*.deb; \
	else echo "deb-lint: skipped: no lintian (apt-get install lintian; make test-deps does)"; fi

# The package installed, used, upgraded, removed and purged on this
# machine (packaging/install-test.sh): root only, and it installs here,
# so CI runs it (.ci/run) and make test does not.
deb-install-test: deb
	packaging/install-test.sh build/vmspool_*.deb

# The package's checks that run anywhere, as part of make test: the build,
# lintian, the packager's own tests, and (as root, with systemd-nspawn)
# TestSystemd, the units under a systemd booted in a container of this
# machine's Debian, whose root file system debootstrap makes once into
# ~/.cache/vmspool (packaging/container_test.go).
deb-test: deb-lint
	cd packaging && $(GO) vet ./... && \
		VMSPOOL_DEB="$$(ls $(CURDIR)/build/vmspool_*.deb)" $(GO) test -v -count=1 -timeout 15m ./...
