//! What `topo-run simulate --calibrate` and `coll-check` measure through a context: the
//! cache line and topo-run's queues between local ranks.

use super::*;

impl Topo {
    /// Measures how long a cache line takes between this node's cores: the node's first
    /// local rank bounces one with each other local rank in turn (`batches` batches of
    /// `rounds` round trips) and gets, per peer, its world rank and the median one-way
    /// time in nanoseconds (half a round trip). Every other rank gets an empty list, as do
    /// all ranks when the collectives go to MPI's own. Collective: every rank of the world
    /// calls it, with the same arguments. With ranks bound to cores of their own, this is
    /// the floor under any handoff between two ranks, so under every tree edge of a small
    /// message.
    pub fn cache_line_transfer(&mut self, batches: usize, rounds: u32) -> Result<Vec<(u32, f64)>> {
        self.local_pairs_in_turn(|shm, peer, _| {
            let mut t = shm.ping_pong(peer, batches.max(1), rounds.max(1))?;
            t.sort_by(f64::total_cmp);
            Ok(t.get(t.len() / 2).copied())
        })
    }

    /// Measures topo-run's own shared-memory path between this node's first local rank
    /// and each other local rank in turn, as a collective's step uses it (the queues, or
    /// single copy where the message is large enough): per peer, its world rank and the
    /// one-way time of `bytes`, half the median of `iters` round trips, in microseconds.
    /// Every other rank gets an empty list, as do all ranks when the collectives go to
    /// MPI's own. Collective: every rank of the world calls it, with the same arguments.
    pub fn queue_transfer(&mut self, bytes: usize, iters: usize) -> Result<Vec<(u32, f64)>> {
        let mut buf = vec![0u8; bytes];
        self.local_pairs_in_turn(|shm, peer, leads| {
            let warm = iters / 10 + 2;
            let mut round_trips = Vec::with_capacity(iters);
            for i in 0..warm + iters.max(1) {
                let t0 = std::time::Instant::now();
                if leads {
                    shm.send(&[peer], &buf)?;
                    shm.recv(peer, &mut buf)?;
                } else {
                    shm.recv(peer, &mut buf)?;
                    shm.send(&[peer], &buf)?;
                }
                if i >= warm {
                    round_trips.push(t0.elapsed().as_secs_f64() * 1e6);
                }
            }
            round_trips.sort_by(f64::total_cmp);
            Ok(leads.then(|| round_trips[round_trips.len() / 2] / 2.0))
        })
    }

    /// Runs `measure` for the node's first local rank and each other local rank in turn
    /// (every rank of the world meets in a barrier before each pair, so that no other pair
    /// of the node shares the cores): both ranks of the pair call it with their transport,
    /// the other's world rank and whether they lead (the first local rank). The leader's
    /// values come back with the other's world rank. Collective over the world.
    pub(super) fn local_pairs_in_turn(
        &mut self,
        mut measure: impl FnMut(&mut ShmTransport, u32, bool) -> Result<Option<f64>>,
    ) -> Result<Vec<(u32, f64)>> {
        let mut core = self.quiesced();
        let mut shm = core.hier.as_mut().and_then(|h| h.links.shm.as_mut());
        let (me, peers) = shm
            .as_ref()
            .map_or((0, Vec::new()), |s| (s.local_index(), s.peers().to_vec()));
        let most = pmpi_allreduce_i32(
            &self.world,
            peers.len() as i32,
            SystemOperation::max().as_raw(),
        );
        let mut out = Vec::new();
        for j in 1..most.max(1) as usize {
            crate::ffi::comm::pmpi_barrier(&self.world);
            let Some(shm) = shm
                .as_deref_mut()
                .filter(|_| j < peers.len() && (me == 0 || me == j))
            else {
                continue;
            };
            let leads = me == 0;
            let peer = peers[if leads { j } else { 0 }];
            if let Some(v) = measure(shm, peer, leads)?.filter(|_| leads) {
                out.push((peer, v));
            }
        }
        Ok(out)
    }
}
