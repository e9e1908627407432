//! The production [`Fabric`]: a level whose members share this rank's node goes through
//! the node's shared-memory queues, any other level through the network transport.

use crate::combine::Combine;
use crate::error::{Error, Result};
use crate::transport::Fabric;
use crate::transport::shm::ShmTransport;
use crate::transport::{Transfer, Transport};
use crate::view::View;

/// A network transport for jobs (and tests) that never leave the node.
#[derive(Debug)]
pub struct NoNetwork;

impl NoNetwork {
    fn fail<T>(&self) -> Result<T> {
        Err(Error::NoNetwork)
    }
}

impl Transport for NoNetwork {
    fn send(&mut self, _: &[u32], _: &[u8]) -> Result<()> {
        self.fail()
    }
    fn recv(&mut self, _: u32, _: &mut [u8]) -> Result<()> {
        self.fail()
    }
    fn sendrecv(&mut self, _: u32, _: &[u8], _: u32, _: &mut [u8]) -> Result<()> {
        self.fail()
    }
    fn poll_send(&mut self, _: &mut Transfer, _: &[u32], _: &[u8]) -> Result<bool> {
        self.fail()
    }
    fn poll_recv(
        &mut self,
        _: &mut Transfer,
        _: u32,
        _: &mut [u8],
        _: Option<&dyn Combine>,
    ) -> Result<bool> {
        self.fail()
    }
}

/// Shared memory inside the node, `N` between nodes.
#[derive(Debug)]
pub struct Links<N: Transport> {
    intra: Vec<bool>,
    peers: Vec<u32>,
    /// The node's queues (absent when this rank is alone on its node).
    pub shm: Option<ShmTransport>,
    /// The network.
    pub net: N,
}

impl<N: Transport> Links<N> {
    /// Links for `view`; `peers` are the world ranks on this rank's node.
    pub fn new(view: &View, peers: Vec<u32>, shm: Option<ShmTransport>, net: N) -> Self {
        Links {
            intra: view.levels.iter().map(|l| l.intra).collect(),
            peers,
            shm,
            net,
        }
    }

    fn pick(&mut self, intra: bool) -> &mut dyn Transport {
        match (&mut self.shm, intra) {
            (Some(shm), true) => shm,
            _ => &mut self.net,
        }
    }
}

impl<N: Transport> Fabric for Links<N> {
    /// Level `i` of the view the links were made for, or of that view over the
    /// network ([`View::over_network`]): it keeps the levels inside the node and puts
    /// one network level where the first one was, so a level that is not inside the
    /// node in the first view is not in the second either.
    fn level(&mut self, i: usize) -> &mut dyn Transport {
        let intra = self.intra.get(i).copied().unwrap_or(false);
        self.pick(intra)
    }
    fn peer(&mut self, peer: u32) -> &mut dyn Transport {
        let intra = self.peers.binary_search(&peer).is_ok();
        self.pick(intra)
    }
}
