//! topo-run's PMPI interposition library, `libtopo_preload.so`.
//!
//! `topo-run` puts it in `LD_PRELOAD` when it starts a dynamically linked MPI program, so
//! that an unmodified C, C++ or Fortran program gets topo-run's collectives. It exports
//! `MPI_Bcast`, `MPI_Reduce`, `MPI_Allreduce`, `MPI_Barrier`, `MPI_Allgather`, `MPI_Scan`,
//! `MPI_Exscan`, `MPI_Alltoall` and `MPI_Alltoallv` and their nonblocking forms,
//! `MPI_Gather`, `MPI_Scatter`, `MPI_Gatherv`, `MPI_Scatterv`, `MPI_Reduce_scatter_block`,
//! `MPI_Reduce_scatter` and `MPI_Allgatherv`, under their C
//! names and the Fortran ones of all three bindings (`mpi_bcast_`, `mpi_bcast_f08_`,
//! ...), plus `MPI_Init`,
//! `MPI_Init_thread`, `MPI_Finalize`, `MPI_Comm_free` and `MPI_Comm_disconnect` to set
//! up, tear down and keep its caches right.
//!
//! A call takes topo-run's path when its communicator has a context (`MPI_COMM_WORLD`, a
//! communicator congruent to it from its creation on, any other intracommunicator of two
//! or more ranks from its first blocking collective on), its datatype is predefined and
//! gap-free, its operation is a predefined one that the
//! standard defines on that datatype, and its arguments are ones MPI accepts. Everything
//! else goes, unchanged, to the `PMPI_*` entry point, so MPI's own behaviour (including
//! its error checks) is kept. The statistics (`TOPO_RUN_STATS=1`) say how many calls went
//! which way, and why.

//!
//! Unsafe code is denied but in the modules below that say why they need it. The FFI
//! is in two modules, one per direction: `abi` calls MPI (`PMPI_*`, its constants,
//! the callbacks it is handed), and `exports` and `fortran` are the symbols through
//! which the program calls the library. Beside them, the collectives see the C caller's
//! buffers as slices, and the state asserts the thread rule it relies on
//! (`state::global`). Each unsafe block carries a `// SAFETY:` comment.
#![deny(unsafe_code)]

// Unsafe: every call into MPI (the library calls `PMPI_*`), and the callbacks it hands
// MPI.
#[allow(unsafe_code)]
mod abi;
// Unsafe: an Allgather's C buffers, valid as the standard says for its counts and
// datatypes, seen as slices.
#[allow(unsafe_code)]
mod allgather;
// Unsafe: an Allgatherv's C buffers, valid as the standard says for its counts and
// datatypes, seen as slices.
#[allow(unsafe_code)]
mod allgatherv;
// Unsafe: an Alltoall's C buffers, valid as the standard says for its counts and
// datatypes, seen as slices.
#[allow(unsafe_code)]
mod alltoall;
// Unsafe: an Alltoallv's C buffers and count arrays, valid as the standard says, seen as
// slices.
#[allow(unsafe_code)]
mod alltoallv;
// Unsafe: a datatype's extent asked of MPI, received blocks unpacked into the C caller's
// buffer, and the C buffers of an Allgather or Alltoall seen as slices.
#[allow(unsafe_code)]
mod blocks;
// Unsafe: the C buffers of Bcast, Reduce and Allreduce and their nonblocking forms, seen
// as slices, and the application's `MPI_Request *` written.
#[allow(unsafe_code)]
mod calls;
pub mod classify;
mod collective;
mod completion;
// Unsafe: the exported `MPI_*` symbols, called from C with C's pointers.
#[allow(unsafe_code)]
mod exports;
// Unsafe: the exported Fortran symbols (`mpi_bcast_`, `mpi_bcast_f08_`, ...), called with Fortran's
// pointers.
#[allow(unsafe_code)]
mod fortran;
// Unsafe: a Gather's C buffers, valid as the standard says for its counts and datatypes,
// seen as slices.
#[allow(unsafe_code)]
mod gather;
// Unsafe: the C buffers and count arrays of a Gatherv or Scatterv, valid as the standard
// says, seen as slices.
#[allow(unsafe_code)]
mod gatherv;
// Unsafe: the application's buffer packed and unpacked (`PMPI_Pack`, `PMPI_Unpack`).
#[allow(unsafe_code)]
mod packed;
mod profile;
// Unsafe: a Scatter's C buffers, valid as the standard says for its counts and datatypes,
// seen as slices.
#[allow(unsafe_code)]
mod scatter;
mod state;
pub mod stats;
// Unsafe: the C count and displacement arrays of the v-form collectives seen as slices, and
// their blocks packed and unpacked at the caller's addresses.
#[allow(unsafe_code)]
mod varied;
