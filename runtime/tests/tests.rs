//! Integration tests of the runtime crate.

mod nonblocking;
mod shm;
mod sim;
