//! The MPI transport's nonblocking messages: `MPI_Isend` and `MPI_Irecv` on topo-run's
//! own communicator, each message in pieces of at most [`MAX_PIECE`] bytes (MPI counts
//! are `int`), tested to completion with `MPI_Testall`.
//!
//! The buffers are the transport's callers': [`crate::transport::Transport::poll_send`]
//! and `poll_recv` keep them in place until the transfer completes (a schedule lends them
//! for that long, a blocking call waits before it returns), and so do the callers here.

use std::os::raw::c_int;

use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;

/// The most bytes in one MPI message (1 GiB: well under `INT_MAX`).
pub const MAX_PIECE: usize = 1 << 30;

/// The pieces of a message of `len` bytes: `(offset, length)`; one empty piece for an empty
/// message.
pub fn pieces(len: usize, max: usize) -> impl Iterator<Item = (usize, usize)> {
    let n = len.div_ceil(max).max(1);
    (0..n).map(move |i| {
        let off = i * max;
        (off, (len - off).min(max))
    })
}

/// The outstanding MPI requests of one transfer.
#[derive(Debug, Default)]
pub(crate) struct Messages(Vec<ffi::MPI_Request>);

// SAFETY: request handles are process-wide values (pointers in Open MPI, integers in
// MPICH); which thread may test them is the context's rule (`Transport::calls_mpi`).
unsafe impl Send for Messages {}

impl Messages {
    /// Posts a message of `len` bytes as its pieces, `post(offset, length, request)`
    /// starting each.
    fn post_pieces(
        &mut self,
        len: usize,
        mut post: impl FnMut(usize, c_int, &mut ffi::MPI_Request),
    ) {
        for (off, piece) in pieces(len, MAX_PIECE) {
            // SAFETY: reading a constant handle.
            let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
            post(off, piece as c_int, &mut req);
            self.0.push(req);
        }
    }

    /// Posts `MPI_Isend`s of `data` to every rank in `to`, with `tag`, over `comm`. `data`
    /// stays put and unmodified until [`Messages::test_all`] says they completed.
    pub(crate) fn post_send(
        &mut self,
        comm: &SimpleCommunicator,
        to: &[u32],
        data: &[u8],
        tag: c_int,
    ) {
        let (byte, comm) = (u8::equivalent_datatype().as_raw(), comm.as_raw());
        for &r in to {
            self.post_pieces(data.len(), |off, len, req| {
                // SAFETY: `data` stays valid until the request completes (the module's
                // rule); the piece lies inside it.
                unsafe {
                    ffi::MPI_Isend(
                        data.as_ptr().add(off).cast(),
                        len,
                        byte,
                        r as c_int,
                        tag,
                        comm,
                        req,
                    )
                };
            });
        }
    }

    /// Posts an `MPI_Irecv` of `buf.len()` bytes from `from`, with `tag`, over `comm`.
    /// `buf` stays put and untouched until [`Messages::test_all`] says it completed.
    pub(crate) fn post_recv(
        &mut self,
        comm: &SimpleCommunicator,
        from: u32,
        buf: &mut [u8],
        tag: c_int,
    ) {
        let (byte, comm) = (u8::equivalent_datatype().as_raw(), comm.as_raw());
        let dst = buf.as_mut_ptr();
        self.post_pieces(buf.len(), |off, piece, req| {
            // SAFETY: `buf` has room for its length until completion (the module's rule);
            // the piece lies inside it.
            unsafe {
                ffi::MPI_Irecv(
                    dst.add(off).cast(),
                    piece,
                    byte,
                    from as c_int,
                    tag,
                    comm,
                    req,
                )
            };
        });
    }

    /// Tests the requests; true once all are complete (MPI frees them).
    pub(crate) fn test_all(&mut self) -> bool {
        let mut flag: c_int = 0;
        // SAFETY: active requests posted here (or MPI_REQUEST_NULL after completion);
        // MPI_Testall frees completed ones and sets them to null.
        unsafe {
            ffi::MPI_Testall(
                self.0.len() as c_int,
                self.0.as_mut_ptr(),
                &mut flag,
                ffi::RSMPI_STATUSES_IGNORE,
            );
        }
        if flag != 0 {
            self.0.clear();
        } else {
            crate::ffi::comm::note_progress();
        }
        flag != 0
    }
}
