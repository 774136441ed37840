# The two commands of the quick start: `make demo` and `make test`.
.PHONY: demo test setup build lint advisories bench fuzz-smoke

setup:
	bash scripts/setup.sh

build: setup
	cargo build --release

demo: build
	bash scripts/demo.sh

# Every test tier: unit and pipeline tests, and the scenario tests that start the real
# binary (`cargo test` alone runs the first two, with no external tool). cargo-nextest
# runs each test in its own process, six at a time across binaries (most of a scenario
# test waits on its fleet), and every test even after one fails, so one run shows every
# failure (.config/nextest.toml; docs/testing.md#time). Cargo builds the binary the
# scenario tests start with the test binaries, so no separate build step; `--lib --tests`
# leaves out the bench's examples (34 s of a cold build; `make lint` still checks them).
test: setup
	cargo nextest run --release --features scenario --lib --tests

lint: setup
	python3 scripts/check_shape.py
	cargo fmt --all -- --check
	cargo clippy --release --all-targets --features scenario -- -D warnings
	cargo clippy --release -p chainedge-harness -- -D warnings

# Cargo.lock against the RustSec advisory database on disk (../shared/advisory-db, or
# ADVISORY_DB=...); accepted advisories and their reasons: .ci/advisories-accepted.toml.
# A machine without the database says so and skips (status 2 from the script).
advisories:
	python3 scripts/advisories.py --self-test
	python3 scripts/advisories.py $(if $(ADVISORY_DB),--db $(ADVISORY_DB)) || [ $$? -eq 2 ]

# Every bench script in turn (loopback only, about an hour on 2 cores); each rewrites its
# bench/RESULTS*.md with the date and the box (docs/benchmarks.md says how to read them).
bench: build
	bash bench/run.sh
	bash bench/rpc.sh
	bash bench/index.sh
	STORE=postgres bash bench/index.sh
	bash bench/sparse.sh
	bash bench/ws.sh
	bash bench/sse.sh
	bash bench/cluster.sh
	bash bench/write.sh
	bash bench/verify.sh

# Each fuzz target for 30 s on the stable toolchain, from the committed seeds with a fixed
# libFuzzer seed (CI runs this after the tests; longer runs: fuzz/run.sh, docs/fuzzing.md).
fuzz-smoke: setup
	cd fuzz && FUZZ_TOOLCHAIN=stable FUZZ_SEED=1 bash run.sh 30
