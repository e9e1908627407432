//! The entry points of collective calls: a call the library knows goes to MPI (its
//! communicator declined, or its operation one topo-run does not run: `state::handed`)
//! is handed there at once, without entering the library; any other runs as
//! [`abi::entry`] runs it.

use std::os::raw::c_int;

use crate::abi::{self, MPI_Comm, MPI_Op};
use crate::state;

/// [`abi::entry`] for a collective on `comm`.
#[inline]
pub(crate) fn entry(
    comm: MPI_Comm,
    ours: impl FnOnce() -> bool,
    native: impl FnOnce() -> c_int,
) -> c_int {
    entry_rc(comm, || ours().then_some(abi::SUCCESS), native)
}

/// [`abi::entry_rc`] for a collective on `comm`.
#[inline]
pub(crate) fn entry_rc(
    comm: MPI_Comm,
    ours: impl FnOnce() -> Option<c_int>,
    native: impl FnOnce() -> c_int,
) -> c_int {
    if let Some(why) = state::handed_known(comm) {
        crate::profile::note_handed(why);
        return native();
    }
    abi::entry_rc(Some(comm), ours, native)
}

/// [`entry`] for a reduction with `op`.
#[inline]
pub(crate) fn reduction(
    comm: MPI_Comm,
    op: MPI_Op,
    ours: impl FnOnce() -> bool,
    native: impl FnOnce() -> c_int,
) -> c_int {
    if state::handed_op_known(op) {
        return native();
    }
    entry(comm, ours, native)
}
