//! The nonblocking collectives handed to MPI (`MPI_Ibcast`, `MPI_Ireduce`,
//! `MPI_Iallreduce`, `MPI_Iallgather`, `MPI_Ibarrier` and the others) where topo-run's
//! path does not take a call of the typed API: a [`Native`] describes the call on buffers
//! lent for good (`'static`: a request registered with a scope lends them,
//! `crate::request`), and [`Native::start`] posts it, returning the [`NativeRequest`] a
//! context tests.

use std::os::raw::c_int;

use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;

/// An MPI element count of `n`.
///
/// # Panics
/// If `n` exceeds MPI's `int`.
pub(crate) fn count(n: usize) -> c_int {
    c_int::try_from(n).expect("MPI element counts are limited to i32::MAX")
}

/// Anything a started collective owns until it completes (an in-place copy).
trait Owned {}
impl<T: ?Sized> Owned for T {}

/// An MPI call that starts a request on a communicator.
type Post = Box<dyn FnOnce(ffi::MPI_Comm, &mut ffi::MPI_Request)>;

/// A nonblocking collective for MPI to run, on buffers lent until it completes.
pub(crate) struct Native {
    post: Post,
    copy: Option<Box<dyn Owned>>,
}

/// In place, MPI gets a copy of the contribution (rsmpi has no `MPI_IN_PLACE`), which
/// the request owns until it completes; `None` if there is a send buffer.
fn in_place_copy<T: Copy + 'static>(send: Option<&[T]>, mine: Option<&[T]>) -> Option<Box<[T]>> {
    match (send, mine) {
        (None, Some(m)) => Some(m.to_vec().into_boxed_slice()),
        _ => None,
    }
}

/// The address of the send buffer or of its copy (null for neither).
fn send_ptr<T>(send: Option<&[T]>, copy: Option<&[T]>) -> *const T {
    send.or(copy).map_or(std::ptr::null(), <[T]>::as_ptr)
}

