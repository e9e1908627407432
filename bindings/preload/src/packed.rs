//! Broadcasts of datatypes that are not one gap-free predefined type (derived types, and
//! the value-index pairs): packed into a contiguous buffer at the root (`PMPI_Pack`),
//! broadcast as bytes, unpacked at the other ranks (`PMPI_Unpack`).
//!
//! MPI lets ranks pass different datatypes to one broadcast as long as the type
//! signatures match (a contiguous type of 4 ints at the root, 4 `MPI_INT`s elsewhere). The
//! packed bytes of matching signatures are the same bytes, so deciding on the total size
//! alone keeps every rank on the same path, whatever datatype each one uses.

use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::OnceLock;

use mpi::ffi;

use crate::abi::{KeptType, MPI_Comm, MPI_Datatype, SUCCESS};
use crate::classify::{HandOff, signature_bytes};

/// What a collective of topo-run's still does after its data has moved: unpack into the
/// application's buffer. Returns MPI's code. A request holds it boxed ([`Kept::boxed`]).
pub(crate) trait Finish {
    fn finish(self: Box<Self>) -> c_int;
}

/// What a call keeps until its collective completes (the library's bytes it reads or
/// writes), and what it does then.
pub(crate) trait Kept: Sized + 'static {
    /// Unpacks what is left to unpack; returns MPI's code (an error also goes to the
    /// communicator's error handler).
    fn finish_now(self) -> c_int;

    /// Whether nothing is kept and nothing is left to do.
    fn is_empty(&self) -> bool;

    /// For a request: boxed, or nothing where nothing is kept (no allocation).
    fn boxed(self) -> Option<Box<dyn Finish>> {
        (!self.is_empty()).then(|| Box::new(self) as Box<dyn Finish>)
    }
}

impl<K: Kept> Finish for K {
    fn finish(self: Box<Self>) -> c_int {
        (*self).finish_now()
    }
}

impl Kept for Packed {
    fn finish_now(self) -> c_int {
        Packed::finish(self)
    }

    fn is_empty(&self) -> bool {
        false
    }
}

/// A broadcast's buffer in packed form.
pub(crate) struct Packed {
    /// The packed bytes: the root's data, or room for it at the other ranks.
    pub(crate) bytes: Vec<u8>,
    /// Where the other ranks unpack to (`None` at the root).
    unpack: Option<Target>,
}

impl Packed {
    /// The packed bytes, lent for good to the collective that moves them: the pending
    /// collective owns this `Packed` until it completes, and moving it does not move the
    /// bytes (they are on the heap).
    pub(crate) fn lend(&mut self) -> &'static mut [u8] {
        // SAFETY: as above; nothing else touches the bytes until the collective completes
        // and `finish` unpacks them.
        unsafe { std::slice::from_raw_parts_mut(self.bytes.as_mut_ptr(), self.bytes.len()) }
    }
}

/// The application's buffer of a rank that receives.
struct Target {
    buf: *mut c_void,
    count: c_int,
    /// The application's datatype, or a duplicate of it.
    dt: KeptType,
    comm: MPI_Comm,
}

/// The number of bytes `count` elements of `dt` carry (their packed size, the size of
/// their type signature), if MPI can say and topo-run takes that many
/// ([`signature_bytes`]).
pub(crate) fn packed_size(count: c_int, dt: MPI_Datatype) -> Result<usize, HandOff> {
    let mut size: c_int = 0;
    // SAFETY: `dt` is a handle from the application; MPI validates it; writes one int.
    let rc = unsafe { ffi::PMPI_Type_size(dt, &mut size) };
    if rc != SUCCESS || size < 0 {
        return Err(HandOff::Arguments);
    }
    signature_bytes(count, size as usize)
}

/// Packs `count` elements of `dt` at `buf`, which must carry `n` bytes (their packed
/// size); a type MPI cannot pack (not committed, say) or another size is for MPI to
/// report.
///
/// # Safety
/// `buf` holds `count` elements of `dt`.
pub(crate) unsafe fn pack(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    n: usize,
    comm: MPI_Comm,
) -> Result<Vec<u8>, HandOff> {
    let mut out = vec![0u8; n];
    if buf.is_null() {
        // SAFETY: per the contract; `out` has room for the `n` bytes.
        let rc = unsafe { at_bottom(buf, count, dt, out.as_mut_ptr().cast(), n, true) };
        return if rc == SUCCESS {
            Ok(out)
        } else {
            Err(HandOff::Arguments)
        };
    }
    let mut pos: c_int = 0;
    // SAFETY: per the contract; `out` has room for the `n` bytes.
    let rc = unsafe {
        ffi::PMPI_Pack(
            buf,
            count,
            dt,
            out.as_mut_ptr().cast(),
            n as c_int,
            &mut pos,
            comm,
        )
    };
    if rc != SUCCESS || pos as usize != n {
        return Err(HandOff::Arguments);
    }
    Ok(out)
}

