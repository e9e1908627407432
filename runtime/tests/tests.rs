//! Integration tests of the runtime crate.

mod shm;
mod sim;