impl Native {
    fn new<T: 'static>(
        copy: Option<Box<[T]>>,
        post: impl FnOnce(ffi::MPI_Comm, &mut ffi::MPI_Request) + 'static,
    ) -> Self {
        Native {
            post: Box::new(post),
            copy: copy.map(|c| Box::new(c) as Box<dyn Owned>),
        }
    }

    /// `MPI_Ibcast` of `buf` from `root`.
    pub(crate) fn bcast<T: Equivalence + 'static>(buf: &'static mut [T], root: i32) -> Self {
        let (n, dt, ptr) = (
            count(buf.len()),
            T::equivalent_datatype().as_raw(),
            buf.as_mut_ptr(),
        );
        Native::new::<T>(None, move |comm, req| {
            // SAFETY: `buf` is lent until the request completes.
            unsafe { ffi::MPI_Ibcast(ptr.cast(), n, dt, root, comm, req) };
        })
    }

    /// `MPI_Ireduce` with `op` to `root`; `send` is `None` in place (the root's
    /// contribution is in `recv`), `recv` is `None` on the other ranks.
    pub(crate) fn reduce<T: Equivalence + Copy + 'static>(
        root: i32,
        send: Option<&'static [T]>,
        recv: Option<&'static mut [T]>,
        op: ffi::MPI_Op,
    ) -> Self {
        let n = send.map_or_else(|| recv.as_ref().map_or(0, |r| r.len()), <[T]>::len);
        let (n, dt) = (count(n), T::equivalent_datatype().as_raw());
        let copy = in_place_copy(send, recv.as_deref());
        let sp = send_ptr(send, copy.as_deref());
        let rp = recv.map_or(std::ptr::null_mut(), <[T]>::as_mut_ptr);
        Native::new(copy, move |comm, req| {
            // SAFETY: the buffers are lent until the request completes; the copy is owned
            // by it.
            unsafe { ffi::MPI_Ireduce(sp.cast(), rp.cast(), n, dt, op, root, comm, req) };
        })
    }

    /// `MPI_Iallreduce` with `op`; `send` is `None` in place.
    pub(crate) fn all_reduce<T: Equivalence + Copy + 'static>(
        send: Option<&'static [T]>,
        recv: &'static mut [T],
        op: ffi::MPI_Op,
    ) -> Self {
        let (n, dt) = (count(recv.len()), T::equivalent_datatype().as_raw());
        let copy = in_place_copy(send, Some(&*recv));
        let sp = send_ptr(send, copy.as_deref());
        let rp = recv.as_mut_ptr();
        Native::new(copy, move |comm, req| {
            // SAFETY: as for `reduce`.
            unsafe { ffi::MPI_Iallreduce(sp.cast(), rp.cast(), n, dt, op, comm, req) };
        })
    }

    /// `MPI_Ireduce_scatter_block` with `op`, blocks of `block` elements; `send` is `None`
    /// in place (the contribution is `recv`, whose first block gets the result).
    pub(crate) fn reduce_scatter_block<T: Equivalence + Copy + 'static>(
        send: Option<&'static [T]>,
        recv: &'static mut [T],
        block: usize,
        op: ffi::MPI_Op,
    ) -> Self {
        let (n, dt) = (count(block), T::equivalent_datatype().as_raw());
        let copy = in_place_copy(send, Some(&*recv));
        let sp = send_ptr(send, copy.as_deref());
        let rp = recv.as_mut_ptr();
        Native::new(copy, move |comm, req| {
            // SAFETY: as for `reduce`.
            unsafe { ffi::MPI_Ireduce_scatter_block(sp.cast(), rp.cast(), n, dt, op, comm, req) };
        })
    }

    /// `MPI_Iscan` (`exclusive` false) or `MPI_Iexscan` with `op`; `send` is `None` in
    /// place.
    pub(crate) fn scan<T: Equivalence + Copy + 'static>(
        send: Option<&'static [T]>,
        recv: &'static mut [T],
        op: ffi::MPI_Op,
        exclusive: bool,
    ) -> Self {
        let (n, dt) = (count(recv.len()), T::equivalent_datatype().as_raw());
        let copy = in_place_copy(send, Some(&*recv));
        let sp = send_ptr(send, copy.as_deref());
        let rp = recv.as_mut_ptr();
        Native::new(copy, move |comm, req| {
            // SAFETY: as for `reduce`.
            unsafe {
                if exclusive {
                    ffi::MPI_Iexscan(sp.cast(), rp.cast(), n, dt, op, comm, req);
                } else {
                    ffi::MPI_Iscan(sp.cast(), rp.cast(), n, dt, op, comm, req);
                }
            }
        })
    }

    /// `MPI_Iallgather` of blocks of `recv.len() / size` elements into `recv`; `send` is
    /// `None` when this rank's block (the `rank`th) is in place.
    pub(crate) fn all_gather<T: Equivalence + Copy + 'static>(
        send: Option<&'static [T]>,
        recv: &'static mut [T],
        rank: usize,
        size: usize,
    ) -> Self {
        let block = recv.len() / size;
        let (n, dt) = (count(block), T::equivalent_datatype().as_raw());
        let at = rank * block;
        let copy = in_place_copy(send, Some(&recv[at..at + block]));
        let sp = send_ptr(send, copy.as_deref());
        let rp = recv.as_mut_ptr();
        Native::new(copy, move |comm, req| {
            // SAFETY: as for `reduce`.
            unsafe { ffi::MPI_Iallgather(sp.cast(), n, dt, rp.cast(), n, dt, comm, req) };
        })
    }

    /// `MPI_Ialltoall` of blocks of `recv.len() / size` elements; `send` is `None` in
    /// place (the blocks to send are `recv`'s, copied for MPI).
    pub(crate) fn all_to_all<T: Equivalence + Copy + 'static>(
        send: Option<&'static [T]>,
        recv: &'static mut [T],
        size: usize,
    ) -> Self {
        let (n, dt) = (count(recv.len() / size), T::equivalent_datatype().as_raw());
        let copy = in_place_copy(send, Some(&recv[..]));
        let sp = send_ptr(send, copy.as_deref());
        let rp = recv.as_mut_ptr();
        Native::new(copy, move |comm, req| {
            // SAFETY: as for `reduce`.
            unsafe { ffi::MPI_Ialltoall(sp.cast(), n, dt, rp.cast(), n, dt, comm, req) };
        })
    }

    /// `MPI_Ialltoallv` of `send` to `recv`; `counts` are the send counts and
    /// displacements and the receive counts and displacements, in elements, which the
    /// request keeps until it completes.
    pub(crate) fn all_to_all_v<T: Equivalence + Copy + 'static>(
        send: &'static [T],
        recv: &'static mut [T],
        counts: [Vec<c_int>; 4],
    ) -> Self {
        let dt = T::equivalent_datatype().as_raw();
        let counts = Box::new(counts);
        let c = [0, 1, 2, 3].map(|i| counts[i].as_ptr());
        let (sp, rp) = (send.as_ptr(), recv.as_mut_ptr());
        Native {
            post: Box::new(move |comm, req| {
                // SAFETY: as for `reduce`; the counts live in the request's copy until it
                // completes.
                unsafe {
                    ffi::MPI_Ialltoallv(
                        sp.cast(),
                        c[0],
                        c[1],
                        dt,
                        rp.cast(),
                        c[2],
                        c[3],
                        dt,
                        comm,
                        req,
                    )
                };
            }),
            copy: Some(Box::new(counts) as Box<dyn Owned>),
        }
    }

    /// `MPI_Iallgatherv` of `send` into `recv` at the displacements of `counts` (the
    /// counts and displacements, in elements, which the request keeps until it completes).
    pub(crate) fn all_gather_v<T: Equivalence + Copy + 'static>(
        send: &'static [T],
        recv: &'static mut [T],
        counts: [Vec<c_int>; 2],
    ) -> Self {
        let dt = T::equivalent_datatype().as_raw();
        let counts = Box::new(counts);
        let c = [counts[0].as_ptr(), counts[1].as_ptr()];
        let (sp, n, rp) = (send.as_ptr(), count(send.len()), recv.as_mut_ptr());
        Native {
            post: Box::new(move |comm, req| {
                // SAFETY: as for `gather_v`.
                unsafe {
                    ffi::MPI_Iallgatherv(sp.cast(), n, dt, rp.cast(), c[0], c[1], dt, comm, req)
                };
            }),
            copy: Some(Box::new(counts) as Box<dyn Owned>),
        }
    }

    /// `MPI_Igatherv` of `send` to `root`: at the root `recv` holds the blocks at the
    /// displacements of `counts` (the counts and the displacements, in elements, which the
    /// request keeps until it completes); elsewhere both are `None`.
    pub(crate) fn gather_v<T: Equivalence + Copy + 'static>(
        send: &'static [T],
        recv: Option<&'static mut [T]>,
        counts: Option<[Vec<c_int>; 2]>,
        root: i32,
    ) -> Self {
        let dt = T::equivalent_datatype().as_raw();
        let counts = Box::new(counts);
        let c = counts
            .as_ref()
            .as_ref()
            .map_or([std::ptr::null(); 2], |c| [c[0].as_ptr(), c[1].as_ptr()]);
        let (sp, n) = (send.as_ptr(), count(send.len()));
        let rp = recv.map_or(std::ptr::null_mut(), <[T]>::as_mut_ptr);
        Native {
            post: Box::new(move |comm, req| {
                // SAFETY: as for `reduce`; the counts live in the request's copy until it
                // completes.
                unsafe {
                    ffi::MPI_Igatherv(sp.cast(), n, dt, rp.cast(), c[0], c[1], dt, root, comm, req)
                };
            }),
            copy: Some(Box::new(counts) as Box<dyn Owned>),
        }
    }

    /// `MPI_Iscatterv` from `root` into `recv`: at the root `send` holds the blocks at the
    /// displacements of `counts` (kept by the request as for `gather_v`); elsewhere both
    /// are `None`.
    pub(crate) fn scatter_v<T: Equivalence + Copy + 'static>(
        send: Option<&'static [T]>,
        counts: Option<[Vec<c_int>; 2]>,
        recv: &'static mut [T],
        root: i32,
    ) -> Self {
        let dt = T::equivalent_datatype().as_raw();
        let counts = Box::new(counts);
        let c = counts
            .as_ref()
            .as_ref()
            .map_or([std::ptr::null(); 2], |c| [c[0].as_ptr(), c[1].as_ptr()]);
        let sp = send.map_or(std::ptr::null(), <[T]>::as_ptr);
        let (rp, n) = (recv.as_mut_ptr(), count(recv.len()));
        Native {
            post: Box::new(move |comm, req| {
                // SAFETY: as for `gather_v`.
                unsafe {
                    ffi::MPI_Iscatterv(sp.cast(), c[0], c[1], dt, rp.cast(), n, dt, root, comm, req)
                };
            }),
            copy: Some(Box::new(counts) as Box<dyn Owned>),
        }
    }

    /// `MPI_Ibarrier`.
    pub(crate) fn barrier() -> Self {
        Native::new::<()>(None, |comm, req| {
            // SAFETY: a barrier has no buffers.
            unsafe { ffi::MPI_Ibarrier(comm, req) };
        })
    }

    /// Posts the collective on `comm`.
    pub(crate) fn start(self, comm: &SimpleCommunicator) -> NativeRequest {
        // SAFETY: reading a constant handle.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        (self.post)(comm.as_raw(), &mut req);
        NativeRequest {
            req,
            copy: self.copy,
        }
    }
}

