# The two commands a fresh machine needs are `make run` and `make test` (see README.md).
GO ?= go
FUZZEXECS ?= 100000x

.PHONY: run build test test-deps vet fuzz bench-go

run:
	$(GO) run ./cmd/rtlab serve

build:
	$(GO) build -o rtlab ./cmd/rtlab

# test installs the third-party test clients, then vets, runs every test with the race
# detector, and gives each fuzz target a short run.
test: test-deps vet
	$(GO) test -race -count=1 -timeout 20m ./...
	$(MAKE) fuzz

test-deps:
	@if command -v npm >/dev/null; then \
	  for d in test/interop test/browser; do [ -f $$d/package.json ] && (cd $$d && npm ci --no-audit --no-fund --silent); done; true; \
	else echo "npm missing: third-party client and browser tests will be skipped"; fi

vet:
	@test -z "$$(gofmt -l cmd internal web 2>/dev/null)" || (gofmt -l cmd internal web; echo "gofmt needed"; exit 1)
	$(GO) vet ./...

fuzz:
	GO=$(GO) FUZZEXECS=$(FUZZEXECS) ./scripts/fuzz.sh

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...
