//! MPI point-to-point between nodes, on a private duplicate of the world communicator so
//! that the application's own messages never match ours. Ranks are world ranks.

use mpi::point_to_point::{Destination, Source, send_receive_into};
use mpi::topology::{Communicator, SimpleCommunicator};

use super::Transport;
use crate::error::Result;

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

impl Transport for MpiTransport {
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