/// A collective MPI runs for a context, active until [`NativeRequest::test`] says it
/// completed.
pub(crate) struct NativeRequest {
    req: ffi::MPI_Request,
    copy: Option<Box<dyn Owned>>,
}

// SAFETY: a request handle is a process-wide value (a pointer in Open MPI, an integer in
// MPICH), and the copy is plain data; which thread may test the request is the context's
// rule (`ContextState` calls MPI only from threads MPI's thread level allows).
unsafe impl Send for NativeRequest {}

impl NativeRequest {
    /// Tests the request; true once it has completed (MPI then frees it).
    pub(crate) fn test(&mut self) -> bool {
        // SAFETY: reading a constant handle.
        if self.req == unsafe { ffi::RSMPI_REQUEST_NULL } {
            return true;
        }
        let mut flag: c_int = 0;
        // SAFETY: an active request posted by `Native::start`; MPI_Test frees it and sets it
        // to null once it completes.
        unsafe { ffi::MPI_Test(&mut self.req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
        if flag == 0 {
            crate::ffi::comm::note_progress();
        }
        flag != 0
    }
}

impl Drop for NativeRequest {
    fn drop(&mut self) {
        // Dropped before it completed (the job is failing): MPI may still read the copy,
        // so it is left to the process.
        // SAFETY: reading a constant handle.
        if self.req != unsafe { ffi::RSMPI_REQUEST_NULL } {
            std::mem::forget(self.copy.take());
        }
    }
}
