//! Ranks as threads in one process. Every ordered pair of ranks has an unbounded FIFO, and
//! every message and byte is counted under the label of the endpoint that sent it, so tests
//! can compare how much traffic each level carries.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use super::{Transfer, Transport};
use crate::combine::Combine;
use crate::error::Result;

/// Messages and bytes sent under one label.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Point-to-point messages (a multicast to k ranks counts k).
    pub messages: u64,
    /// Payload bytes (a multicast to k ranks counts k copies).
    pub bytes: u64,
}

#[derive(Debug, Default)]
struct Mailbox {
    queue: Mutex<VecDeque<Vec<u8>>>,
    ready: Condvar,
}

/// The simulated network shared by all endpoints.
#[derive(Debug)]
pub struct SimNet {
    size: usize,
    /// Blocking messages, one queue per pair of ranks (sender-major).
    mailboxes: Vec<Mailbox>,
    /// Nonblocking ones ([`Transport::poll_send`]), apart: over MPI they carry a tag of
    /// their own, so a blocking receive never takes a nonblocking send's message, nor the
    /// other way round.
    polled: Vec<Mailbox>,
    node_of: Vec<u32>,
    /// Each rank's switch, where the test gives them.
    switch_of: Option<Vec<u32>>,
    traffic: Mutex<BTreeMap<String, Traffic>>,
}

/// How long a receive waits before the simulation declares a deadlock.
const DEADLOCK: std::time::Duration = std::time::Duration::from_secs(30);

/// The label under which traffic between ranks of different nodes is also counted.
pub const INTER_NODE: &str = "inter-node";

/// The label under which traffic between ranks under different switches is also counted
/// ([`SimNet::with_switches`]).
pub const INTER_SWITCH: &str = "inter-switch";

impl SimNet {
    /// A network of ranks placed on nodes (`node_of[rank]`); messages between nodes are
    /// also counted under [`INTER_NODE`].
    pub fn new(node_of: Vec<u32>) -> Arc<Self> {
        let size = node_of.len();
        Arc::new(SimNet {
            size,
            mailboxes: (0..size * size).map(|_| Mailbox::default()).collect(),
            polled: (0..size * size).map(|_| Mailbox::default()).collect(),
            node_of,
            switch_of: None,
            traffic: Mutex::new(BTreeMap::new()),
        })
    }

    /// As [`SimNet::new`], the nodes under switches (`switch_of[rank]`); messages between
    /// switches are also counted under [`INTER_SWITCH`].
    pub fn with_switches(node_of: Vec<u32>, switch_of: Vec<u32>) -> Arc<Self> {
        let mut net = Arc::into_inner(SimNet::new(node_of)).expect("just made");
        net.switch_of = Some(switch_of);
        Arc::new(net)
    }

    /// Rank `rank`'s endpoint; what it sends is counted under `label`.
    pub fn endpoint(self: &Arc<Self>, rank: u32, label: impl Into<String>) -> SimTransport {
        SimTransport {
            net: Arc::clone(self),
            rank,
            label: label.into(),
        }
    }

    /// Traffic per label so far.
    pub fn traffic(&self) -> BTreeMap<String, Traffic> {
        self.traffic
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn mailbox(&self, from: u32, to: u32) -> &Mailbox {
        &self.mailboxes[from as usize * self.size + to as usize]
    }

    fn polled_mailbox(&self, from: u32, to: u32) -> &Mailbox {
        &self.polled[from as usize * self.size + to as usize]
    }
}

/// One rank's endpoint on a [`SimNet`].
#[derive(Debug)]
pub struct SimTransport {
    net: Arc<SimNet>,
    rank: u32,
    label: String,
}

impl Transport for SimTransport {
    fn send(&mut self, to: &[u32], data: &[u8]) -> Result<()> {
        self.post(to, data, false);
        Ok(())
    }

