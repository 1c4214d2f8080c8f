# skewer: upgrade-safety conformance on kind. See README.md.
SHELL := /bin/bash
GO ?= go
VERSIONS ?= v1.35.4 v1.36.3
ARTIFACTS ?= $(CURDIR)/_artifacts
E2E_TIMEOUT ?= 75m
GOTESTSUM := $(shell $(GO) env GOPATH)/bin/gotestsum
GOTESTSUM_VERSION := v1.13.0

# The first pair of .github/pairs.json (a test keeps them equal): what
# `make certify` certifies unless FROM and TO say otherwise.
FROM ?= v1.35.4
TO ?= v1.36.3
STRATEGY ?= both
STRICT ?= false
# SHARD, when set, is the areas this machine judges of a certification
# split across several (certify --shard; skewer report merge joins them).
SHARD ?=
OUT ?= $(ARTIFACTS)/certify
# Root runs apt itself; anyone else (a hosted CI runner) through sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get

.PHONY: all build lint test test-deps e2e suites certify images bench soak soak-input deps docker release clean

all: build

build:
	$(GO) build -buildvcs=auto -o bin/skewer ./cmd/skewer

# Host packages the offline image build needs (Debian).
# debian-archive-keyring lets debootstrap verify what it downloads.
deps:
	@command -v debootstrap >/dev/null && dpkg -s libseccomp-dev debian-archive-keyring >/dev/null 2>&1 || \
	  { $(APT) update -qq && $(APT) install -y -qq --no-install-recommends \
	    debootstrap debian-archive-keyring libseccomp-dev pkg-config >/dev/null; }
	@test -x $(GOTESTSUM) || $(GO) install gotest.tools/gotestsum@$(GOTESTSUM_VERSION)

# An engine that answers is used as it is; docker-up only where the
# project's machines keep it.
docker:
	@docker info >/dev/null 2>&1 || { test -x ../shared/env/docker-up && ../shared/env/docker-up; } || \
	  { echo "no Docker engine answers (docker info), and ../shared/env/docker-up is not here to start one" >&2; exit 1; }

# What the unit tests need: Debian's chromium renders report.html
# (SKEWER_BROWSER names another browser, e.g. a CI runner's Chrome).
test-deps:
	@test -n "$$SKEWER_BROWSER" || test -x /usr/bin/chromium || { $(APT) update -qq && \
	  $(APT) install -y -qq --no-install-recommends chromium >/dev/null; }

# gofmt, go vet, code nothing uses (staticcheck's U1000), and actionlint
# over the workflows; both tools pinned in go.mod.
lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) tool staticcheck -checks U1000 ./...
	$(GO) tool actionlint

# Unit tests: no Docker, no cluster; a headless browser for the report.
test: test-deps lint
	$(GO) test -short -count=1 ./...

images: deps docker build
	./bin/skewer images build --version $(subst $() ,$(comma),$(VERSIONS))

