# Ruleplane developer entry points. Build outputs live in the user's cache directory, not in the repo.
CACHE_DIR        ?= $(or $(RULEPLANE_CACHE),$(if $(XDG_CACHE_HOME),$(XDG_CACHE_HOME),$(HOME)/.cache)/ruleplane)
export CARGO_TARGET_DIR ?= $(CACHE_DIR)/target
CLUSTER          := tests/control-plane/cluster.sh

.PHONY: demo test test-matrix soak lint fmt build install check-install image dist bench control-plane cluster-up cluster-down cluster-status

## demo: bring up the local control plane (building it the first time) and run the manager on examples/
demo: build cluster-up
	@tests/control-plane/demo.sh

## test: every test, unit and integration (integration tests start their own real control plane), then the
## examples' own RuleTests as a user runs them (with the vendored CRDs of the kinds another tool installs)
test: control-plane
	cargo test --workspace --all-targets
	@tests/image/build.sh >/dev/null && tests/image/check.sh
	@tests/image/dist.sh >/dev/null
	@# A debug install here reuses the test build; a release one would add a cold release build to every CI run.
	@$(MAKE) --no-print-directory check-install INSTALL_FLAGS=--debug
	$(CARGO_TARGET_DIR)/debug/ruleplane test examples/ --crds examples/crds

## test-matrix: the integration tests whose behaviour depends on the Kubernetes version, on every supported
## version but the default (each plane built once; docs/compatibility.md). K8S_VERSION=1.36 make test runs all.
test-matrix: control-plane
	tests/control-plane/matrix.sh

## soak: the chaos soak (tests/chaos) for 30 minutes: replicas killed, frozen and cut off from a restarted
## kube-apiserver under a stream of changes and pods; `make test` runs it for 150 s
soak: control-plane
	RULEPLANE_SOAK_SECONDS=$${RULEPLANE_SOAK_SECONDS:-1800} cargo test -p ruleplane --test chaos -- --nocapture

## lint: the checks CI enforces (formatting, clippy, and one kube / k8s-openapi version in the tree)
lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	@dups=$$(cargo tree -d --workspace -e normal,build 2>/dev/null | grep -E '^(kube|kube-[a-z]+|k8s-openapi) v' | sort -u); \
	if [ -n "$$dups" ]; then echo "duplicate kube/k8s-openapi versions in the dependency tree:"; echo "$$dups"; exit 1; fi; \
	echo "one version each of kube and k8s-openapi in the tree"

fmt:
	cargo fmt --all

## bench: benchmarks that print figures (the manager on the local control plane, scheduler fidelity vs kube-scheduler)
bench: build
	tests/bench/manager.sh 5
	tests/bench/scheduler-fidelity.sh 1000 100

build:
	cargo build -p ruleplane

## install: `cargo install --locked --path manager`: ruleplane into ~/.cargo/bin (INSTALL_ROOT=DIR: into DIR/bin)
INSTALL_ROOT ?=
INSTALL_FLAGS ?=
install:
	cargo install --locked --path manager $(INSTALL_FLAGS) $(if $(INSTALL_ROOT),--root $(INSTALL_ROOT))

## check-install: `make install` into the cache, then the installed binary checks examples/ as the docs show
check-install:
	@$(MAKE) --no-print-directory install INSTALL_ROOT=$(CACHE_DIR)/install-check INSTALL_FLAGS="$(INSTALL_FLAGS)"
	$(CACHE_DIR)/install-check/bin/ruleplane --version
	$(CACHE_DIR)/install-check/bin/ruleplane validate examples/ --crds examples/crds
	$(CACHE_DIR)/install-check/bin/ruleplane test examples/ --crds examples/crds >/dev/null

## image: the container image (static binary, FROM scratch, user 65532) as an OCI archive in the cache, with buildah
image:
	@tests/image/build.sh

## dist: the image's static binary as $(CACHE_DIR)/dist/ruleplane-<version>-<target>.tar.gz and a .sha256 file
dist:
	@tests/image/dist.sh

## control-plane: build kube-apiserver/kube-controller-manager/kube-scheduler/kubectl and fetch etcd into the cache (once per version)
control-plane:
	@tests/control-plane/build.sh >/dev/null

cluster-up:
	@$(CLUSTER) up

cluster-down:
	@$(CLUSTER) down

cluster-status:
	@$(CLUSTER) status
