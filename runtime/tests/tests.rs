//! Integration tests of the runtime crate.

mod lanes;
mod nonblocking;
mod rooted;
mod scan;
mod shm;
mod sim;
