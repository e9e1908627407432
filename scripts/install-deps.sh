#!/usr/bin/env bash
# Installs what topo-run needs to build, test and run on Debian 12: the C toolchain,
# Slurm and munge (for the private dev cluster), Open MPI, PMIx and hwloc (with their
# development files, and gfortran for the Fortran test program; mpi4py and NumPy for the
# Python test program), MPICH (its PMI-2 client
# runs under srun --mpi=pmi2 in the tests; Open MPI stays the default mpicc/mpirun),
# libclang (bindgen) and libudev (hwlocality links it), and for the installation tests
# Lmod, man-db, dpkg-dev and fakeroot (module files, man pages, the Debian package), and
# LAMMPS, HPCC and Quantum ESPRESSO for the applications harness (benchmarks/apps/).
# Idempotent; apt-get runs only when a package is missing, and then needs root.
set -euo pipefail

packages=(
    gcc g++ gfortran make pkg-config python3 python3-mpi4py python3-numpy procps util-linux
    slurm-wlm munge
    openmpi-bin libopenmpi-dev libpmix-dev
    mpich libmpich-dev
    libhwloc-dev hwloc
    libclang-dev clang libudev-dev
    lmod dpkg-dev fakeroot man-db
)

# install [APT_OPTION...] -- PACKAGE...: installs the packages that are missing (apt-get,
# as root; otherwise names them and fails).
install() {
    local opts=() p missing=()
    while [ "$1" != "--" ]; do opts+=("$1"); shift; done
    shift
    for p in "$@"; do
        if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
            missing+=("$p")
        fi
    done
    [ "${#missing[@]}" -gt 0 ] || return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: error: missing Debian packages: ${missing[*]}" >&2
        echo "install-deps: install them as root: apt-get install -y ${opts[*]} ${missing[*]}" >&2
        exit 1
    fi
    echo "install-deps: installing ${missing[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q "${opts[@]}" "${missing[@]}"
}

install -- "${packages[@]}"
# The real applications of benchmarks/apps/ (LAMMPS with its examples, for the peptide,
# HPCC, Quantum ESPRESSO), without their recommended documentation and data.
install --no-install-recommends -- lammps lammps-examples hpcc quantum-espresso

if ! command -v cargo >/dev/null 2>&1; then
    echo "install-deps: error: no Rust toolchain (cargo) on PATH." >&2
    echo "install-deps: topo-run needs Rust 1.89 or newer; install it with rustup" >&2
    echo "install-deps: (Debian 12's own cargo package is too old)." >&2
    exit 1
fi
echo "install-deps: ok ($(cargo --version))"
