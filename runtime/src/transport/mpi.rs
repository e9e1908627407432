//! MPI point-to-point between nodes, on a private duplicate of the world communicator so
//! that the application's own messages never match ours. Ranks are world ranks.
//!
//! The blocking calls go through rsmpi. The nonblocking ones ([`Transport::poll_send`],
//! [`Transport::poll_recv`]) post raw `MPI_Isend`/`MPI_Irecv` under their own tag and test
//! them, because their buffers belong to a schedule that outlives any rsmpi scope here.

use std::os::raw::c_int;

use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::point_to_point::{Destination, Source, send_receive_into};
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};

use super::{Transfer, Transport};
use crate::combine::Combine;
use crate::error::{Error, Result};

/// The tag of nonblocking collectives' messages (the blocking ones use rsmpi's default, 0).
const NONBLOCKING_TAG: c_int = 0x7e57;

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

impl Transport for MpiTransport {
    fn poll_send(&mut self, x: &mut Transfer, to: &[u32], data: &[u8]) -> Result<bool> {
        if !x.started {
            let count = Self::count(data.len())?;
            let byte = u8::equivalent_datatype().as_raw();
            for &r in to {
                // SAFETY: `data` stays valid and unmodified until the request completes
                // (the caller polls with the same buffer until this returns true).
                let req = unsafe {
                    let mut req = ffi::RSMPI_REQUEST_NULL;
                    ffi::MPI_Isend(
                        data.as_ptr().cast(),
                        count,
                        byte,
                        r as c_int,
                        NONBLOCKING_TAG,
                        self.comm.as_raw(),
                        &mut req,
                    );
                    req
                };
                x.requests.push(req);
            }
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
            let count = Self::count(buf.len())?;
            if op.is_some() {
                x.tmp = vec![0; buf.len()];
            }
            let dst = match op {
                Some(_) => x.tmp.as_mut_ptr(),
                None => buf.as_mut_ptr(),
            };
            // SAFETY: `dst` (our own `tmp`, or `buf`, which the caller keeps in place and
            // untouched until this returns true) has room for `count` bytes.
            let req = unsafe {
                let mut req = ffi::RSMPI_REQUEST_NULL;
                ffi::MPI_Irecv(
                    dst.cast(),
                    count,
                    u8::equivalent_datatype().as_raw(),
                    from as c_int,
                    NONBLOCKING_TAG,
                    self.comm.as_raw(),
                    &mut req,
                );
                req
            };
            x.requests.push(req);
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
        self.comm.process_at_rank(from as i32).receive_into(buf);
        Ok(())
    }

    fn sendrecv(&mut self, to: u32, data: &[u8], from: u32, buf: &mut [u8]) -> Result<()> {
        let (dst, src) = (
            self.comm.process_at_rank(to as i32),
            self.comm.process_at_rank(from as i32),
        );
        send_receive_into(data, &dst, buf, &src);
        Ok(())
    }
}
