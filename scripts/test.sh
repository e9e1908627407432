#!/usr/bin/env bash
# The project's test command: installs what is missing, then checks formatting, lints and
# the API docs' links, runs every test (unit, property, CLI, and end-to-end under a private
# Slurm cluster), and builds the fuzz targets. Run from anywhere: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

echo "== cargo fmt --check"
cargo fmt --all --check

echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo doc: every intra-doc link resolves"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --locked

echo "== no circle of imports between modules"
python3 scripts/check-cycles.py

echo "== tests"
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --locked --no-fail-fast
else
    cargo test --workspace --locked --no-fail-fast
fi

echo "== end-to-end: srun --mpi=pmix topo-run on the private Slurm cluster (1 and 2 nodes)"
cargo build --locked -p topo-run
if [ "$(id -u)" -eq 0 ]; then
    bash tests/e2e/launcher.sh target/debug/topo-run
else
    echo "test.sh: error: the end-to-end tests start a private Slurm cluster and need root" >&2
    exit 1
fi

echo "== end-to-end: coll-check on the dev cluster (1, 2 and 4 nodes, oversubscribed, mpirun, faults)"
cargo build --locked --release -p topo-run -p topo-tune -p topo-simulate -p topo-examples -p topo-preload
# The Rust programs and the PMPI library once more against MPICH (target/mpich), for the
# MPICH cases of runtime.sh and preload.sh.
MPICC=mpicc.mpich CARGO_TARGET_DIR=target/mpich cargo build --locked --release -p topo-examples -p topo-preload
bash tests/e2e/runtime.sh target/release

echo "== end-to-end: unmodified C and Fortran MPI programs through the PMPI library (1 and 2 nodes, faults)"
bash tests/e2e/preload.sh target/release

echo "== end-to-end: real applications (LAMMPS, HPCC, Quantum ESPRESSO, mpi4py) natively and under topo-run, tiny inputs"
bash tests/e2e/apps.sh target/release

echo "== end-to-end: topo-run doctor on the dev cluster (all OK, then each common mistake)"
bash tests/e2e/doctor.sh target/release

echo "== end-to-end: topo-run simulate --calibrate on the dev cluster, and the simulator reading its model"
bash tests/e2e/simulate.sh target/release

echo "== end-to-end: the site installation (install.sh, the installed tree without the build tree, modules, --uninstall, the Debian package)"
bash tests/e2e/install.sh

echo "== fuzz targets build (run them with: cargo fuzz run <target>, see fuzz/README.md)"
cargo build --manifest-path fuzz/Cargo.toml --locked --bins
