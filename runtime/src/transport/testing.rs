//! Transports for unit tests.

use super::{Fabric, Transfer, Transport};
use crate::combine::Combine;
use crate::error::Result;

/// A network-like transport: the first poll of a transfer posts it (recorded), and no
/// transfer completes until `open`.
#[derive(Default)]
pub(crate) struct Posting {
    /// What was posted: the kind, the peer and the length.
    pub(crate) posted: Vec<(&'static str, u32, usize)>,
    /// Whether transfers complete (at their second poll).
    pub(crate) open: bool,
    /// How many polls there were, to be read while a wait has the transport.
    pub(crate) polls: std::rc::Rc<std::cell::Cell<usize>>,
}

impl Transport for Posting {
    fn send(&mut self, _: &[u32], _: &[u8]) -> Result<()> {
        unreachable!()
    }
    fn recv(&mut self, _: u32, _: &mut [u8]) -> Result<()> {
        unreachable!()
    }
    fn sendrecv(&mut self, _: u32, _: &[u8], _: u32, _: &mut [u8]) -> Result<()> {
        unreachable!()
    }
    fn posts_ahead(&self) -> bool {
        true
    }
    fn calls_mpi(&self) -> bool {
        true
    }
    fn poll_send(&mut self, transfer: &mut Transfer, to: &[u32], data: &[u8]) -> Result<bool> {
        self.polls.set(self.polls.get() + 1);
        if !transfer.started {
            transfer.started = true;
            self.posted.push(("send", to[0], data.len()));
            return Ok(false);
        }
        Ok(self.open)
    }
    fn poll_recv(
        &mut self,
        transfer: &mut Transfer,
        from: u32,
        buf: &mut [u8],
        _: Option<&dyn Combine>,
    ) -> Result<bool> {
        self.polls.set(self.polls.get() + 1);
        if !transfer.started {
            transfer.started = true;
            self.posted.push(("recv", from, buf.len()));
            return Ok(false);
        }
        Ok(self.open)
    }
}

impl Fabric for Posting {
    fn level(&mut self, _: usize) -> &mut dyn Transport {
        self
    }
    fn peer(&mut self, _: u32) -> &mut dyn Transport {
        self
    }
}
