//! topo-run's PMPI interposition library, `libtopo_preload.so`.
//!
//! `topo-run` puts it in `LD_PRELOAD` when it starts a dynamically linked MPI program, so
//! that an unmodified C, C++ or Fortran program gets topo-run's collectives. It exports
//! `MPI_Bcast`, `MPI_Reduce`, `MPI_Allreduce`, `MPI_Barrier` and `MPI_Allgather` (and
//! their nonblocking forms, and for the first four the gfortran symbols
//! `mpi_bcast_`, `mpi_reduce_`, `mpi_allreduce_`, `mpi_barrier_`), plus `MPI_Init`,
//! `MPI_Init_thread`, `MPI_Finalize`, `MPI_Comm_free` and `MPI_Comm_disconnect` to set
//! up, tear down and keep its caches right.
//!
//! A call takes topo-run's path when its communicator is `MPI_COMM_WORLD` or congruent to
//! it, its datatype is predefined and gap-free, its operation is a predefined one that the
//! standard defines on that datatype, and its arguments are ones MPI accepts. Everything
//! else goes, unchanged, to the `PMPI_*` entry point, so MPI's own behaviour (including
//! its error checks) is kept. The statistics (`TOPO_RUN_STATS=1`) say how many calls went
//! which way, and why.

mod abi;
mod allgather;
mod calls;
pub mod classify;
mod completion;
mod exports;
mod fortran;
mod packed;
mod state;
pub mod stats;
