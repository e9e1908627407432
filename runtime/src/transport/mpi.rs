//! MPI point-to-point between nodes, on a communicator of topo-run's own over world's
//! group ([`crate::private_comm`]) so that the application's own messages never match ours.
//! Ranks are world ranks.
//!
//! The blocking calls go through rsmpi. The nonblocking ones ([`Transport::poll_send`],
//! [`Transport::poll_recv`]) post raw `MPI_Isend`/`MPI_Irecv` under their own tag and test
//! them, because their buffers belong to a schedule that outlives any rsmpi scope here.
//! While a progress hook is installed ([`crate::with_progress_hook`]) the blocking calls
//! post the same messages nonblocking and test them, calling the hook in between.
//!
//! MPI counts are `int`, so a message longer than [`MAX_PIECE`] bytes travels as several
//! messages of at most that size, in order (MPI keeps the order of messages between two
//! ranks with one tag); both ends know the length, so both split it alike.

use std::os::raw::c_int;

use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::point_to_point::{Destination, Source, send_receive_into};
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};

use super::{Transfer, Transport};
use crate::backoff::{self, Backoff};
use crate::combine::Combine;
use crate::error::Result;

/// The tag of nonblocking collectives' messages.
const NONBLOCKING_TAG: c_int = 0x7e57;
/// The tag of blocking collectives' messages (rsmpi's default).
const BLOCKING_TAG: c_int = 0;

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

/// Posts a message of `len` bytes as its pieces ([`pieces`]: each of a length that fits
/// an `int`), `post(offset, length, request)` starting each, and keeps the requests in
/// `x`.
fn post_pieces(
    x: &mut Transfer,
    len: usize,
    mut post: impl FnMut(usize, c_int, &mut ffi::MPI_Request),
) {
    for (off, piece) in pieces(len, MAX_PIECE) {
        // SAFETY: reading a constant handle.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        post(off, piece as c_int, &mut req);
        x.requests.push(req);
    }
}

/// Point-to-point over a communicator of topo-run's own ([`crate::private_comm`]).
pub struct MpiTransport {
    comm: SimpleCommunicator,
}

impl std::fmt::Debug for MpiTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MpiTransport({} ranks)", self.comm.size())
    }
}

impl MpiTransport {
    /// A transport over `comm`, which must be a communicator over world's group reserved
    /// for topo-run ([`crate::private_comm`]).
    pub fn new(comm: SimpleCommunicator) -> Self {
        if crate::fault::hit("mpi-error") {
            // SAFETY: a live communicator; MPI runs its error handler with the code.
            unsafe { ffi::PMPI_Comm_call_errhandler(comm.as_raw(), ffi::MPI_ERR_OTHER as c_int) };
        }
        MpiTransport { comm }
    }
}

impl MpiTransport {
    /// Tests `x`'s requests; true once all are complete.
    fn test_all(x: &mut Transfer) -> bool {
        let mut flag: c_int = 0;
        // SAFETY: `requests` are active requests this transfer posted (or MPI_REQUEST_NULL
        // after completion); MPI_Testall frees completed ones and sets them to null.
        unsafe {
            ffi::MPI_Testall(
                x.requests.len() as c_int,
                x.requests.as_mut_ptr(),
                &mut flag,
                ffi::RSMPI_STATUSES_IGNORE,
            );
        }
        if flag != 0 {
            x.requests.clear();
        }
        flag != 0
    }
}

