#!/usr/bin/env bash
# The main job: install everything, build topo-run, start the private Slurm cluster with
# 2 emulated nodes, and run an MPI program through
#   srun --mpi=pmix topo-run --show -- ./mpi-hello
# Each rank prints its process groups to stderr, then becomes the MPI program.
# Needs root (apt-get and the Slurm daemons). The cluster keeps running afterwards;
# stop it with: slurm/dev-cluster stop
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo build --release --locked -p topo-run -p topo-preload
mkdir -p target/demo
mpicc.openmpi -O2 -o target/demo/mpi-hello examples/c/mpi-hello.c
slurm/dev-cluster start 2
export PATH="$PWD/target/release:$PATH"

echo
echo "== TOPO_RUN_STATS=1 srun --mpi=pmix -N2 -n4 --cpu-bind=cores topo-run --show --network-map slurm/maps/dev-cluster.yaml -- mpi-hello"
echo "   (mpi-hello is an unmodified C MPI program: topo-run preloads libtopo_preload.so, and"
echo "   its MPI_Allreduce and MPI_Bcast take topo-run's path; the stats lines say so)"
timeout 120 slurm/dev-cluster exec env TOPO_RUN_STATS=1 srun --mpi=pmix -N2 -n4 --exclusive --cpu-bind=cores \
    topo-run --show --network-map slurm/maps/dev-cluster.yaml -- target/demo/mpi-hello "$@"

echo
echo "== what each rank received: srun ... topo-run -- topo-run show --format json"
timeout 120 slurm/dev-cluster exec srun --mpi=pmix -N2 -n4 --exclusive --cpu-bind=cores \
    topo-run --network-map slurm/maps/dev-cluster.yaml -- topo-run show --format json | sort

echo
echo "The dev cluster is still running: slurm/dev-cluster status | exec CMD | stop"
