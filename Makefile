# primeflow — `make run` runs the whole pipeline, `make test` every test.
SHELL := /bin/bash
GO ?= go
export GOFLAGS := -buildvcs=false

SERVICES := $(notdir $(wildcard services/*))
TOOLS := $(CURDIR)/.tools/bin
NATS_CLI := $(TOOLS)/nats
NATSCLI_VERSION := v0.5.0
# nats-server as a binary of its own, at the version the code embeds (pkg/go.mod).
NATS_SERVER := $(TOOLS)/nats-server
NATS_SERVER_VERSION := $(shell awk '$$1 == "github.com/nats-io/nats-server/v2" { print $$2 }' pkg/go.mod)
# Debian's prometheus package (2.42 in bookworm), unpacked into .tools, not
# installed: no service is started, nothing outside the tree changes.
PROM_DIR := $(CURDIR)/.tools/prometheus
PROMETHEUS := $(PROM_DIR)/usr/bin/prometheus
PROMTOOL := $(PROM_DIR)/usr/bin/promtool
TEST_TOOLS = NATS_CLI=$(NATS_CLI) NATS_SERVER=$(NATS_SERVER) PROMETHEUS=$(PROMETHEUS) PROMTOOL=$(PROMTOOL)
# Every module of the workspace (go test ./... does not work across go.work).
PKGS = $(shell $(GO) list -m -f '{{.Path}}/...')
# Where make build puts the binaries.
BIN ?= bin
# Stamped into every binary (pkg/version, --version): the release git
# describes from a v-tag (1.4.0, 1.4.0-3-g9c7147a; 0.0.0-dev with none),
# the commit (-dirty when tracked files had changes), the build time.
VERSION ?= $(or $(shell git describe --tags --match 'v[0-9]*' 2>/dev/null | sed 's/^v//'),0.0.0-dev)
COMMIT ?= $(shell c=$$(git rev-parse --short=12 HEAD 2>/dev/null) || c=unknown; \
	[ $$c = unknown ] || git diff --quiet HEAD 2>/dev/null || c=$$c-dirty; echo $$c)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
VERSION_PKG := github.com/ethosbuilding/primeflow/pkg/version
LDFLAGS := -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT) -X $(VERSION_PKG).Date=$(BUILD_DATE)
# What bin/primeflow keeps (make clean-data removes it).
DATA_DIR ?= data

.PHONY: build run test race bench chaos fuzz vet fmt tidy tools rules docs clean clean-data

## build: one binary per service in bin/, plus bin/primeflow (all-in-one) and bin/primectl,
## each stamped with the version, commit and build date (--version)
build:
	@mkdir -p $(BIN)
	@for s in $(SERVICES); do $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/$$s ./services/$$s/cmd/$$s || exit 1; done

## run: the whole pipeline in one process with embedded NATS, SQLite and simulators
run: build
	$(BIN)/primeflow

## tools: the nats CLI, used by the tests that prove streams/ works with it; nats-server, for the
## chaos harness; prometheus and promtool, used by the tests of the alert rules and the dashboards (compose/)
tools: $(NATS_CLI) $(NATS_SERVER) $(PROMETHEUS)
$(NATS_CLI):
	GOBIN=$(TOOLS) $(GO) install github.com/nats-io/natscli/nats@$(NATSCLI_VERSION)
$(NATS_SERVER): pkg/go.mod
	GOBIN=$(TOOLS) $(GO) install github.com/nats-io/nats-server/v2@$(NATS_SERVER_VERSION)
$(PROMETHEUS):
	rm -rf $(PROM_DIR) && mkdir -p $(PROM_DIR)
	cd $(PROM_DIR) && { apt-get download prometheus || { apt-get update && apt-get download prometheus; }; }
	dpkg-deb -x $(PROM_DIR)/prometheus_*.deb $(PROM_DIR) && rm $(PROM_DIR)/prometheus_*.deb
	$(PROMETHEUS) --version

## rules: check the alert rules and run their promtool unit tests (make test does too)
rules: $(PROMETHEUS)
	$(PROMTOOL) check rules compose/prometheus/rules/*.yml
	$(PROMTOOL) test rules compose/prometheus/rules/tests/*.yml

## test: every test of every module (SQL Server tests run when MSSQL_DSN is set; MSSQL_USE_DATABASE=1 runs them in its database rather than one made for the run)
test: tools
	@[ -n "$$MSSQL_DSN" ] || echo "NOTE: MSSQL_DSN is not set: the SQL Server contract tests are SKIPPED (SQLite runs them all)."
	$(TEST_TOOLS) $(GO) test -count=1 -timeout 20m $(PKGS)
	@[ -n "$$MSSQL_DSN" ] || echo "NOTE: the SQL Server contract tests were SKIPPED: set MSSQL_DSN=sqlserver://… to run them."

## docs: write docs/configuration.md anew from the Config structs' tags, keeping the meanings
## written there (make test fails while it is stale, or a variable has no meaning)
docs:
	$(GO) test -count=1 -run '^TestConfigurationDoc$$' ./services/primeflow -update

## race: the tests under the race detector
race: tools
	$(TEST_TOOLS) $(GO) test -race -count=1 -timeout 30m $(PKGS)

## bench: the benchmarks, each against a baseline measured in the same run
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m $(PKGS)

## chaos: the fault-injection harness, full profile (DEVELOPMENT.md, "Proving it under faults"); a scenario alone with CHAOS_FLAGS=-scenario=cluster
chaos: build tools
	$(GO) run ./chaos/cmd/chaos -bin $(BIN) -nats-server $(NATS_SERVER) $(CHAOS_FLAGS)

## fuzz: every Fuzz target in turn for FUZZTIME (1,000,000 executions each; FUZZTIME=5m for a time instead)
FUZZTIME ?= 1000000x
fuzz:
	@for f in $$(grep -rl --include='*_test.go' '^func Fuzz' pkg services streams sql); do \
	  for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
	    out=$$($(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) ./$$(dirname $$f) 2>&1) || { echo "$$out"; exit 1; }; \
	    echo "$$t ($$(dirname $$f)): $$(echo "$$out" | grep -o 'execs: [0-9]*' | tail -1), $$(echo "$$out" | grep -o 'elapsed: [0-9a-z]*' | tail -1)"; \
	  done; \
	done

vet:
	$(GO) vet $(PKGS)

fmt:
	gofmt -l -w pkg services sql streams

## tidy: go mod tidy in every module
tidy:
	@for m in $$($(GO) list -m -f "{{.Dir}}"); do (cd $$m && GOWORK=off $(GO) mod tidy) || exit 1; done

## clean: the build outputs (bin/); the data is make clean-data's
clean:
	rm -rf $(BIN)

## clean-data: remove DATA_DIR (./data: the webhook log, which is the system of record, JetStream,
## the generated credentials, the simulators' state); refuses while bin/primeflow runs on it, and asks first
clean-data:
	@d='$(DATA_DIR)'; lock="$$d/primeflow.lock"; \
	if [ ! -e "$$d" ]; then echo "$$d: not there, nothing to remove"; exit 0; fi; \
	if [ -e "$$lock" ] && ! flock -n "$$lock" true; then \
		pid=$$(cat "$$lock" 2>/dev/null); \
		echo "$$d is in use: bin/primeflow runs on it$${pid:+ (pid $$pid)}; stop it first. Nothing removed." >&2; exit 1; fi; \
	read -r -p "Remove $$d and everything in it: the webhook log (the system of record), JetStream, the credentials? [y/N] " answer; \
	case "$$answer" in y|Y|yes|YES) ;; *) echo "Nothing removed."; exit 0;; esac; \
	touch "$$lock"; flock -n -E 75 "$$lock" rm -rf -- "$$d"; rc=$$?; \
	case $$rc in 0) echo "Removed $$d.";; 75) echo "$$d: bin/primeflow started meanwhile; nothing removed." >&2; exit 1;; *) exit $$rc;; esac