impl MpiTransport {
    /// Posts `MPI_Isend`s of `data` to every rank in `to` with `tag` into `x`.
    ///
    /// # Safety
    /// `data` must stay valid and unmodified until `x`'s requests complete.
    unsafe fn post_send(
        &self,
        x: &mut Transfer,
        to: &[u32],
        data: &[u8],
        tag: c_int,
    ) -> Result<()> {
        let (byte, comm) = (u8::equivalent_datatype().as_raw(), self.comm.as_raw());
        for &r in to {
            post_pieces(x, data.len(), |off, len, req| {
                // SAFETY: per the contract, `data` stays valid until the request
                // completes; the piece lies inside it.
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
        Ok(())
    }

    /// Posts an `MPI_Irecv` of `buf.len()` bytes from `from` with `tag` into `x`.
    ///
    /// # Safety
    /// `buf` must stay valid and untouched until `x`'s requests complete.
    unsafe fn post_recv(
        &self,
        x: &mut Transfer,
        from: u32,
        buf: *mut u8,
        len: usize,
        tag: c_int,
    ) -> Result<()> {
        let (byte, comm) = (u8::equivalent_datatype().as_raw(), self.comm.as_raw());
        post_pieces(x, len, |off, piece, req| {
            // SAFETY: per the contract, `buf` has room for `len` bytes until completion;
            // the piece lies inside it.
            unsafe {
                ffi::MPI_Irecv(
                    buf.add(off).cast(),
                    piece,
                    byte,
                    from as c_int,
                    tag,
                    comm,
                    req,
                )
            };
        });
        Ok(())
    }

    /// Waits for `x`'s requests by testing them, calling the progress hook between tests
    /// (the blocking calls' form while a hook is installed).
    fn wait_polled(x: &mut Transfer) {
        let mut backoff = Backoff::new(0);
        while !Self::test_all(x) {
            backoff.pause();
        }
    }
}

impl Transport for MpiTransport {
    fn calls_mpi(&self) -> bool {
        true
    }

    fn posts_ahead(&self) -> bool {
        true
    }

    // The first poll of a transfer only posts it (`posts_ahead`): testing right away would
    // drive MPI's progress engine once more (a system call on TCP) for a message that has
    // only just left, and that cost falls on the call that starts the collective.
    fn poll_send(&mut self, x: &mut Transfer, to: &[u32], data: &[u8]) -> Result<bool> {
        if !x.started {
            // SAFETY: the caller polls with the same `data` until this returns true.
            unsafe { self.post_send(x, to, data, NONBLOCKING_TAG)? };
            x.started = true;
            return Ok(false);
        }
        Ok(Self::test_all(x))
    }

    fn poll_recv(
        &mut self,
        x: &mut Transfer,
        from: u32,
        buf: &mut [u8],
        op: Option<&dyn Combine>,
    ) -> Result<bool> {
        if !x.started {
            if op.is_some() {
                x.tmp = vec![0; buf.len()];
            }
            let dst = match op {
                Some(_) => x.tmp.as_mut_ptr(),
                None => buf.as_mut_ptr(),
            };
            // SAFETY: `dst` is our own `tmp`, or `buf`, which the caller keeps in place and
            // untouched until this returns true.
            unsafe { self.post_recv(x, from, dst, buf.len(), NONBLOCKING_TAG)? };
            x.started = true;
            return Ok(false);
        }
        if !Self::test_all(x) {
            return Ok(false);
        }
        if let Some(op) = op {
            op.combine(buf, &x.tmp);
        }
        Ok(true)
    }

    fn send(&mut self, to: &[u32], data: &[u8]) -> Result<()> {
        if backoff::hooked() || data.len() > MAX_PIECE {
            let mut x = Transfer::default();
            // SAFETY: `data` is borrowed until the sends have completed below.
            unsafe { self.post_send(&mut x, to, data, BLOCKING_TAG)? };
            Self::wait_polled(&mut x);
            return Ok(());
        }
        match to {
            [] => {}
            [one] => self.comm.process_at_rank(*one as i32).send(data),
            many => mpi::request::scope(|scope| {
                let reqs: Vec<_> = many
                    .iter()
                    .map(|&r| {
                        self.comm
                            .process_at_rank(r as i32)
                            .immediate_send(scope, data)
                    })
                    .collect();
                for r in reqs {
                    r.wait();
                }
            }),
        }
        Ok(())
    }

    fn recv(&mut self, from: u32, buf: &mut [u8]) -> Result<()> {
        if backoff::hooked() || buf.len() > MAX_PIECE {
            let mut x = Transfer::default();
            // SAFETY: `buf` is borrowed until the receive has completed below.
            unsafe { self.post_recv(&mut x, from, buf.as_mut_ptr(), buf.len(), BLOCKING_TAG)? };
            Self::wait_polled(&mut x);
            return Ok(());
        }
        self.comm.process_at_rank(from as i32).receive_into(buf);
        Ok(())
    }

    fn sendrecv(&mut self, to: u32, data: &[u8], from: u32, buf: &mut [u8]) -> Result<()> {
        if backoff::hooked() || data.len().max(buf.len()) > MAX_PIECE {
            let mut x = Transfer::default();
            // SAFETY: `buf` is borrowed until both transfers have completed below.
            unsafe { self.post_recv(&mut x, from, buf.as_mut_ptr(), buf.len(), BLOCKING_TAG)? };
            // SAFETY: as for the receive.
            unsafe { self.post_send(&mut x, &[to], data, BLOCKING_TAG)? };
            Self::wait_polled(&mut x);
            return Ok(());
        }
        let (dst, src) = (
            self.comm.process_at_rank(to as i32),
            self.comm.process_at_rank(from as i32),
        );
        send_receive_into(data, &dst, buf, &src);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_split_into_pieces_that_cover_them_in_order() {
        assert_eq!(pieces(0, 4).collect::<Vec<_>>(), [(0, 0)]);
        assert_eq!(pieces(4, 4).collect::<Vec<_>>(), [(0, 4)]);
        assert_eq!(pieces(9, 4).collect::<Vec<_>>(), [(0, 4), (4, 4), (8, 1)]);
        // 2.5 GiB: three messages, each within MPI's int count.
        let big = 5usize << 29;
        let p: Vec<_> = pieces(big, MAX_PIECE).collect();
        assert_eq!(p.len(), 3);
        assert!(p.iter().all(|&(_, l)| l <= i32::MAX as usize && l > 0));
        assert_eq!(p.iter().map(|&(_, l)| l).sum::<usize>(), big);
        assert!(p.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
    }
}
