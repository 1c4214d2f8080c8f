# skewer: upgrade-safety conformance on kind. See README.md.
SHELL := /bin/bash
GO ?= go
VERSIONS ?= v1.35.4 v1.36.3
ARTIFACTS ?= $(CURDIR)/_artifacts
E2E_TIMEOUT ?= 75m
GOTESTSUM := $(shell $(GO) env GOPATH)/bin/gotestsum
GOTESTSUM_VERSION := v1.13.0

.PHONY: all build test test-deps e2e images bench deps docker clean

all: build

build:
	$(GO) build -o bin/skewer ./cmd/skewer

# Host packages the offline image build needs (Debian).
deps:
	@command -v debootstrap >/dev/null && dpkg -s libseccomp-dev >/dev/null 2>&1 || \
	  { DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap libseccomp-dev pkg-config >/dev/null; }
	@test -x $(GOTESTSUM) || $(GO) install gotest.tools/gotestsum@$(GOTESTSUM_VERSION)

docker:
	@docker info >/dev/null 2>&1 || ../shared/env/docker-up

# What the unit tests need: Debian's chromium renders report.html.
test-deps:
	@test -x /usr/bin/chromium || { DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

# Unit tests: no Docker, no cluster; a headless browser for the report.
test: test-deps
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) test -short -count=1 ./...

images: deps docker build
	./bin/skewer images build --version $(subst $() ,$(comma),$(VERSIONS))

# The certification suites on real kind clusters, building what they lack.
# Each suite makes its cluster from its profile: mvp (the surge path), rollout
# (the in-place path), sidecar; smoke runs on a control plane mixed at
# creation (v1.35.4 + v1.36.3), the one path the others do not take. Each
# suite's verdicts and figures end up in $(ARTIFACTS)/clusters/<cluster>/
# (report.md, printed last, and records.json).
e2e: images
	mkdir -p $(ARTIFACTS)
	ARTIFACTS=$(ARTIFACTS) $(GOTESTSUM) --junitfile $(ARTIFACTS)/junit.xml --format testname -- \
	  -count=1 -p 1 -timeout $(E2E_TIMEOUT) ./suites/mvp ./suites/rollout ./suites/sidecar
	ARTIFACTS=$(ARTIFACTS) $(GOTESTSUM) --junitfile $(ARTIFACTS)/junit-mixed.xml --format testname -- \
	  -count=1 -timeout $(E2E_TIMEOUT) ./suites/smoke -args -skewer.profile=ha-mixed
	@cat $(ARTIFACTS)/clusters/*/report.md 2>/dev/null || true

bench: images
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 90m ./bench/...

clean:
	rm -rf bin $(ARTIFACTS)

comma := ,
