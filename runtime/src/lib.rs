//! Topology-aware collectives for programs started by `topo-run`.
//!
//! The launcher exports each rank's plan (its groups, bottom-up: caches, NUMA node,
//! socket, node, switches, world). This crate runs Bcast, Reduce, Allreduce and Barrier
//! level by level: inside a node through shared-memory queues ([`transport::shm`],
//! after coll/sharm), between nodes over MPI point-to-point ([`transport::mpi`]), each
//! level with its own algorithm (after coll/tcl). The algorithms are written once over
//! the [`transport::Transport`] trait; [`transport::sim`] runs them on threads for tests.

//!
//! Unsafe code is denied everywhere but in the modules below that say why they need it:
//! the FFI module ([`ffi`]), the shared-memory layout (`transport::shm`'s `segment` and
//! `queue`), and a few places that erase a lifetime or assert a thread rule the compiler
//! cannot see (below, and `nonblocking::schedule`). Each unsafe block there carries a
//! `// SAFETY:` comment.
#![deny(unsafe_code)]

pub mod allgather;
pub mod allgatherv;
pub mod allreduce;
pub mod alltoall;
mod backoff;
pub mod by_node;
pub use backoff::Pace;
pub mod barrier;
pub mod bcast;
pub mod combine;
// Unsafe: the context's state is `Send` by the thread rule of its MPI calls, and a serial
// lock where one thread reaches it.
#[allow(unsafe_code)]
mod context;
mod error;
pub mod fault;
pub mod gather;
pub mod gatherv;
// Unsafe: every call into MPI's C API, libc and Open MPI's progress engine.
#[allow(unsafe_code)]
pub mod ffi;
pub use ffi::private_comm;
pub mod lane;
pub mod links;
// Unsafe: a kept context (MPI handles, a segment's mapping) is sent between threads.
#[allow(unsafe_code)]
pub mod kept;
// Unsafe: the mark is placed in an ELF section of its own (`link_section`).
#[allow(unsafe_code)]
pub mod marker;
pub mod mpi_hook;
pub mod nonblocking;
// Unsafe: numbers seen as bytes, the SIMD combine kernels, MPI's predefined handles.
#[allow(unsafe_code)]
mod plain;
// Unsafe: a caller's borrowed closure kept in a thread-local for the extent of a call.
#[allow(unsafe_code)]
mod progress_hook;
pub use progress_hook::with_progress_hook;
pub mod progress_thread;
pub mod reduce;
pub mod reduce_scatter;
// Unsafe: a request lends its buffers to the engine and MPI without their lifetime.
#[allow(unsafe_code)]
pub mod request;
pub mod ring;
pub mod scan;
pub mod scatter;
pub mod scatterv;
// Unsafe: a lock that is `Sync` by its own rule (a flag where the program is serial).
#[allow(unsafe_code)]
pub mod serial_lock;
pub mod subtrees;
mod topo;
pub mod transport;
pub mod tree;
pub mod view;

pub use error::{Error, Result};
pub use plain::{MpiCombine, Numeric};
pub use request::{Progress, RawRequest, Request, wait_all, wait_any};
pub use topo::{
    ABORT_CODE, Fallback, KeptKeys, KeptOffer, KeptOffers, MPICH_CONTEXTS, SHM_DIR_ENV, Topo,
};
pub use topo_hierarchy::{LevelName, Settings};
