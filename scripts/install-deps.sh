#!/usr/bin/env bash
# Installs what topo-run needs to build and test on Debian 12. Idempotent; needs root for
# apt-get (it is skipped when everything is already there).
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
command -v c++ >/dev/null 2>&1 || need_apt+=(g++)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v make >/dev/null 2>&1 || need_apt+=(make)

if [ "${#need_apt[@]}" -gt 0 ]; then
    echo "install-deps: installing ${need_apt[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${need_apt[@]}"
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "install-deps: error: no Rust toolchain (cargo) on PATH." >&2
    echo "install-deps: topo-run needs Rust 1.89 or newer; install it with rustup" >&2
    echo "install-deps: (Debian 12's own cargo package is too old)." >&2
    exit 1
fi
echo "install-deps: ok ($(cargo --version))"
