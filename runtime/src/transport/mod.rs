//! The transports the algorithms run over, behind one small trait (DESIGN §6):
//! [`shm`] (the node's shared-memory queues), [`mpi`] (point-to-point on a communicator
//! of topo-run's own over world's group) and [`sim`] (threads in one process, for tests).
//!
//! Ranks are world ranks everywhere. Messages between a pair of ranks arrive in the order
//! they were sent, and a receiver always knows the length of what it receives.

pub mod mpi;
pub mod shm;
pub mod sim;
#[cfg(test)]
pub(crate) mod testing;

use crate::combine::Combine;
use crate::error::Result;

/// Moves bytes between ranks.
pub trait Transport {
    /// Sends `data` to every rank in `to`. Returns once `data` may be reused. Shared
    /// memory copies each fragment once for all receivers.
    fn send(&mut self, to: &[u32], data: &[u8]) -> Result<()>;

    /// Sends `data` to `to`, which receives it with [`Transport::recv_reduce`].
    fn send_to_combine(&mut self, to: u32, data: &[u8]) -> Result<()> {
        self.send(&[to], data)
    }

    /// Receives exactly `buf.len()` bytes from `from`.
    fn recv(&mut self, from: u32, buf: &mut [u8]) -> Result<()>;

    /// Sends `data` to `to` while receiving `buf.len()` bytes from `from`, without
    /// deadlocking when both sides do the same with messages larger than any buffer.
    fn sendrecv(&mut self, to: u32, data: &[u8], from: u32, buf: &mut [u8]) -> Result<()>;

    /// Round `round` of a dissemination barrier: tells `to` that this rank has reached it
    /// and waits until `from` has told this rank the same. Every member of the barrier
    /// passes the same rounds in the same order, each time with the same `to` and `from`
    /// for a round. By default an empty [`Transport::sendrecv`].
    fn signal(&mut self, round: usize, to: u32, from: u32) -> Result<()> {
        let _ = round;
        self.sendrecv(to, &[], from, &mut [])
    }

    /// A barrier among `members` (this rank is `members[me]`) that releases `members[0]`
    /// first: it waits until every other member has arrived, then tells them. Every member
    /// of the barrier passes it with the same `members`. By default empty messages.
    fn root_first_barrier(&mut self, members: &[u32], me: usize) -> Result<()> {
        let Some((root, others)) = members.split_first() else {
            return Ok(());
        };
        if me != 0 {
            self.send(&[*root], &[])?;
            return self.recv(*root, &mut []);
        }
        for &m in others {
            self.recv(m, &mut [])?;
        }
        if others.is_empty() {
            return Ok(());
        }
        self.send(others, &[])
    }

    /// The nonblocking form of [`Transport::signal`]: call it again with the same
    /// arguments and `transfer` until it returns true. By default an empty message each way
    /// ([`exchange_empty`]).
    fn poll_signal(
        &mut self,
        transfer: &mut Transfer,
        round: usize,
        to: u32,
        from: u32,
    ) -> Result<bool> {
        let _ = round;
        exchange_empty(self, transfer, to, from)
    }

    /// Receives `acc.len()` bytes from `from` and combines them into `acc` (`tmp` is
    /// scratch of the same length). Shared memory combines straight from the queue.
    fn recv_reduce(
        &mut self,
        from: u32,
        acc: &mut [u8],
        tmp: &mut [u8],
        op: &dyn Combine,
    ) -> Result<()> {
        self.recv(from, tmp)?;
        op.combine(acc, tmp);
        Ok(())
    }

    /// [`Transport::recv_reduce`] into an `acc` that does not hold this rank's
    /// contribution yet: leaves `own` combined with the message in `acc` (`own` and `acc`
    /// of one length; the operation is commutative). By default `own` is copied to `acc`
    /// first.
    fn recv_reduce_onto(
        &mut self,
        from: u32,
        acc: &mut [u8],
        own: &[u8],
        tmp: &mut [u8],
        op: &dyn Combine,
    ) -> Result<()> {
        acc.copy_from_slice(own);
        self.recv_reduce(from, acc, tmp, op)
    }

    /// [`Transport::sendrecv`] of `data` to `to`, with the message from `from` combined
    /// onto this rank's contribution `own` into `acc` (`own` and `acc` of one length, `tmp`
    /// at least as long; the operation is commutative). By default the message is received
    /// into `tmp` and combined after.
    #[allow(clippy::too_many_arguments)]
    fn sendrecv_onto(
        &mut self,
        to: u32,
        data: &[u8],
        from: u32,
        acc: &mut [u8],
        own: &[u8],
        tmp: &mut [u8],
        op: &dyn Combine,
    ) -> Result<()> {
        let tmp = &mut tmp[..acc.len()];
        self.sendrecv(to, data, from, tmp)?;
        acc.copy_from_slice(own);
        op.combine(acc, tmp);
        Ok(())
    }

    /// The receiver's first half of a message that its sender may write straight into the
    /// receiver's buffer ([`Transport::write_into`]): tells `from` where `buf` is, if the
    /// message goes that way. The message is in `buf` once [`Transport::wait_lent`] with
    /// the same arguments returns; until then the caller leaves `buf` alone. Both sides
    /// know the message's length. By default nothing: the message comes as a plain one.
    fn lend(&mut self, from: u32, buf: &mut [u8]) -> Result<()> {
        let _ = (from, buf);
        Ok(())
    }

    /// The receiver's second half of a message begun with [`Transport::lend`]: returns
    /// once the message is in `buf`. By default [`Transport::recv`].
    fn wait_lent(&mut self, from: u32, buf: &mut [u8]) -> Result<()> {
        self.recv(from, buf)
    }

