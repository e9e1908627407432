#!/usr/bin/env bash
# The project's test command: installs what is missing, then checks formatting, lints, runs
# every test, and builds the fuzz targets. Run from anywhere: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

echo "== cargo fmt --check"
cargo fmt --all --check

echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== tests"
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --locked --no-fail-fast
else
    cargo test --workspace --locked --no-fail-fast
fi

echo "== fuzz targets build (run them with: cargo fuzz run <target>, see fuzz/README.md)"
cargo build --manifest-path fuzz/Cargo.toml --locked --bins
