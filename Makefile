# roce-fwd build, test and benchmark entry points. Every target that needs
# DPDK or test tools installs them first (apt-get, as root) via deps.

GO      ?= go
BIN     := bin/roce-fwd
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# Seconds each fuzz target runs in `make test`.
FUZZTIME ?= 10s
FUZZTIME_LONG ?= 10m
FUZZ_PARALLEL ?= 1
# Seconds each run of `make bench` forwards, and how many rounds of runs
# (3 rounds of the whole matrix take about 10 minutes on 2 cores).
BENCH_SECONDS ?= 5
# How long make soak runs the daemon.
SOAK ?= 30m
BENCH_ROUNDS ?= 3

export CGO_ENABLED := 1
# The Go and its build settings, as scripts/goenv.sh chooses them for make
# and the scripts alike, each kept if set in the environment: the Go of
# go.mod's toolchain line (GOTOOLCHAIN=auto: the data path is measured with
# it; GOTOOLCHAIN=local keeps the installed one), x86-64-v3 and Go's SIMD
# experiment where the Go knows it, for the QP table's AVX2 bucket scans
# (GOAMD64=v1 GOEXPERIMENT= builds for any x86-64).
$(foreach v,$(shell bash -c '. scripts/goenv.sh && echo GOTOOLCHAIN=$$GOTOOLCHAIN GOAMD64=$$GOAMD64 GOEXPERIMENT=$$GOEXPERIMENT'),$(eval $(v)))
export GOTOOLCHAIN GOAMD64 GOEXPERIMENT

.PHONY: all deps test-deps build test lint fuzz fuzz-long faults soak bench pgo demo deb docker clean

all: build

deps:
	@sh scripts/deps.sh

test-deps:
	@sh scripts/deps.sh test

build: deps
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/roce-fwd

lint: deps
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Everything that needs no NIC: unit tests, EAL tests on vdevs, the
# command end to end, and a short run of every fuzz target.
test: test-deps lint
	$(GO) test -count=1 -timeout 20m ./...
	@$(MAKE) --no-print-directory fuzz

# Every fuzz target for FUZZTIME (scripts/fuzz.sh says how a fuzz engine
# timeout is told from a finding).
fuzz:
	@FUZZTIME=$(FUZZTIME) GO=$(GO) sh scripts/fuzz.sh

# Every fuzz target for 10 minutes, one worker each (FUZZ_PARALLEL), with a
# summary of executions per target. A failing input lands in the package's
# testdata/fuzz/ and is a regression seed of `make test` from then on.
fuzz-long: test-deps
	@FUZZTIME=$(FUZZTIME_LONG) FUZZ_PARALLEL=$(FUZZ_PARALLEL) GO=$(GO) sh scripts/fuzz.sh

# The fault tests at full length (the SIGKILL-and-restart loop 50 times
# instead of 5; make test runs the short forms).
faults: test-deps
	ROCE_FWD_FAULTS=1 $(GO) test -count=1 -timeout 30m -run 'Fault' -v ./pipeline ./cmd/roce-fwd

# The daemon for SOAK (30m) in roce mode with QoS shaping, flow rules, the
# console and Prometheus in use: fails when its RSS grows by more than 5%
# after warm-up, forwarding stops, or a packet is not accounted for.
soak: test-deps
	ROCE_FWD_SOAK=$(SOAK) $(GO) test -count=1 -timeout 0 -run '^TestSoak$$' -v ./cmd/roce-fwd

# roce-fwd against dpdk-testpmd (io, 5tswap) and DPDK's l3fwd (exact
# match, LPM, FIB) on the same vdevs, lcore and generated captures, on 2 MiB
# hugepages it reserves and gives back (see scripts/bench.sh for BENCH_ONLY,
# BENCH_MEM and the other knobs), then the per-packet Go benchmarks. Not a
# test: goals are marked met or missed, nothing fails on them.
bench: build
	@sh scripts/deps.sh bench
	@bash scripts/bench.sh $(BIN) $(BENCH_SECONDS) $(BENCH_ROUNDS)
	@echo
	$(GO) test -run '^$$' -bench 'Classify|ICRC|Stage|Observe|ResponderMix' -benchtime 2s ./roce ./rocestats ./qpstats
	@echo
	@echo "a worker's own cost per packet (a net_ring port looped to itself: no PMD work to speak of)"
	$(GO) test -run '^$$' -bench 'Poll' -benchtime 2s ./pipeline
	@echo
	@bash scripts/instructions.sh
	@echo
	@echo "software flow table: per-packet match on 1k rules, actions, insertion (rules/s)"
	$(GO) test -run '^$$' -bench 'Match1k|Apply|Compile1k' -benchtime 2s ./flowrule
	@echo "software backend: console-style insertion, one rule at a time up to 1k (rules/s)"
	$(GO) test -run '^$$' -bench 'SoftwareInsert1k' -benchtime 3x ./offload

# cmd/roce-fwd/default.pgo is the CPU profile `go build` optimises the
# binary with (profile-guided inlining puts the classifier and the per-QP
# table's passes into the worker's loop). It is the daemon's own profile
# (run --cpu-profile) forwarding the benchmark's captures in io, roce and
# roce + QoS modes; make it again after the data path changes.
pgo: build
	@bash scripts/pgo.sh $(BIN) cmd/roce-fwd/default.pgo

# The built-in default config for a few seconds: a RoCEv2 capture replayed
# through net_pcap into net_null, no NIC and no hugepages.
demo: build
	./$(BIN) run --duration 5s --stats-period 2s

# The Debian package out/roce-fwd_<version>_<arch>.deb (scripts/mkdeb.sh):
# the binary, the systemd unit, /etc/roce-fwd/roce-fwd.toml as a conffile,
# the dashboard and alert rules; Depends from what the binary links.
deb: build
	@sh scripts/deps.sh deb
	@sh scripts/mkdeb.sh $(BIN) out $(VERSION)

docker:
	docker build -t roce-fwd:$(VERSION) .

clean:
	rm -rf bin out
