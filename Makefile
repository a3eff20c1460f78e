# The two commands a fresh machine needs are `make run` and `make test` (see README.md).
GO ?= go
FUZZEXECS ?= 100000x

.DEFAULT_GOAL := run
.PHONY: help run build test test-k6 test-deps vet fuzz bench-go bench-compare fault-matrix test-nats-current peers release image

# VERSION is what `rtlab version` and rtlab_build_info say: 0.9.0+12-g6e1cc73 past a release.
VERSION ?= $(shell ./scripts/version.sh)
BIN ?= rtlab
LDFLAGS = -X main.described=$(VERSION)

help:
	@echo 'make run       build ./rtlab and serve (README.md)'
	@echo 'make test      every test, as CI runs them (.ci/run installs what they need)'
	@echo 'make release   dist/: archives for linux and darwin, amd64 and arm64, SHA256SUMS, notes'
	@echo 'make image     dist/rtlab-<version>-image.tar, an OCI image (deploy/Dockerfile)'
	@echo 'make bench-compare REF=<commit> [TRANSPORTS=ws,sse USERS=10000 ROUNDS=2]: a hot-path change, before/after'
	@echo 'make fault-matrix [USERS_FAULTS=200]: broker restart, partition, node kill, delay on each broker; a table'
	@echo 'a suspected flake: go test -race -count=3 -run TestX ./pkg/, idle and under'
	@echo '  stress-ng --cpu 4 (CONTRIBUTING.md)'

# run builds ./rtlab, the binary the README's tour uses, and serves on the embedded broker.
run: build
	./rtlab serve

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/rtlab

# test installs the third-party test clients, then vets, runs every test with the race
# detector, and gives each fuzz target a short run. The idle readers' stack is measured once
# more without it: the race detector's frames are larger, so only a plain build shows 4 KiB.
test: test-deps vet
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list ./... | grep -v '/test/k6$$')
	$(GO) test -count=1 -run TestIdleReaderStack ./internal/transport/
	$(MAKE) test-k6
	$(MAKE) fuzz

# test-k6 runs the seed scripts' k6 suite (test/k6) after the other tests rather than beside
# them, so that its 200 users do not share the machine with timing-sensitive tests. It skips
# when k6 is missing (.ci/run builds it).
test-k6:
	$(GO) test -count=1 -timeout 10m ./test/k6/

test-deps:
	@if command -v npm >/dev/null; then \
	  for d in test/interop test/browser test/socketio clients/js; do [ -f $$d/package.json ] && (cd $$d && npm ci --no-audit --no-fund --silent); done; true; \
	else echo "npm missing: third-party client and browser tests will be skipped"; fi

vet:
	@test -z "$$(gofmt -l cmd internal web 2>/dev/null)" || (gofmt -l cmd internal web; echo "gofmt needed"; exit 1)
	$(GO) vet ./...

# test-nats-current runs the NATS broker's tests again, against a current nats-server built
# from the Go module proxy: Debian's (which `make test` uses) is 2.9.10, a new deployment runs
# a current one. The binary is kept in .cache/.
NATS_SERVER_VERSION ?= v2.15.2
NATS_SERVER_DIR = $(CURDIR)/.cache/nats-server-$(NATS_SERVER_VERSION)
test-nats-current:
	@test -x $(NATS_SERVER_DIR)/nats-server || GOBIN=$(NATS_SERVER_DIR) $(GO) install github.com/nats-io/nats-server/v2@$(NATS_SERVER_VERSION)
	$(NATS_SERVER_DIR)/nats-server --version
	PATH=$(NATS_SERVER_DIR):$$PATH RTLAB_REQUIRE_BROKERS=1 $(GO) test -race -count=1 ./internal/broker/nats/
	PATH=$(NATS_SERVER_DIR):$$PATH RTLAB_REQUIRE_BROKERS=1 $(GO) test -race -count=1 -run 'TestMultiNode/nats' ./internal/app/

# peers gets the servers `rtlab bench --server` compares rtlab with ready: centrifugo, installed
# into .cache/ with go install when missing (the version is bench.CentrifugoVersion's), and the
# Spring peer, built into .cache/ with Maven once per version of its sources. RabbitMQ's
# Web-STOMP comes with Debian's rabbitmq-server; --prepare checks that it is there.
CENTRIFUGO_VERSION ?= v6.9.1
CENTRIFUGO_DIR = $(CURDIR)/.cache/centrifugo-$(CENTRIFUGO_VERSION)
peers:
	@test -x $(CENTRIFUGO_DIR)/centrifugo || GOBIN=$(CENTRIFUGO_DIR) $(GO) install github.com/centrifugal/centrifugo/v6@$(CENTRIFUGO_VERSION)
	$(GO) run ./cmd/rtlab bench --server rtlab,centrifugo,rabbitmq,spring --prepare --centrifugo-bin $(CENTRIFUGO_DIR)/centrifugo

fuzz:
	GO=$(GO) FUZZEXECS=$(FUZZEXECS) ./scripts/fuzz.sh

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...

# bench-compare shows a hot-path change: REF's server against the work tree's, the same bench
# in --target mode, alternating A B A B; prints median p99, CPU per delivery and RSS per user.
REF ?= main
TRANSPORTS ?= ws
USERS ?= 10000
ROUNDS ?= 2
bench-compare:
	./scripts/bench-compare.sh $(REF) $(TRANSPORTS) $(USERS) $(ROUNDS)

# fault-matrix injects a broker restart, a partition, a node kill and a delay under load on
# each broker the lab starts, and prints what each cost (scripts/fault-matrix.sh).
USERS_FAULTS ?= 200
fault-matrix:
	./scripts/fault-matrix.sh $(USERS_FAULTS)

# release and image build into dist/ (scripts/release.sh, scripts/image.sh), as VERSION.
release:
	GO=$(GO) VERSION=$(VERSION) ./scripts/release.sh

image:
	GO=$(GO) VERSION=$(VERSION) ./scripts/image.sh
