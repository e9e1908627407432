"""A small mpi4py application for the apps harness (benchmarks/apps/run.sh): a 1-D heat
equation on a ring of ranks, with halo exchanges (point to point), an Allreduce of the
residual every step, a Bcast of the parameters and a Gather of the result, at mpi4py's
default thread level. Rank 0 prints the final checksum, which must not depend on the
collectives' path: `checksum <value>`.

    srun --mpi=pmix topo-run -- python3 mpi4py-app.py [CELLS_PER_RANK] [STEPS]
"""

import sys

from mpi4py import MPI
import numpy as np

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
params = np.array(
    [float(sys.argv[1]) if len(sys.argv) > 1 else 20000.0,
     float(sys.argv[2]) if len(sys.argv) > 2 else 200.0, 0.25]
) if rank == 0 else np.empty(3)
comm.Bcast(params, root=0)
cells, steps, alpha = int(params[0]), int(params[1]), params[2]

x = (np.arange(cells) + rank * cells) / (cells * size)
u = 1.0 + np.sin(2 * np.pi * x) + 0.1 * np.cos(14 * np.pi * x)
left, right = (rank - 1) % size, (rank + 1) % size
halo = np.empty(2)
residual = np.empty(1)
for step in range(steps):
    reqs = [comm.Irecv(halo[0:1], source=left, tag=1), comm.Irecv(halo[1:2], source=right, tag=2),
            comm.Isend(u[-1:], dest=right, tag=1), comm.Isend(u[:1], dest=left, tag=2)]
    MPI.Request.Waitall(reqs)
    padded = np.concatenate((halo[:1], u, halo[1:]))
    new = u + alpha * (padded[:-2] - 2 * u + padded[2:])
    local = np.array([np.sum((new - u) ** 2)])
    comm.Allreduce(local, residual, op=MPI.SUM)
    u = new
total = np.empty(size) if rank == 0 else None
comm.Gather(np.array([np.sum(u)]), total, root=0)
norm = comm.allreduce(float(np.sum(u * u)), op=MPI.SUM)
if rank == 0:
    print(f"checksum {np.sum(total):.12e} {norm:.12e} {residual[0]:.12e}")
