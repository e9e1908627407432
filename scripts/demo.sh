#!/usr/bin/env bash
# The main job for now: build topo-run and plan the coll/tcl paper's example cluster
# (3 nodes x 36 ranks, 16 nodes per leaf switch) offline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo build --release --locked -p topo-run
./target/release/topo-run plan \
    --job examples/jobs/paper.yaml --network-map examples/maps/paper.yaml "$@"
