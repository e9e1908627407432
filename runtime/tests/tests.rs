//! Integration tests of the runtime crate.

mod sim;