# The main job, suites/distribution: a distribution's release of TO made by the
# test (its binaries report TO-acme.1, packed as a server release tarball)
# and `skewer certify --from FROM --kubernetes to=TARBALL --strategy surge`
# run as a distribution would, every promise of the catalogue judged, its
# report in $(OUT); then the negative control (certify of a build whose
# newer apiservers have the proxy switched off, through certify's own
# --apiserver-feature-gates, only the proxy's routing promises: it must
# fail them, exit 1; report in $(ARTIFACTS)/certify-broken); then, on
# clusters of their own, what certify's HA clusters cannot show: skewer up
# killed with SIGKILL at three points of a create, each time taken down by
# skewer down and the machine found as it was, then up to the end and
# skewer rollout refused there (one control plane is not HA), and smoke on
# a control plane mixed at creation (v1.35.4 + v1.36.3). The in-place
# strategy is certified by `make certify` and the Actions matrix, not here
# (docs/decisions.md). Everything runs even when
# something failed before it (Ctrl-C stops it); the exit status says
# whether any did. The certification's progress is printed as it comes
# (gotestsum's standard-verbose), so a log cut short shows where it was.
# Each suite's verdicts and figures end up in $(ARTIFACTS)/clusters/<cluster>/
# (report.md, printed last, and records.json); certify's verdict, failures
# and waivers are printed after them, so a log's tail says what failed.
e2e: images
	@mkdir -p $(ARTIFACTS); c=0; v=0; k=0; m=0; \
	ARTIFACTS=$(ARTIFACTS) SKEWER_CERTIFY_OUT=$(OUT) SKEWER_FROM=$(FROM) SKEWER_TO=$(TO) SKEWER_STRICT=$(STRICT) \
	  $(GOTESTSUM) --junitfile $(ARTIFACTS)/junit-certify.xml --format standard-verbose -- \
	  -count=1 -timeout $(E2E_TIMEOUT) ./suites/distribution -run 'TestCertifyAVendorsRelease' || c=$$?; \
	[ $$c -lt 128 ] || exit $$c; \
	ARTIFACTS=$(ARTIFACTS) SKEWER_FROM=$(FROM) SKEWER_TO=$(TO) $(GOTESTSUM) --junitfile $(ARTIFACTS)/junit-vendor.xml --format testname -- \
	  -count=1 -timeout $(E2E_TIMEOUT) ./suites/distribution -run 'TestCertifyABrokenBuild' || v=$$?; \
	$(GOTESTSUM) --junitfile $(ARTIFACTS)/junit-chaos.xml --format testname -- \
	  -count=1 -timeout 15m ./cmd/skewer -run TestSIGKILLThenDownThenAgain || k=$$?; \
	ARTIFACTS=$(ARTIFACTS) $(GOTESTSUM) --junitfile $(ARTIFACTS)/junit-mixed.xml --format testname -- \
	  -count=1 -timeout $(E2E_TIMEOUT) ./suites/smoke -args -skewer.profile=ha-mixed || m=$$?; \
	cat $(ARTIFACTS)/clusters/*/report.md 2>/dev/null; \
	sed -n '/^## \(Not applicable\|Not selected\|.* on \)/q;p' $(OUT)/summary.md 2>/dev/null; \
	echo "the negative control (a build with the proxy off, expected to fail):"; sed -n '1,3p' $(ARTIFACTS)/certify-broken/summary.md 2>/dev/null; \
	echo "the certification's report: $(OUT)/report.html (summary.md, results.json, junit.xml beside it)"; \
	echo; echo "make e2e, piece by piece (a log cut short keeps its tail):"; \
	failed() { awk '/<testcase/ {n = $$0; sub(/.* name="/, "", n); sub(/".*/, "", n)} \
	  /<(failure|error)/ {m = $$0; sub(/.* message="/, "", m); sub(/".*/, "", m); \
	    if (m == "Failed") { s = $$0; while (match(s, /[A-Za-z0-9_]+\.go:[0-9]+: ([^&]|&(amp|lt|gt|#34|#39);)*/)) { m = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH) }; \
	      gsub(/&lt;/, "<", m); gsub(/&gt;/, ">", m); gsub(/&#34;/, "\"", m); gsub(/&#39;/, "'"'"'", m); gsub(/&amp;/, "\\&", m) }; \
	    printf "\n      %s: %.300s", n, m}' $$1 2>/dev/null; }; \
	echo "  suites/distribution, certify $(FROM) -> a vendor's build of $(TO) by surge: exit $$c; $$(sed -n '1s/^# //p' $(OUT)/summary.md 2>/dev/null)$$(failed $(ARTIFACTS)/junit-certify.xml)$$(failed $(OUT)/junit.xml)"; \
	echo "  suites/distribution, the negative control: exit $$v;$$(failed $(ARTIFACTS)/junit-vendor.xml)"; \
	echo "  skewer up killed (SIGKILL), down, up again, rollout refused there: exit $$k;$$(failed $(ARTIFACTS)/junit-chaos.xml)"; \
	echo "  suites/smoke (ha-mixed): exit $$m;$$(failed $(ARTIFACTS)/junit-mixed.xml)"; \
	[ $$c$$v$$k$$m = 0000 ] || exit 1

# Every suite, each on its own cluster: what make e2e runs of them, and
# suites/proxy (the surge path with the proxy's checks, window by window)
# and suites/rollout (in place; bad input; interrupted), which judge with
# the very functions certify runs - for working on a check with go test's
# filters.
suites: images
	mkdir -p $(ARTIFACTS)
	ARTIFACTS=$(ARTIFACTS) $(GOTESTSUM) --junitfile $(ARTIFACTS)/junit.xml --format testname -- \
	  -count=1 -p 1 -timeout $(E2E_TIMEOUT) ./suites/proxy ./suites/rollout ./suites/sidecar ./suites/distribution
	ARTIFACTS=$(ARTIFACTS) $(GOTESTSUM) --junitfile $(ARTIFACTS)/junit-mixed.xml --format testname -- \
	  -count=1 -timeout $(E2E_TIMEOUT) ./suites/smoke -args -skewer.profile=ha-mixed
	@cat $(ARTIFACTS)/clusters/*/report.md 2>/dev/null || true

# Certify one version pair (the certification workflow's step): verdicts,
# junit.xml, summary.md and report.html in $(OUT); DEADLINE (as 130m) stops
# it in time to report and clean up under a CI job's timeout.
certify: deps docker build
	./bin/skewer certify --from $(FROM) --to $(TO) --strategy $(STRATEGY) --strict=$(STRICT) --out $(OUT) --force $(if $(SHARD),--shard $(SHARD)) $(if $(DEADLINE),--deadline $(DEADLINE))

# A soak: certify FROM -> TO N times back to back (SOAK_STRATEGY, surge
# by default), each run's report in $(SOAK)/run-NN, then one table of how
# each promise came out across them (skewer report soak): the flakes to
# root-cause. Hours: not a CI step. A run Ctrl-C stops ends the soak.
N ?= 3
SOAK ?= $(ARTIFACTS)/soak
SOAK_STRATEGY ?= surge
soak: soak-input images
	@mkdir -p $(SOAK); for i in $$(seq -f %02g 1 $(N)); do \
	  ./bin/skewer certify --from $(FROM) --to $(TO) --strategy $(SOAK_STRATEGY) --strict=$(STRICT) --out $(SOAK)/run-$$i --force; \
	  c=$$?; [ $$c -lt 128 ] || exit $$c; \
	done; ./bin/skewer report soak $$(seq -f '$(SOAK)/run-%02g' 1 $(N))
soak-input:
	@[[ "$(N)" =~ ^[1-9][0-9]*$$ ]] || { echo "N must be how many certifications to run, 1 or more (got '$(N)')" >&2; exit 2; }

# BENCH selects benchmarks by name (every one by default: go test runs none
# for an empty -bench).
BENCH ?= .
bench: images
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 150m ./bench/...

# The files of a release (the release workflow runs this on a tag):
# skewer for linux amd64 and arm64, static, reporting VERSION, each in a
# tar.gz with LICENSE and README.md, and checksums.txt (sha256sum -c reads
# it). The archives are reproducible: names sorted, owners 0, every time
# the commit's, gzip without a name or time.
RELEASE_ARCHES ?= amd64 arm64
DIST ?= dist
release:
	@[[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]] || \
	  { echo "VERSION must be a semantic version tag such as v0.4.0 (got '$(VERSION)')" >&2; exit 2; }
	rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; epoch=$$(git log -1 --format=%ct 2>/dev/null || date +%s); \
	for arch in $(RELEASE_ARCHES); do \
	  name=skewer_$(VERSION)_linux_$$arch; mkdir $(DIST)/$$name; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -buildvcs=auto \
	    -ldflags "-s -w -X main.releaseVersion=$(VERSION)" -o $(DIST)/$$name/skewer ./cmd/skewer; \
	  cp LICENSE README.md $(DIST)/$$name/; \
	  tar -C $(DIST) --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$$epoch -cf - $$name | gzip -n > $(DIST)/$$name.tar.gz; \
	  rm -rf $(DIST)/$$name; echo "$(DIST)/$$name.tar.gz"; \
	done; \
	cd $(DIST) && sha256sum *.tar.gz > checksums.txt

clean:
	rm -rf bin $(ARTIFACTS) $(DIST)

comma := ,
