//! Integration tests of the runtime crate.

mod alltoall;
mod lanes;
mod nonblocking;
mod reduce_scatter;
mod rooted;
mod scan;
mod shm;
mod sim;
