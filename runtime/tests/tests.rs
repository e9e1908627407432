//! Integration tests of the runtime crate.

mod lanes;
mod nonblocking;
mod shm;
mod sim;