    fn recv(&mut self, from: u32, buf: &mut [u8]) -> Result<()> {
        let mb = self.net.mailbox(from, self.rank);
        let mut q = mb.queue.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(msg) = q.pop_front() {
                self.check_len(from, buf.len(), msg.len());
                buf.copy_from_slice(&msg);
                return Ok(());
            }
            let (guard, timeout) = mb
                .ready
                .wait_timeout(q, DEADLOCK)
                .unwrap_or_else(PoisonError::into_inner);
            q = guard;
            assert!(
                !timeout.timed_out() || !q.is_empty(),
                "sim: rank {} waited {DEADLOCK:?} for a message from rank {from}: the \
                 algorithm deadlocks",
                self.rank
            );
        }
    }

    fn sendrecv(&mut self, to: u32, data: &[u8], from: u32, buf: &mut [u8]) -> Result<()> {
        self.send(&[to], data)?;
        self.recv(from, buf)
    }

    fn poll_send(&mut self, _x: &mut Transfer, to: &[u32], data: &[u8]) -> Result<bool> {
        self.post(to, data, true);
        Ok(true)
    }

    fn poll_recv(
        &mut self,
        _x: &mut Transfer,
        from: u32,
        buf: &mut [u8],
        op: Option<&dyn Combine>,
    ) -> Result<bool> {
        let mb = self.net.polled_mailbox(from, self.rank);
        let msg = mb
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        let Some(msg) = msg else {
            return Ok(false);
        };
        self.check_len(from, buf.len(), msg.len());
        match op {
            Some(op) => op.combine(buf, &msg),
            None => buf.copy_from_slice(&msg),
        }
        Ok(true)
    }
}

impl SimTransport {
    /// Queues `data` for every rank of `to` (with the nonblocking messages if `polled`)
    /// and counts it.
    fn post(&mut self, to: &[u32], data: &[u8], polled: bool) {
        for &peer in to {
            let mb = if polled {
                self.net.polled_mailbox(self.rank, peer)
            } else {
                self.net.mailbox(self.rank, peer)
            };
            mb.queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_back(data.to_vec());
            mb.ready.notify_all();
        }
        let mut t = self
            .net
            .traffic
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let e = t.entry(self.label.clone()).or_default();
        e.messages += to.len() as u64;
        e.bytes += (to.len() * data.len()) as u64;
        let me = self.net.node_of[self.rank as usize];
        let remote = to
            .iter()
            .filter(|&&p| self.net.node_of[p as usize] != me)
            .count() as u64;
        if remote > 0 {
            let e = t.entry(INTER_NODE.to_string()).or_default();
            e.messages += remote;
            e.bytes += remote * data.len() as u64;
        }
        if let Some(switch_of) = &self.net.switch_of {
            let me = switch_of[self.rank as usize];
            let far = to.iter().filter(|&&p| switch_of[p as usize] != me).count() as u64;
            if far > 0 {
                let e = t.entry(INTER_SWITCH.to_string()).or_default();
                e.messages += far;
                e.bytes += far * data.len() as u64;
            }
        }
    }

    fn check_len(&self, from: u32, want: usize, got: usize) {
        assert_eq!(
            got, want,
            "sim: rank {} expected {want} bytes from {from}, got {got}",
            self.rank
        );
    }
}

/// A [`Fabric`](super::Fabric) of sim endpoints: one per level, labelled with the
/// level's name, and one labelled `peer` for root detours.
#[derive(Debug)]
pub struct SimFabric {
    levels: Vec<SimTransport>,
    peer: SimTransport,
}

impl SimFabric {
    /// The fabric of `rank` on `net`, one endpoint per level of `levels` (a view's level
    /// names, bottom-up).
    pub fn new(
        net: &Arc<SimNet>,
        rank: u32,
        levels: impl IntoIterator<Item = impl ToString>,
    ) -> Self {
        SimFabric {
            levels: levels
                .into_iter()
                .map(|l| net.endpoint(rank, l.to_string()))
                .collect(),
            peer: net.endpoint(rank, "peer"),
        }
    }
}

impl super::Fabric for SimFabric {
    fn level(&mut self, i: usize) -> &mut dyn Transport {
        &mut self.levels[i]
    }
    fn peer(&mut self, _peer: u32) -> &mut dyn Transport {
        &mut self.peer
    }
}
