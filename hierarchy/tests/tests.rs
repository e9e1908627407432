//! Integration tests of the hierarchy model: the paper's worked example, hand-checked
//! cluster shapes, and property tests.

mod cases;
mod properties;
