"""mpi4py-cases: an mpi4py program through topo-run's PMPI library.

Blocking and nonblocking collectives on world, a duplicate, an order-keeping split and a
reversed split (and nonblocking ones only on another duplicate), with NumPy buffers (MPI_Allreduce, _Bcast, _Allgather, _Barrier, and their
MPI_I* forms completed together by one Waitall) and with pickled Python objects
(allreduce, bcast, allgather). MPI is initialised at mpi4py's default thread level,
MPI_THREAD_MULTIPLE, unless a level is given (--thread-level single, funneled,
serialized or multiple). topo-run preloads its PMPI library into the interpreter by
itself: it asks the interpreter where mpi4py is, and mpi4py's extension module names the
MPI library. Rank 0 prints "mpi4py: OK" or "mpi4py: FAILED" last.

    srun --mpi=pmix topo-run -- python3 mpi4py-cases.py [--thread-level LEVEL]
"""

import sys

import mpi4py

if "--thread-level" in sys.argv:
    mpi4py.rc.thread_level = sys.argv[sys.argv.index("--thread-level") + 1]

from mpi4py import MPI  # noqa: E402 (after the thread level is chosen)
import numpy as np  # noqa: E402

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
ok = True
for comm in (world, world.Dup(), world.Split(0, rank), world.Split(0, size - rank)):
    me = comm.Get_rank()
    a = np.arange(1000, dtype="f8") + me
    b = np.empty_like(a)
    comm.Allreduce(a, b, op=MPI.SUM)
    ok &= bool(np.allclose(b, np.arange(1000) * size + size * (size - 1) / 2))
    x = np.full(10, 42 if me == 0 else -1, dtype="i4")
    comm.Bcast(x, root=0)
    ok &= bool((x == 42).all())
    g = np.empty(size, dtype="i8")
    comm.Allgather(np.array([me], dtype="i8"), g)
    ok &= bool((g == np.arange(size)).all())
    ok &= comm.allreduce(me) == size * (size - 1) // 2
    ok &= comm.bcast({"from": me} if me == 0 else None, root=0) == {"from": 0}
    ok &= comm.allgather(me) == list(range(size))
    y = np.full(5, 7 if me == 0 else 0, dtype="i4")
    gg = np.empty(size, dtype="i8")
    requests = [
        comm.Iallreduce(a, b, op=MPI.SUM),
        comm.Ibarrier(),
        comm.Ibcast(y, root=0),
        comm.Iallgather(np.array([me], dtype="i8"), gg),
    ]
    MPI.Request.Waitall(requests)
    ok &= bool((y == 7).all() and (gg == np.arange(size)).all())
    ok &= bool(np.allclose(b, np.arange(1000) * size + size * (size - 1) / 2))
    comm.Barrier()
    if comm is not world:
        comm.Free()
# A duplicate whose collectives are all nonblocking, as many of mpi4py's are: its context
# comes with it (in MPI_Comm_dup, at every thread level), so they take topo-run's path.
nb = world.Dup()
c = np.empty(1000, dtype="f8")
for _ in range(3):
    nb.Iallreduce(np.arange(1000, dtype="f8") + rank, c, op=MPI.SUM).Wait()
    ok &= bool(np.allclose(c, np.arange(1000) * size + size * (size - 1) / 2))
nb.Ibarrier().Wait()
nb.Free()
if world.allreduce(ok, op=MPI.LAND):
    verdict = "OK"
else:
    verdict = "FAILED"
if rank == 0:
    print("mpi4py:", verdict)
