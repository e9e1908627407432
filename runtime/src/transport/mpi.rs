//! MPI point-to-point between nodes, on a private duplicate of the world communicator so
//! that the application's own messages never match ours. Ranks are world ranks.
//!
//! The blocking calls go through rsmpi. The nonblocking ones ([`Transport::poll_send`],
//! [`Transport::poll_recv`]) post raw `MPI_Isend`/`MPI_Irecv` under their own tag and test
//! them, because their buffers belong to a schedule that outlives any rsmpi scope here.
//! While a progress hook is installed ([`crate::with_progress_hook`]) the blocking calls
//! post the same messages nonblocking and test them, calling the hook in between.

use std::os::raw::c_int;

use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::point_to_point::{Destination, Source, send_receive_into};
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};

use super::{Transfer, Transport};
use crate::backoff::{self, Backoff};
use crate::combine::Combine;
use crate::error::{Error, Result};

/// The tag of nonblocking collectives' messages.
const NONBLOCKING_TAG: c_int = 0x7e57;
/// The tag of blocking collectives' messages (rsmpi's default).
const BLOCKING_TAG: c_int = 0;

/// Point-to-point over a duplicate of the world communicator.
pub struct MpiTransport {
    comm: SimpleCommunicator,
}

impl std::fmt::Debug for MpiTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MpiTransport({} ranks)", self.comm.size())
    }
}

impl MpiTransport {
    /// A transport over `comm`, which must be a duplicate of the world communicator
    /// reserved for topo-run.
    pub fn new(comm: SimpleCommunicator) -> Self {
        MpiTransport { comm }
    }
}

impl MpiTransport {
    fn count(len: usize) -> Result<c_int> {
        c_int::try_from(len).map_err(|_| Error::TooLarge { bytes: len })
    }

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
        let count = Self::count(data.len())?;
        let byte = u8::equivalent_datatype().as_raw();
        for &r in to {
            // SAFETY: per the contract, `data` stays valid until the request completes.
            let req = unsafe {
                let mut req = ffi::RSMPI_REQUEST_NULL;
                ffi::MPI_Isend(
                    data.as_ptr().cast(),
                    count,
                    byte,
                    r as c_int,
                    tag,
                    self.comm.as_raw(),
                    &mut req,
                );
                req
            };
            x.requests.push(req);
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
        let count = Self::count(len)?;
        // SAFETY: per the contract, `buf` has room for `len` bytes until completion.
        let req = unsafe {
            let mut req = ffi::RSMPI_REQUEST_NULL;
            ffi::MPI_Irecv(
                buf.cast(),
                count,
                u8::equivalent_datatype().as_raw(),
                from as c_int,
                tag,
                self.comm.as_raw(),
                &mut req,
            );
            req
        };
        x.requests.push(req);
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
    fn poll_send(&mut self, x: &mut Transfer, to: &[u32], data: &[u8]) -> Result<bool> {
        if !x.started {
            // SAFETY: the caller polls with the same `data` until this returns true.
            unsafe { self.post_send(x, to, data, NONBLOCKING_TAG)? };
            x.started = true;
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
        if backoff::hooked() {
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
        if backoff::hooked() {
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
        if backoff::hooked() {
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