/// Unpacks `bytes` (packed by [`pack`]) into `count` elements of `dt` at `buf`. Returns
/// MPI's code; an error also goes to `comm`'s error handler.
///
/// # Safety
/// `buf` has room for `count` elements of `dt`, whose signature carries `bytes.len()`
/// bytes.
pub(crate) unsafe fn unpack(
    bytes: &[u8],
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let rc = if buf.is_null() {
        // SAFETY: per the contract.
        unsafe {
            at_bottom(
                buf,
                count,
                dt,
                bytes.as_ptr().cast_mut().cast(),
                bytes.len(),
                false,
            )
        }
    } else {
        let mut pos: c_int = 0;
        // SAFETY: per the contract.
        unsafe {
            ffi::PMPI_Unpack(
                bytes.as_ptr().cast(),
                bytes.len() as c_int,
                &mut pos,
                buf,
                count,
                dt,
                comm,
            )
        }
    };
    if rc != SUCCESS {
        // SAFETY: the collective's communicator.
        unsafe { ffi::PMPI_Comm_call_errhandler(comm, rc) };
    }
    rc
}

/// Packs (`into_packed`) or unpacks `count` elements of `dt` at `MPI_BOTTOM` (`buf`, the
/// null pointer: a datatype of absolute addresses) to or from the `n` bytes at `packed`.
/// The standard allows `MPI_BOTTOM` there, but MPICH's `MPI_Pack` and `MPI_Unpack` refuse
/// a null buffer ("Null pointer in parameter inbuf"). So the bytes travel in a message
/// from this process to itself instead, sent or received as `MPI_PACKED`, which matches
/// any type signature and gives the bytes `MPI_Pack` would. Returns MPI's code.
///
/// # Safety
/// `dt`'s absolute addresses hold (or have room for) `count` elements; `packed` is valid
/// for `n` bytes (written when `into_packed`).
unsafe fn at_bottom(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    packed: *mut c_void,
    n: usize,
    into_packed: bool,
) -> c_int {
    const TAG: c_int = 0x7e58;
    let comm = self_comm();
    let packed_type = crate::abi::packed_type();
    // SAFETY: reading a constant.
    let ignore = unsafe { ffi::RSMPI_STATUS_IGNORE };
    // SAFETY: per the contract; both sides of the message are this process, on the
    // library's own communicator, so it matches nothing of the program's.
    unsafe {
        if into_packed {
            ffi::PMPI_Sendrecv(
                buf,
                count,
                dt,
                0,
                TAG,
                packed,
                n as c_int,
                packed_type,
                0,
                TAG,
                comm,
                ignore,
            )
        } else {
            ffi::PMPI_Sendrecv(
                packed,
                n as c_int,
                packed_type,
                0,
                TAG,
                buf.cast_mut(),
                count,
                dt,
                0,
                TAG,
                comm,
                ignore,
            )
        }
    }
}

/// The library's communicator over `MPI_COMM_SELF` for [`at_bottom`]'s messages (made
/// at its first use, a local call; errors return to the caller).
fn self_comm() -> MPI_Comm {
    struct Handle(MPI_Comm);
    // SAFETY: a communicator handle is a process-wide value, never written once set; MPI
    // decides which threads may use it.
    unsafe impl Send for Handle {}
    // SAFETY: as for `Send`.
    unsafe impl Sync for Handle {}
    static SELF: OnceLock<Handle> = OnceLock::new();
    SELF.get_or_init(|| {
        // SAFETY: reading a constant handle; MPI is initialised (a collective is running).
        let c = topo_runtime::private_comm(unsafe { ffi::RSMPI_COMM_SELF });
        // SAFETY: the library's own live communicator.
        unsafe { ffi::PMPI_Comm_set_errhandler(c, ffi::RSMPI_ERRORS_RETURN) };
        Handle(c)
    })
    .0
}

impl Packed {
    /// Packs `count` elements of `dt` from `buf` at the root, or makes room for them at
    /// another rank. With `keep_type`, a receiving rank keeps its own duplicate of `dt`
    /// (for a nonblocking call: the application may free its handle before completion).
    ///
    /// # Safety
    /// `buf`, `count`, `dt` and `comm` are the arguments of a broadcast: `buf` holds
    /// `count` elements of `dt`, and stays valid until [`Packed::finish`].
    pub(crate) unsafe fn new(
        buf: *mut c_void,
        count: c_int,
        dt: MPI_Datatype,
        comm: MPI_Comm,
        root: bool,
        keep_type: bool,
    ) -> Result<Packed, HandOff> {
        let n = packed_size(count, dt)?;
        if root {
            // SAFETY: `buf` holds the elements (per the contract).
            let bytes = unsafe { pack(buf, count, dt, n, comm) }?;
            return Ok(Packed {
                bytes,
                unpack: None,
            });
        }
        let bytes = vec![0u8; n];
        let dt = KeptType::new(dt, keep_type).ok_or(HandOff::Arguments)?;
        Ok(Packed {
            bytes,
            unpack: Some(Target {
                buf,
                count,
                dt,
                comm,
            }),
        })
    }

    /// After the broadcast: unpacks at a receiving rank. Returns MPI's code (an error
    /// also goes to the communicator's error handler).
    pub(crate) fn finish(mut self) -> c_int {
        let Some(t) = self.unpack.take() else {
            return SUCCESS;
        };
        // SAFETY: `bytes` holds the packed elements; `t.buf` is the application's buffer
        // for `t.count` elements of `t.dt` (per the contract of `new`).
        unsafe { unpack(&self.bytes, t.buf, t.count, t.dt.handle(), t.comm) }
    }
}
