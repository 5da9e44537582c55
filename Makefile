# swarmcrawl: a decentralized web crawler.
GO       ?= go
BIN      := bin/swarmcrawl
PKGS     := ./...
# Packages whose tests run with the race detector: everything that starts
# goroutines. protocol is pure encoding, internal holds the import-rule
# test and small helpers, and p2p/sim runs a whole swarm in one goroutine
# on a virtual clock (TestSimulationStartsNoGoroutine fails if a
# simulation ever starts one): they run without it, p2p/sim five times
# as fast.
NORACE_PKGS := ./protocol/... ./internal/... ./p2p/sim/...
RACE_PKGS := ./p2p/... ./crawl/... ./store/... ./cmd/...
STATICCHECK_VERSION := v0.8.2
# make fuzz: how long each fuzz target runs, and flags for every run (for
# example FUZZFLAGS='-parallel 1' on a shared machine). go test spends up
# to -fuzzminimizetime (default 60s) shrinking each new interesting input;
# 5s leaves most of a short run to fuzzing.
FUZZTIME  ?= 60s
FUZZFLAGS ?= -fuzzminimizetime 5s

.PHONY: all build test test-short run bench bench-node balance scale fuzz fuzz-corpus lint proto clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/swarmcrawl

# The whole suite: vet, unit tests, in-process swarms and the multi-process
# test that builds the binary itself. Must stay under 15 minutes on 2 cores.
# Tests' artifacts (the dashboard's screenshot) stay in bin/artifacts.
test:
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 10m $(NORACE_PKGS)
	mkdir -p bin/artifacts
	pkgs=$$($(GO) list $(RACE_PKGS)) && \
	$(GO) test -race -count=1 -timeout 14m -artifacts -outputdir $(CURDIR)/bin/artifacts $$(echo "$$pkgs" | grep -v '/p2p/sim$$')

test-short:
	$(GO) test -short -count=1 $(PKGS)

# A local demo: a swarm of real libp2p peers on loopback crawls a
# synthetic web, no setup and no traffic off the machine.
run: build
	./$(BIN) demo

# Every benchmark, then a CPU profile of one crawler on the 1,000-host
# synthetic web (zero delay), printed as the top functions and kept in
# bin/crawl.cpu.prof for `go tool pprof`, then bench-node.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 20m $(PKGS)
	mkdir -p bin
	$(GO) test -run '^$$' -bench 'CrawlSynthetic' -benchtime 1x -cpuprofile bin/crawl.cpu.prof -o bin/crawl.test ./crawl/
	$(GO) tool pprof -top -nodecount 25 bin/crawl.test bin/crawl.cpu.prof
	$(MAKE) bench-node

# One node of this tree and one of BASE (default: the previous commit),
# side by side on issue 10's 1,000-host synthetic web, with no delay and
# at 20 ms, BENCH_RUNS rounds (medians): new pages/s, CPU seconds per
# 1,000 pages, time to 90/99/100% coverage and the politeness bound, and
# the ratios (internal/nodebench). About 6 minutes a round on 2 cores.
BASE       ?= HEAD~1
BENCH_RUNS ?= 1
bench-node: build
	rm -rf bin/base && mkdir -p bin/base/src
	git archive $(BASE) | tar -x -C bin/base/src
	cd bin/base/src && $(GO) build -o ../swarmcrawl ./cmd/swarmcrawl
	$(GO) run ./internal/nodebench -new $(BIN) -base bin/base/swarmcrawl -runs $(BENCH_RUNS)

# Issue 28's balance measurement: 8 `swarmcrawl node` processes with
# --vnodes V for each V of BALANCE_VNODES crawl a 1,000-host synthetic web,
# BALANCE_RUNS times (fresh random identities each run); each run reports
# the hosts owned and pages fetched by the busiest node over the mean
# (from status --json), the crawl time and the processes' CPU time
# (docs/operations.md, "Virtual nodes"). About 30 s a run at V = 1 and
# 1 to 2 minutes at V = 16 on a shared 2-core machine. BALANCE_PROFILE=DIR
# keeps every node's CPU profile in DIR.
BALANCE_VNODES ?= 1,16
BALANCE_RUNS   ?= 3
balance:
	BALANCE_VNODES=$(BALANCE_VNODES) $(GO) test -run '^$$' -bench BalanceEightProcesses -benchtime 1x -count $(BALANCE_RUNS) -timeout 60m ./cmd/swarmcrawl/

# The simulations of docs/scale.md (issue 12): the real ring and shard
# code of SCALE_NODES nodes on a virtual clock (swarmcrawl simulate): no
# churn; 1% of the nodes replaced per minute with a burst of 5% crashes
# (both with one ring position per node, as docs/scale.md's sections 1
# and 2 were measured; the default is 16); virtual nodes (32 per node on
# 500 nodes: 16,000 ring positions).
# Each run prints its report and keeps it as JSON in bin/scale/, its
# plots in bin/scale/NAME/. About 2 hours in all on a shared 2-core
# machine (docs/scale.md, "Time and memory").
SCALE_NODES ?= 10000
scale: build
	mkdir -p bin/scale
	./$(BIN) simulate --nodes $(SCALE_NODES) --vnodes 1 --pages 300000 --duration 8m --settle 5m --json-file bin/scale/nochurn.json --plots bin/scale/nochurn
	./$(BIN) simulate --nodes $(SCALE_NODES) --vnodes 1 --churn 0.01 --replicas 2 --burst 0.05 --pages 300000 --duration 10m --settle 5m --json-file bin/scale/churn.json --plots bin/scale/churn
	./$(BIN) simulate --nodes 500 --vnodes 32 --join-rate 1000 --pages 0 --duration 1m --settle 2m --json-file bin/scale/vnodes.json

# Every fuzz target (each func FuzzX in a _test.go file) in turn for
# FUZZTIME: go test -fuzz takes one target of one package per run. Each
# starts from its committed seed corpus (testdata/fuzz/FuzzX, which plain
# go test, hence make test, also runs) and the inputs go test keeps in its
# cache. A failing input is written to testdata/fuzz/FuzzX and stops the
# run; at the end, one line per target with the inputs it executed.
fuzz:
	@set -e; mkdir -p bin; summary=""; \
	for file in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
	  dir=$$(dirname $$file); \
	  for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
	    echo "== $$dir $$target ($(FUZZTIME))"; \
	    if ! $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) $$dir >bin/fuzz.log 2>&1; then \
	      cat bin/fuzz.log; exit 1; \
	    fi; \
	    execs=$$(grep -o 'execs: [0-9]*' bin/fuzz.log | tail -n 1); \
	    echo "   $$execs"; summary="$$summary$$dir $$target $$execs\n"; \
	  done; \
	done; printf '%b' "$$summary"

# Regenerate the committed seed corpora from the inputs each target builds
# (real messages, records, pages and files from the packages' encoders and
# the synthetic web), after a change of format. Crashers found by make
# fuzz are kept as they are.
fuzz-corpus:
	SWARMCRAWL_WRITE_CORPUS=1 $(GO) test -count=1 -run '^Fuzz' $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

# Regenerate the wire messages after editing protocol/pb/swarmcrawl.proto
# (needs protoc and protoc-gen-go).
proto:
	cd protocol && protoc --go_out=. --go_opt=paths=source_relative pb/swarmcrawl.proto

clean:
	rm -rf bin
