//! Topology-aware collectives for programs started by `topo-run`.
//!
//! The launcher exports each rank's plan (its groups, bottom-up: caches, NUMA node,
//! socket, node, switches, world). This crate runs Bcast, Reduce, Allreduce and Barrier
//! level by level: inside a node through shared-memory queues ([`transport::shm`],
//! after coll/sharm), between nodes over MPI point-to-point ([`transport::mpi`]), each
//! level with its own algorithm (after coll/tcl). The algorithms are written once over
//! the [`transport::Transport`] trait; [`transport::sim`] runs them on threads for tests.

pub mod allgather;
pub mod allreduce;
mod backoff;
pub use backoff::{Pace, with_progress_hook};
pub mod barrier;
pub mod bcast;
pub mod combine;
mod context;
mod error;
pub mod fault;
pub mod links;
pub mod marker;
pub mod mpi_hook;
pub mod nonblocking;
mod plain;
mod private_comm;
pub use private_comm::private_comm;
pub mod progress_thread;
pub mod reduce;
pub mod request;
pub mod ring;
pub mod serial_lock;
mod topo;
pub mod transport;
pub mod tree;
pub mod view;

pub use error::{Error, Result};
pub use plain::{MpiCombine, Numeric};
pub use request::{Progress, RawRequest, Request, wait_all, wait_any};
pub use topo::{ABORT_CODE, Fallback, SHM_DIR_ENV, Topo};
pub use topo_hierarchy::{LevelName, Settings};