    /// The sender's side of a message that `to` receives with [`Transport::lend`] and
    /// [`Transport::wait_lent`]. Shared memory writes a message of its single-copy
    /// threshold or more straight into the lent buffer, so that the receiver does nothing
    /// meanwhile but wait. By default [`Transport::send`].
    fn write_into(&mut self, to: u32, data: &[u8]) -> Result<()> {
        self.send(&[to], data)
    }

    /// The nonblocking form of [`Transport::send`]: makes what progress it can without
    /// waiting and returns whether `data` may be reused. Call it again with the same
    /// arguments and `transfer` until it returns true; `data` must stay put until then.
    fn poll_send(&mut self, transfer: &mut Transfer, to: &[u32], data: &[u8]) -> Result<bool>;

    /// The nonblocking form of [`Transport::recv`] (or, with `op`, of
    /// [`Transport::recv_reduce`]: the message is combined into `buf`). Call it again with
    /// the same arguments and `transfer` until it returns true; `buf` must stay put until then.
    fn poll_recv(
        &mut self,
        transfer: &mut Transfer,
        from: u32,
        buf: &mut [u8],
        op: Option<&dyn Combine>,
    ) -> Result<bool>;

    /// The nonblocking form of [`Transport::lend`]: call it again with the same arguments
    /// and `transfer` until it returns true. By default nothing to do.
    fn poll_lend(&mut self, transfer: &mut Transfer, from: u32, buf: &mut [u8]) -> Result<bool> {
        let _ = (transfer, from, buf);
        Ok(true)
    }

    /// The nonblocking form of [`Transport::wait_lent`] (with a transfer of its own, not
    /// [`Transport::poll_lend`]'s). By default [`Transport::poll_recv`].
    fn poll_wait_lent(
        &mut self,
        transfer: &mut Transfer,
        from: u32,
        buf: &mut [u8],
    ) -> Result<bool> {
        self.poll_recv(transfer, from, buf, None)
    }

    /// The nonblocking form of [`Transport::write_into`]. By default
    /// [`Transport::poll_send`].
    fn poll_write_into(&mut self, transfer: &mut Transfer, to: u32, data: &[u8]) -> Result<bool> {
        self.poll_send(transfer, &[to], data)
    }

    /// Whether its transfers call MPI (then only threads that MPI allows may poll them).
    fn calls_mpi(&self) -> bool {
        false
    }

    /// Whether its transfers may be posted ahead of their turn: the first
    /// [`Transport::poll_send`] or [`Transport::poll_recv`] of a transfer only posts it and
    /// returns false, after which the transfer moves on its own (the data of a send is read,
    /// a receive's buffer written, at any time until it completes), and a receive to be
    /// combined lands in the transfer's own memory, combining only when a later poll
    /// completes it. Schedules then post such receives as soon as their buffers allow
    /// ([`crate::nonblocking::Schedule::poll`]).
    fn posts_ahead(&self) -> bool {
        false
    }

    /// Fails if `peer`, which a nonblocking transfer waits on, is known to have died.
    fn check_peer(&mut self, _peer: u32) -> Result<()> {
        Ok(())
    }
}

/// Sends an empty message to `to` and receives one from `from`, both at once, as the
/// nonblocking transfers of `transfer` (call it again until it returns true).
pub fn exchange_empty<T: Transport + ?Sized>(
    t: &mut T,
    transfer: &mut Transfer,
    to: u32,
    from: u32,
) -> Result<bool> {
    let [s, r] = &mut **transfer.halves.get_or_insert_with(Default::default);
    if !s.complete {
        s.complete = t.poll_send(s, &[to], &[])?;
    }
    if !r.complete {
        r.complete = t.poll_recv(r, from, &mut [], None)?;
    }
    Ok(s.complete && r.complete)
}

/// The state of one nonblocking transfer ([`Transport::poll_send`],
/// [`Transport::poll_recv`]). Start each transfer with a fresh one.
#[derive(Debug, Default)]
pub struct Transfer {
    /// Whether the transfer has started (taken its first queue entry, posted its requests).
    pub(crate) started: bool,
    /// Queue entries sent, or bytes received, so far.
    pub(crate) done: usize,
    /// Outstanding MPI requests.
    pub(crate) messages: crate::ffi::p2p::Messages,
    /// Where an MPI receive that is combined on arrival lands.
    pub(crate) tmp: Vec<u8>,
    /// The queue slot of a single-copy descriptor whose readers may still read the
    /// sender's buffer.
    pub(crate) slot: Option<usize>,
    /// The two halves of a signal sent as empty messages ([`exchange_empty`]).
    pub(crate) halves: Option<Box<[Transfer; 2]>>,
    /// Whether a half of [`Transfer::halves`] has completed.
    pub(crate) complete: bool,
}

impl Transfer {
    /// Marks the transfer started and says whether it already was: for a transport
    /// outside this crate that only tracks that much of a transfer (`topo-run simulate`'s
    /// recording one, which completes a transfer at its second poll).
    pub fn mark_started(&mut self) -> bool {
        std::mem::replace(&mut self.started, true)
    }
}

/// Gives each level, and each peer a step names ([`Fabric::peer`]), the transport that reaches it.
pub trait Fabric {
    /// The transport for `levels[i]`.
    fn level(&mut self, i: usize) -> &mut dyn Transport;
    /// The transport that reaches `peer` directly.
    fn peer(&mut self, peer: u32) -> &mut dyn Transport;
}
