//! topo-run's blocking collectives as they run: each rank's own blocking code (the
//! runtime's `bcast`, `reduce`, `allreduce`, `barrier` and `allgather`, with their
//! pipelined chunks and per-level ring and scatter variants) runs over a [`Tape`], a
//! transport that moves no data and writes every call down as one round of the rank's
//! [`Program`]. The blocking code's control flow depends on sizes and ranks only, never
//! on the data, so the tape is the sequence of transfers the rank makes on a real cluster,
//! and the engine times it like any other program.
//!
//! The v-forms' leaders send each rank's length before the blocks, and read them: a tape
//! made by [`Tape::reading`] writes one 8-byte number into every buffer it receives into,
//! the length that every rank's block has in a v-form simulated with blocks of one size.
//!
//! What the tape does not see: the copies the blocking code makes itself (a transport
//! call that combines records its reduction, a [`Combine`] call made by the algorithm is
//! recorded through [`TapeCombine`]), and how a transport carries a call (shared memory
//! copies a fragment once for all the receivers of a send; the engine sends to each).

use std::cell::RefCell;
use std::rc::Rc;

use topo_runtime::Result;
use topo_runtime::combine::Combine;
use topo_runtime::transport::Fabric;
use topo_runtime::transport::{Transfer, Transport};

use crate::program::{Program, Step};

/// A transport and fabric that records instead of moving bytes: every level and every
/// peer ([`Fabric::peer`]) is reached through it.
///
/// A blocking call is a round of its own. Polled transfers ([`Transport::poll_send`],
/// [`Transport::poll_recv`]) are the code's transfers in flight at once (a Gather's root
/// receiving from every rank, an Alltoall's exchange): the first poll of each records it
/// and says it has not completed, the next says it has. The transfers first polled
/// before the code comes back to poll one a second time make one round.
#[derive(Debug, Default, Clone)]
pub struct Tape {
    program: Rc<RefCell<Program>>,
    polled: Rc<RefCell<Polled>>,
    /// What every received buffer reads ([`Tape::reading`]).
    fill: Option<[u8; 8]>,
}

/// The round of polled transfers being recorded.
#[derive(Debug, Default)]
struct Polled {
    steps: Vec<Step>,
    /// A transfer of the round was polled again: the code waits for the round, so the
    /// next first poll starts another.
    waited: bool,
}

impl Tape {
    /// A tape whose receives write `word` (little-endian) into every 8 bytes of their
    /// buffers: the length messages of a v-form whose blocks all have `word` bytes.
    pub fn reading(word: u64) -> Tape {
        Tape {
            fill: Some(word.to_le_bytes()),
            ..Tape::default()
        }
    }

    /// Writes the tape's word into `buf`, where it has one.
    fn received(&self, buf: &mut [u8]) {
        if let Some(word) = &self.fill {
            for chunk in buf.chunks_mut(8) {
                chunk.copy_from_slice(&word[..chunk.len()]);
            }
        }
    }

    /// The reduction that records its combines on this tape, for elements of `elem` bytes.
    pub fn combine(&self, elem: usize) -> TapeCombine {
        TapeCombine {
            tape: self.clone(),
            elem,
        }
    }

    /// The program recorded so far (the tape is left empty).
    pub fn take(&self) -> Program {
        self.close_polled();
        std::mem::take(&mut self.program.borrow_mut())
    }

    fn round(&self, steps: Vec<Step>) {
        self.close_polled();
        self.program.borrow_mut().round(steps);
    }

    /// Records the round of polled transfers, if any.
    fn close_polled(&self) {
        let steps = std::mem::take(&mut self.polled.borrow_mut().steps);
        if !steps.is_empty() {
            self.program.borrow_mut().round(steps);
        }
    }

    /// A poll of transfer `x`, which is `step`: recorded at its first poll (false: not
    /// complete), complete at the next.
    fn poll(&self, x: &mut Transfer, step: Step) -> bool {
        if x.mark_started() {
            self.polled.borrow_mut().waited = true;
            return true;
        }
        if std::mem::take(&mut self.polled.borrow_mut().waited) {
            self.close_polled();
        }
        self.polled.borrow_mut().steps.push(step);
        false
    }
}

fn send(to: &[u32], bytes: usize) -> Step {
    Step::Send {
        to: to.to_vec(),
        bytes: bytes as u64,
    }
}

fn recv(from: u32, bytes: usize, combine: bool) -> Step {
    Step::Recv {
        from,
        bytes: bytes as u64,
        combine,
    }
}

impl Transport for Tape {
    fn send(&mut self, to: &[u32], data: &[u8]) -> Result<()> {
        self.round(vec![send(to, data.len())]);
        Ok(())
    }

    fn recv(&mut self, from: u32, buf: &mut [u8]) -> Result<()> {
        self.round(vec![recv(from, buf.len(), false)]);
        self.received(buf);
        Ok(())
    }

    fn sendrecv(&mut self, to: u32, data: &[u8], from: u32, buf: &mut [u8]) -> Result<()> {
        self.round(vec![send(&[to], data.len()), recv(from, buf.len(), false)]);
        self.received(buf);
        Ok(())
    }

    fn recv_reduce(
        &mut self,
        from: u32,
        acc: &mut [u8],
        _tmp: &mut [u8],
        _op: &dyn Combine,
    ) -> Result<()> {
        self.round(vec![recv(from, acc.len(), true)]);
        Ok(())
    }

    // One combining receive, as shared memory does it (without the default's copy of
    // `own`, which the recording would not see anyway).
    fn recv_reduce_onto(
        &mut self,
        from: u32,
        acc: &mut [u8],
        _own: &[u8],
        tmp: &mut [u8],
        op: &dyn Combine,
    ) -> Result<()> {
        self.recv_reduce(from, acc, tmp, op)
    }

    fn sendrecv_onto(
        &mut self,
        to: u32,
        data: &[u8],
        from: u32,
        acc: &mut [u8],
        _own: &[u8],
        _tmp: &mut [u8],
        _op: &dyn Combine,
    ) -> Result<()> {
        self.round(vec![send(&[to], data.len()), recv(from, acc.len(), true)]);
        Ok(())
    }

    fn poll_send(&mut self, x: &mut Transfer, to: &[u32], data: &[u8]) -> Result<bool> {
        Ok(self.poll(x, send(to, data.len())))
    }

    fn poll_recv(
        &mut self,
        x: &mut Transfer,
        from: u32,
        buf: &mut [u8],
        op: Option<&dyn Combine>,
    ) -> Result<bool> {
        if op.is_none() {
            self.received(buf);
        }
        Ok(self.poll(x, recv(from, buf.len(), op.is_some())))
    }
}

impl Fabric for Tape {
    fn level(&mut self, _i: usize) -> &mut dyn Transport {
        self
    }

    fn peer(&mut self, _peer: u32) -> &mut dyn Transport {
        self
    }
}

/// A reduction that records each combine the algorithm makes as a local step of its tape.
#[derive(Debug)]
pub struct TapeCombine {
    tape: Tape,
    elem: usize,
}

impl Combine for TapeCombine {
    fn elem_size(&self) -> usize {
        self.elem
    }

    fn combine(&self, acc: &mut [u8], _incoming: &[u8]) {
        self.tape.round(vec![Step::Local {
            bytes: acc.len() as u64,
            combine: true,
        }]);
    }
}
