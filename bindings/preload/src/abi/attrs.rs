//! Attribute caching, through which the library ties a context to its communicator and
//! its teardown to MPI's finalize: keyvals whose attributes are never copied and whose
//! delete callback is the library's, and attributes that hold an integer.

use std::ffi::c_void;
use std::os::raw::c_int;

use mpi::ffi;

use super::{MPI_Comm, SUCCESS};

/// The delete callback of an attribute key.
pub(crate) type DeleteFn = unsafe extern "C" fn(MPI_Comm, c_int, *mut c_void, *mut c_void) -> c_int;

/// A new attribute key whose attributes are never copied to duplicates (a duplicate gets
/// a context of its own, in `MPI_Comm_dup`) and call `delete` when MPI deletes them.
pub(crate) fn keyval_deleted_by(delete: DeleteFn) -> c_int {
    let mut keyval: c_int = ffi::MPI_KEYVAL_INVALID as c_int;
    // SAFETY: the callbacks have the signatures MPI expects; MPI writes the new key.
    unsafe {
        ffi::PMPI_Comm_create_keyval(
            Some(no_copy),
            Some(delete),
            &mut keyval,
            std::ptr::null_mut(),
        )
    };
    keyval
}

/// Frees a key made by [`keyval_deleted_by`] (MPI sets it to `MPI_KEYVAL_INVALID`).
pub(crate) fn free_keyval(keyval: &mut c_int) {
    // SAFETY: the library's own key; MPI writes one int.
    unsafe { ffi::PMPI_Comm_free_keyval(keyval) };
}

/// Whether `keyval` is a key (not `MPI_KEYVAL_INVALID`).
pub(crate) fn is_keyval(keyval: c_int) -> bool {
    keyval != ffi::MPI_KEYVAL_INVALID as c_int
}

/// Sets `comm`'s attribute `keyval` to the integer `value` (stored in the attribute's
/// pointer, never dereferenced).
pub(crate) fn set_attr(comm: MPI_Comm, keyval: c_int, value: usize) {
    // SAFETY: `comm` is a live communicator and `keyval` a key of the library's; the value
    // is an integer that nobody dereferences.
    unsafe { ffi::PMPI_Comm_set_attr(comm, keyval, value as *mut c_void) };
}

/// The copy callback of the library's keys: no copy.
extern "C" fn no_copy(
    _old: MPI_Comm,
    _keyval: c_int,
    _extra: *mut c_void,
    _value_in: *mut c_void,
    _value_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    if !flag.is_null() {
        // SAFETY: MPI passes a valid `int *`.
        unsafe { *flag = 0 };
    }
    SUCCESS
}
