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
use std::sync::atomic::{AtomicUsize, Ordering};

use mpi::point_to_point::{Destination, Source, send_receive_into};
use mpi::topology::{Communicator, SimpleCommunicator};

use super::{Transfer, Transport};
use crate::backoff::Backoff;
use crate::combine::Combine;
use crate::error::Result;
use crate::progress_hook::hooked;

/// The tag of nonblocking collectives' messages.
const NONBLOCKING_TAG: c_int = 0x7e57;
/// The tag of blocking collectives' messages (rsmpi's default).
const BLOCKING_TAG: c_int = 0;

pub use crate::ffi::p2p::{MAX_PIECE, pieces};

/// Point-to-point over a communicator of topo-run's own ([`crate::private_comm`]).
pub struct MpiTransport {
    comm: SimpleCommunicator,
}

impl std::fmt::Debug for MpiTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MpiTransport({} ranks)", self.comm.size())
    }
}

/// Transports alive in this process: one per context (with the context's own
/// communicator, two communicators of topo-run's each).
static LIVE: AtomicUsize = AtomicUsize::new(0);

impl MpiTransport {
    /// A transport over `comm`, which must be a communicator over world's group reserved
    /// for topo-run ([`crate::private_comm`]).
    pub fn new(comm: SimpleCommunicator) -> Self {
        if crate::fault::hit("mpi-error") {
            crate::ffi::comm::call_errhandler(&comm);
        }
        LIVE.fetch_add(1, Ordering::Relaxed);
        MpiTransport { comm }
    }

    /// How many transports (contexts, kept ones included) this process holds.
    pub fn live() -> usize {
        LIVE.load(Ordering::Relaxed)
    }
}

impl Drop for MpiTransport {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

impl MpiTransport {
    /// Waits for `transfer`'s requests by testing them, calling the progress hook between tests
    /// (the blocking calls' form while a hook is installed).
    fn wait_polled(transfer: &mut Transfer) {
        let mut backoff = Backoff::new(0);
        while !transfer.messages.test_all() {
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
    fn poll_send(&mut self, transfer: &mut Transfer, to: &[u32], data: &[u8]) -> Result<bool> {
        if !transfer.started {
            transfer
                .messages
                .post_send(&self.comm, to, data, NONBLOCKING_TAG);
            transfer.started = true;
            return Ok(false);
        }
        Ok(transfer.messages.test_all())
    }

    fn poll_recv(
        &mut self,
        transfer: &mut Transfer,
        from: u32,
        buf: &mut [u8],
        op: Option<&dyn Combine>,
    ) -> Result<bool> {
        if !transfer.started {
            if op.is_some() {
                transfer.tmp = vec![0; buf.len()];
            }
            // Into our own `tmp`, or into `buf`, which the caller keeps in place and
            // untouched until this returns true.
            let dst = match op {
                Some(_) => &mut transfer.tmp[..],
                None => buf,
            };
            transfer
                .messages
                .post_recv(&self.comm, from, dst, NONBLOCKING_TAG);
            transfer.started = true;
            return Ok(false);
        }
        if !transfer.messages.test_all() {
            return Ok(false);
        }
        if let Some(op) = op {
            op.combine(buf, &transfer.tmp);
        }
        Ok(true)
    }

    fn send(&mut self, to: &[u32], data: &[u8]) -> Result<()> {
        if hooked() || data.len() > MAX_PIECE {
            let mut transfer = Transfer::default();
            // `data` is borrowed until the sends have completed below.
            transfer
                .messages
                .post_send(&self.comm, to, data, BLOCKING_TAG);
            Self::wait_polled(&mut transfer);
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
        if hooked() || buf.len() > MAX_PIECE {
            let mut transfer = Transfer::default();
            // `buf` is borrowed until the receive has completed below.
            transfer
                .messages
                .post_recv(&self.comm, from, buf, BLOCKING_TAG);
            Self::wait_polled(&mut transfer);
            return Ok(());
        }
        self.comm.process_at_rank(from as i32).receive_into(buf);
        Ok(())
    }

    fn sendrecv(&mut self, to: u32, data: &[u8], from: u32, buf: &mut [u8]) -> Result<()> {
        if hooked() || data.len().max(buf.len()) > MAX_PIECE {
            let mut transfer = Transfer::default();
            // `buf` and `data` are borrowed until both transfers have completed below.
            transfer
                .messages
                .post_recv(&self.comm, from, buf, BLOCKING_TAG);
            transfer
                .messages
                .post_send(&self.comm, &[to], data, BLOCKING_TAG);
            Self::wait_polled(&mut transfer);
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
