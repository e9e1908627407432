//! Open MPI's progress engine: `opal_progress_register` and `opal_progress_unregister`,
//! found in the process at run time (libopen-pal, loaded with libmpi).

use std::ffi::{CStr, c_void};
use std::os::raw::c_int;

/// A callback of Open MPI's progress engine: returns how many events it completed.
pub type Callback = unsafe extern "C" fn() -> c_int;

/// Open MPI's `opal_progress_register` or `opal_progress_unregister`, if the process has
/// them.
fn opal_fn(name: &CStr) -> Option<unsafe extern "C" fn(Callback) -> c_int> {
    // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT searches the loaded objects.
    let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    // SAFETY: both functions have the C type `int (*)(int (*)(void))` in every Open MPI
    // release that defines them (opal/runtime/opal_progress.h).
    (!sym.is_null()).then(|| unsafe {
        std::mem::transmute::<*mut c_void, unsafe extern "C" fn(Callback) -> c_int>(sym)
    })
}

/// Asks Open MPI's progress engine to call `cb` in every turn. Returns whether it could
/// (false under other MPI libraries).
pub fn register(cb: Callback) -> bool {
    // SAFETY: registering a function of the type Open MPI expects, with MPI initialised.
    opal_fn(c"opal_progress_register").is_some_and(|register| unsafe { register(cb) } == 0)
}

/// Undoes [`register`].
pub fn unregister(cb: Callback) {
    if let Some(unregister) = opal_fn(c"opal_progress_unregister") {
        // SAFETY: a function registered by `register`; MPI is still running.
        unsafe { unregister(cb) };
    }
}
