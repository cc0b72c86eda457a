# vgpu_exporter build frame. The version ldflags match .promu.yml.

GO          ?= go
BIN         ?= vgpu_exporter
PKG         := ./cmd/vgpu_exporter
VERSION     := $(shell cat VERSION)
REVISION    := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH      := $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
BUILD_USER  := $(shell id -un 2>/dev/null || echo unknown)@$(shell hostname 2>/dev/null || echo unknown)
BUILD_DATE  := $(shell date -u +%Y%m%d-%H:%M:%S)
VERSION_PKG := github.com/prometheus/common/version
LDFLAGS     := -X $(VERSION_PKG).Version=$(VERSION) \
               -X $(VERSION_PKG).Revision=$(REVISION) \
               -X $(VERSION_PKG).Branch=$(BRANCH) \
               -X $(VERSION_PKG).BuildUser=$(BUILD_USER) \
               -X $(VERSION_PKG).BuildDate=$(BUILD_DATE)
RUN_ARGS    ?=
TUNER_MODE  ?= recommend
FUZZTIME    ?= 20s

# go-nvml's cgo headers mark many functions deprecated; the warnings are noise.
export CGO_CFLAGS := -Wno-deprecated-declarations
export CGO_ENABLED := 1

.PHONY: all build vgpusim pgo run test unit effects tables e2e e2e-pause e2e-kube lint bench fuzz clean mixin dashboards-png

all: lint build test

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) $(PKG)

# The offline scenario runner (docs/vgpusim.md).
vgpusim:
	$(GO) build -ldflags '$(LDFLAGS)' -o vgpusim ./cmd/vgpusim

# The CPU profile that every build of vgpusim is optimised with
# (cmd/vgpusim/default.pgo, Go's profile-guided optimisation): the simulator,
# attribution and recorder on the 8-GPU benchmark scenario. Regenerate it
# after changing those paths; the readings do not depend on it.
pgo:
	$(GO) test -count=1 -run '^$$' -bench 'EightGPUHot/static-equal' -benchtime 6x \
		-o $(CURDIR)/.pgo.test -cpuprofile $(CURDIR)/.pgo.prof ./simrun/
	mv .pgo.prof cmd/vgpusim/default.pgo
	rm -f .pgo.test

# The exporter on the default built-in simulator scenario, on :9949, with
# the tuner recommending only (TUNER_MODE=enforce lets it act).
run: build
	./$(BIN) --backend=sim --tuner.mode=$(TUNER_MODE) $(RUN_ARGS)

# The monitoring mixin's rule files (alerts/) and dashboards (dashboards/),
# generated from mixin/; a test in mixin/build fails when they are out of date.
mixin:
	$(GO) run ./mixin/build -mixin mixin -out .
	$(MAKE) --no-print-directory chart

# PNG images of every dashboard's panels for docs/ (not part of test): the
# exporter on a simulator scenario with the tuner in enforce mode, scraped by
# a real Prometheus for a few minutes, each panel's PromQL queried over the run.
dashboards-png: build
	$(GO) run ./mixin/render -exporter ./$(BIN) -out docs/img/dashboards

# Unit tests of every package (race detector on), the full-length scenario
# effects (too slow under the race detector, so run without it), then the
# end-to-end test.
test: unit effects e2e e2e-pause deploy-test e2e-kube

unit:
	$(GO) test -race -count=1 ./...

effects:
	$(GO) test -count=1 -run '^(TestScenarioEffects|TestSLOSlack|TestOracleAtLeastBaselines|TestOracleRunsOnEveryScenario|TestAutotuneEnergyWithSlack)$$' ./cmd/vgpusim/
	$(GO) test -count=1 -run '^(TestSharesConserveAndTrack|TestMetersConserveOnScenarios)$$' ./tenant/

# The scenario tables of scenarios/README.md ("Baselines, autotune and the
# oracle over three seeds", with the SLO slack table) and docs/tuning.md
# ("Measured"): every built-in scenario under each policy on each of
# TABLE_SEEDS, for its full duration (minutes); TABLE_ARGS are further
# flags of `vgpusim tables`, e.g. TABLE_SEEDS=4-6
# TABLE_ARGS='--policies static-equal,best-effort,autotune'.
TABLE_SEEDS ?= 1-3
TABLE_ARGS  ?= --slack
tables:
	$(GO) run ./cmd/vgpusim tables --seeds $(TABLE_SEEDS) $(TABLE_ARGS)

# The end-to-end test alone: the real binary scraped by a real Prometheus.
e2e:
	$(GO) test -count=1 -v -timeout=15m -tags=e2e ./test/e2e/

# Pausing real process trees through this machine's cgroup v2 and v1
# freezers and signals, and a kill -9 of the pulse's owner (as root; it
# skips otherwise, and fails under CI=true).
e2e-pause:
	$(GO) test -count=1 -v -timeout=5m -tags=e2e -run EndToEnd ./gpu/pause/

# The Helm chart in a real single-node Kubernetes cluster (test/kube/doc.go),
# in its own module (test/kube/go.mod pins the Kubernetes version). Builds
# the components once into ~/.cache/vgpu_exporter-kube; prints its times.
# Skips where the machine cannot run it; fails instead under CI=true.
e2e-kube:
	test/kube/run.sh

lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -tags=e2e ./...
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags=e2e ./...

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# Short runs of every fuzz target (FUZZTIME each).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$target"; \
	    $(GO) test -run='^$$' -fuzz="^$$target$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

clean:
	rm -f $(BIN) vgpusim .pgo.test .pgo.prof
	$(GO) clean -testcache

.PHONY: chart deploy-test

CHART := deploy/helm/vgpu-exporter

# Copies the mixin's generated rules and dashboards into the Helm chart,
# which cannot read files outside itself; a deploy test fails when the
# copies differ from alerts/ and dashboards/.
chart:
	rm -rf $(CHART)/files/alerts $(CHART)/files/dashboards
	mkdir -p $(CHART)/files/alerts $(CHART)/files/dashboards
	if [ -d alerts ]; then find alerts -maxdepth 1 -name '*.yaml' -exec cp {} $(CHART)/files/alerts/ \; ; fi
	if [ -d dashboards ]; then find dashboards -maxdepth 1 -name '*.json' -exec cp {} $(CHART)/files/dashboards/ \; ; fi

# The deployment tests, in their own module (deploy/go.mod keeps Helm and
# the Kubernetes API types out of the exporter's): the chart rendered and
# decoded strictly, the systemd unit verified, the container image built
# and run.
deploy-test:
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 -timeout=15m ./...
