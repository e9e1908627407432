#!/usr/bin/env bash
# The main job: install everything, build topo-run, start the private Slurm cluster with
# 2 emulated nodes, and run an MPI program through
#   srun --mpi=pmix topo-run --show -- ./mpi-hello
# Each rank prints its process groups to stderr, then becomes the MPI program. Last, a
# side-by-side: one unmodified C benchmark times MPI's collectives through topo-run and
# through MPI's own entry points in the same job, and prints the ratio (under 30 s).
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
echo "== side by side: benchmarks/preload-bench.c, an unmodified C program, times each call"
echo "   through topo-run (its own MPI_* calls, which libtopo_preload.so takes) and through"
echo "   MPI's own entry points (PMPI_*), interleaved in one job on 1 node x 2 ranks"
echo "   (Open MPI's shared-memory transport); medians of the slower rank's time per call."
echo "   ratio = topo-run / MPI's own: below 1, topo-run is faster"
mpicc.openmpi -O2 -o target/demo/preload-bench benchmarks/preload-bench.c
timeout 120 slurm/dev-cluster exec srun --mpi=pmix -N1 -n2 --exclusive --cpu-bind=cores \
    env OMPI_MCA_btl=self,vader topo-run -- target/demo/preload-bench 100 |
    awk -F, 'NR == 1 { printf "%-12s %10s %12s %12s %7s\n", "call", "bytes", "topo-run us", "MPI us", "ratio"; next }
             { printf "%-12s %10s %12s %12s %7s\n", $1, $2, $4, $5, $6 }'

echo
echo "The dev cluster is still running: slurm/dev-cluster status | exec CMD | stop"
