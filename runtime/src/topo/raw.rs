//! The byte-level blocking entry points (`raw_*`) that the typed methods and the PMPI
//! library call: each runs the hierarchical algorithm, or says it cannot (`false`).

use super::*;
use topo_hierarchy::settings::ReduceScatterAlg;

use crate::subtrees::Blocks;

impl Topo {
    /// Gathers every rank's block into `recv` (rank r's at `r * len`, `len =
    /// recv.len() / size`); `send` is `None` when this rank's block is in place already.
    pub fn raw_all_gather(&mut self, send: Option<&[u8]>, recv: &mut [u8]) -> bool {
        let size = self.world.size() as usize;
        if !recv.len().is_multiple_of(size) || send.is_some_and(|b| b.len() * size != recv.len()) {
            return false;
        }
        let exchange = self.exchange_for(recv.len());
        if let Some((alg, true)) = exchange {
            // Bruck's and the ring's sends and receives go to different ranks, maybe over
            // different links: they run as their schedule, waited for.
            mpi::request::scope(|scope| self.sched_all_gather(scope, alg, send, recv).wait());
            return true;
        }
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let rank = self.world.rank() as u32;
        let len = recv.len() / size;
        let result = h.on_lane(|h| {
            let doubling = exchange.and_then(|(alg, _)| h.exchanges.get(alg)?.doubling_peers(len));
            match doubling {
                Some(peers) => allgather::recursive_doubling(&mut h.links, rank, peers, send, recv),
                _ => {
                    // (The flat exchanges have gone above; only the hierarchical form is
                    // left.)
                    let top = match h.settings.allgather_for(recv.len(), size) {
                        AllgatherAlg::Hierarchical(top) => top,
                        _ => TopAlg::RecursiveDoubling,
                    };
                    allgather::allgather(&h.view, &mut h.links, &h.settings, top, send, recv)
                }
            }
        });
        if let Err(e) = result {
            self.abort("MPI_Allgather", e);
        }
        true
    }

    /// Gathers every rank's `len` bytes into `recv` at `root` (rank r's at `r * len`):
    /// `send` is this rank's, or `None` at the root in place (its bytes in `recv` already);
    /// `recv` is `Some`, of `size * len` bytes, at the root only. False (nothing done)
    /// where the collectives go to MPI, or for buffers of the wrong length.
    pub fn raw_gather(
        &mut self,
        root: i32,
        send: Option<&[u8]>,
        recv: Option<&mut [u8]>,
        len: usize,
    ) -> bool {
        let size = self.world.size() as usize;
        let is_root = root == self.rank;
        if send.is_some_and(|s| s.len() != len)
            || recv.as_ref().map(|r| r.len()) != is_root.then_some(size * len)
            || (send.is_none() && !is_root)
        {
            return false;
        }
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let r = h.on_lane(|h| {
            h.subtrees()?;
            let sub = h.subtrees.as_ref().expect("learned above");
            gather::gather(
                &h.view,
                &mut h.links,
                sub,
                &h.settings,
                root as u32,
                send,
                recv,
                len,
            )
        });
        if let Err(e) = r {
            self.abort("MPI_Gather", e);
        }
        true
    }

    /// Scatters the root's `send` (`size * len` bytes, rank r's at `r * len`; `Some` at
    /// the root only): every rank receives its `len` bytes into `recv`, or (`None`, at
    /// the root only) keeps them in `send` (in place). False (nothing done) where the
    /// collectives go to MPI, or for buffers of the wrong length.
    pub fn raw_scatter(
        &mut self,
        root: i32,
        send: Option<&[u8]>,
        recv: Option<&mut [u8]>,
        len: usize,
    ) -> bool {
        let size = self.world.size() as usize;
        let is_root = root == self.rank;
        if recv.as_ref().is_some_and(|r| r.len() != len)
            || send.map(<[u8]>::len) != is_root.then_some(size * len)
            || (recv.is_none() && !is_root)
        {
            return false;
        }
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let r = h.on_lane(|h| {
            h.subtrees()?;
            let sub = h.subtrees.as_ref().expect("learned above");
            scatter::scatter(
                &h.view,
                &mut h.links,
                sub,
                &h.settings,
                root as u32,
                send,
                recv,
                len,
            )
        });
        if let Err(e) = r {
            self.abort("MPI_Scatter", e);
        }
        true
    }

    /// Gatherv: rank r's block lands at `recv.0[recv.1[r]]` at `root`. `send` is this
    /// rank's block, or `None` at the root in place (its block at its place in `recv`
    /// already); `recv` is `Some` at the root only. False (nothing done) where the
    /// collectives go to MPI, or where the root's arguments are wrong (a range that passes
    /// its buffer's end, a block of another length than its range).
    pub fn raw_gather_v(
        &mut self,
        root: i32,
        send: Option<&[u8]>,
        recv: Option<(&mut [u8], &[std::ops::Range<usize>])>,
    ) -> bool {
        let size = self.world.size() as usize;
        let buf = recv.as_ref().map(|(b, at)| (b.len(), *at));
        let Some(at) = rooted_v(size, root, self.rank, buf, send.map(<[u8]>::len)) else {
            return false;
        };
        let recv = recv.zip(at.as_deref()).map(|((b, _), at)| (b, at));
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let r = h.on_lane(|h| {
            h.subtrees()?;
            let sub = h.subtrees.as_ref().expect("learned above");
            let (view, links, s) = (&h.view, &mut h.links, &h.settings);
            gatherv::gatherv(
                view,
                links,
                sub,
                s,
                root as u32,
                send,
                recv,
                &mut h.gathered,
            )
        });
        if let Err(e) = r {
            self.abort("MPI_Gatherv", e);
        }
        true
    }

    /// Scatterv: rank r receives `send.0[send.1[r]]` from `root` into `recv`. `send` is
    /// `Some` at the root only; `recv` is `None` at the root in place (it keeps its block
    /// where it is). False (nothing done) where the collectives go to MPI, or where the
    /// root's arguments are wrong (a range that passes its buffer's end, a receive buffer
    /// of another length than its range).
    pub fn raw_scatter_v(
        &mut self,
        root: i32,
        send: Option<(&[u8], &[std::ops::Range<usize>])>,
        recv: Option<&mut [u8]>,
    ) -> bool {
        let size = self.world.size() as usize;
        let buf = send.map(|(b, at)| (b.len(), at));
        let own = recv.as_ref().map(|b| b.len());
        let Some(at) = rooted_v(size, root, self.rank, buf, own) else {
            return false;
        };
        let send = send.zip(at.as_deref()).map(|((b, _), at)| (b, at));
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let r = h.on_lane(|h| {
            h.subtrees()?;
            let sub = h.subtrees.as_ref().expect("learned above");
            let (view, links, s) = (&h.view, &mut h.links, &h.settings);
            scatterv::scatterv(
                view,
                links,
                sub,
                s,
                root as u32,
                send,
                recv,
                &mut h.gathered,
            )
        });
        if let Err(e) = r {
            self.abort("MPI_Scatterv", e);
        }
        true
    }

    /// Alltoall: this rank's block for rank r is at `send[r * len..]` (`send` is `None` in
    /// place: the blocks are in `recv`), rank r's block for this rank lands at
    /// `recv[r * len..]`, `len = recv.len() / size`. False (nothing done) where the
    /// collectives go to MPI, or for buffers of the wrong length.
    pub fn raw_all_to_all(&mut self, send: Option<&[u8]>, recv: &mut [u8]) -> bool {
        let size = self.world.size() as usize;
        if !recv.len().is_multiple_of(size) || send.is_some_and(|s| s.len() != recv.len()) {
            return false;
        }
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let len = recv.len() / size;
        let r = h.on_lane(|h| {
            h.subtrees()?;
            let sub = h.subtrees.as_ref().expect("learned above");
            let by_node = h.exchanges.by_node();
            alltoall::alltoall(
                &h.view,
                &mut h.links,
                sub,
                &h.settings,
                by_node,
                send,
                recv,
                len,
            )
        });
        if let Err(e) = r {
            self.abort("MPI_Alltoall", e);
        }
        true
    }

    /// Allgatherv: rank r's block lands at `recv[at[r]]` on every rank; `send` is this
    /// rank's block, or `None` in place (at `recv[at[rank]]`). False (nothing done) where
    /// the collectives go to MPI, for a range that passes `recv`'s end, or a `send` of
    /// another length than this rank's range.
    pub fn raw_all_gather_v(
        &mut self,
        send: Option<&[u8]>,
        recv: &mut [u8],
        at: &[std::ops::Range<usize>],
    ) -> bool {
        let size = self.world.size() as usize;
        let me = self.rank as usize;
        if at.len() != size
            || at.iter().any(|r| !r.is_empty() && r.end > recv.len())
            || send.is_some_and(|b| b.len() != at[me].len())
        {
            return false;
        }
        // An empty block may name any place.
        let at = &emptied(at);
        if self.all_gather_v_flat(at) {
            // Recursive doubling's and the ring's transfers go to different ranks, maybe
            // over different links: they run as their schedule, waited for.
            mpi::request::scope(|scope| self.sched_all_gather_v(scope, send, recv, at).wait());
            return true;
        }
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let r = h.on_lane(|h| {
            h.subtrees()?;
            let sub = h.subtrees.as_ref().expect("learned above");
            let (view, links, s) = (&h.view, &mut h.links, &h.settings);
            allgatherv::allgatherv(view, links, sub, s, send, recv, at, &mut h.gathered)
        });
        if let Err(e) = r {
            self.abort("MPI_Allgatherv", e);
        }
        true
    }

    /// Alltoallv: this rank's block for rank r is `send.0[send.1[r]]` (`send` is `None`
    /// in place: the blocks are `recv`'s, at `recv_at`), rank r's block for this rank lands
    /// in `recv[recv_at[r]]`. False (nothing done) where the collectives go to MPI, for
    /// ranges that pass their buffer's end, receive ranges that overlap, or a rank's own
    /// two ranges of different lengths.
    pub fn raw_all_to_all_v(
        &mut self,
        send: Option<(&[u8], &[std::ops::Range<usize>])>,
        recv: &mut [u8],
        recv_at: &[std::ops::Range<usize>],
    ) -> bool {
        let me = self.rank as usize;
        let size = self.world.size() as usize;
        let sent = send.map(|(b, at)| (b.len(), at));
        if !v_ranges_fit(size, me, sent, recv.len(), recv_at) {
            return false;
        }
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let r = h.on_lane(|h| {
            let by_node = h.exchanges.by_node();
            alltoall::alltoallv(
                &h.view,
                &mut h.links,
                &h.settings,
                by_node,
                send,
                recv,
                recv_at,
            )
        });
        match r {
            Ok(done) => done,
            Err(e) => self.abort("MPI_Alltoallv", e),
        }
    }

    /// Scan (`exclusive` false: rank r gets the reduction of ranks `0..=r`) or Exscan
    /// (`exclusive` true: of ranks `0..r`) with `op`. `send` is this rank's contribution, or
    /// `None` in place (in `recv`); `recv` gets the result, and may be `None` at Exscan's
    /// rank 0 only (whose result MPI leaves undefined: nothing is written there). False
    /// (nothing done) where the collectives go to MPI, or for buffers of the wrong length.
    pub fn raw_scan(
        &mut self,
        send: Option<&[u8]>,
        recv: Option<&mut [u8]>,
        op: &MpiCombine,
        exclusive: bool,
    ) -> bool {
        if !scan_fits(send, recv.as_deref(), exclusive, self.rank) {
            return false;
        }
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let r = h.on_lane(|h| {
            let hierarchical = h.scan_is_hierarchical()?;
            let len = send.map_or_else(|| recv.as_ref().map_or(0, |r| r.len()), <[u8]>::len);
            let view = scan::view_for(hierarchical, &h.view, &h.scan_view, len);
            let (links, spin) = (&mut h.links, h.settings.spin);
            scan::scan(
                view,
                links,
                spin,
                h.subtrees.as_ref().filter(|_| hierarchical),
                send,
                recv,
                exclusive,
                op,
                &mut h.scratch,
            )
        });
        if let Err(e) = r {
            self.abort(if exclusive { "MPI_Exscan" } else { "MPI_Scan" }, e);
        }
        true
    }

    /// Reduce_scatter_block with `op`: every rank contributes `size * block` bytes (`send`,
    /// or in place `recv`'s) and gets block r of the result (rank r) into the first
    /// `block` bytes of `recv` (`block` = `recv.len()`, or in place `recv.len() / size`).
    /// False (nothing done) where the collectives go to MPI, or for buffers of the wrong
    /// length.
    pub fn raw_reduce_scatter_block(
        &mut self,
        send: Option<&[u8]>,
        recv: &mut [u8],
        op: &MpiCombine,
    ) -> bool {
        let size = self.world.size() as usize;
        let Some(block) = block_of(size, send.map(<[u8]>::len), recv.len()) else {
            return false;
        };
        if size == 2 {
            let me = self.rank as usize;
            let at = |r: usize| r * block..(r + 1) * block;
            return self.raw_reduce_scatter_pair(send, recv, at(me), at(1 - me), op);
        }
        // The Allreduce's form runs as Reduce_scatter does, with the Allreduce's flat forms;
        // recursive halving and the ring run as their schedules, waited for.
        let alg = context::lock(&self.core)
            .hier
            .as_ref()
            .map(|h| h.settings.reduce_scatter_for(block));
        if matches!(
            alg,
            Some(ReduceScatterAlg::Halving | ReduceScatterAlg::Ring)
        ) {
            let (total, mine) = (block * size, self.rank as usize * block);
            let op = Box::new(*op);
            mpi::request::scope(|scope| {
                self.sched_reduce_scatter(
                    scope,
                    send,
                    recv,
                    total,
                    mine..mine + block,
                    op,
                    None,
                    Blocks::Same(block),
                )
                .wait()
            });
            return true;
        }
        if alg == Some(ReduceScatterAlg::Allreduce) {
            let recv = if send.is_some() {
                &mut recv[..block]
            } else {
                recv
            };
            return self.raw_reduce_scatter(send, recv, &vec![block; size], op);
        }
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let r = h.on_lane(|h| {
            h.subtrees()?;
            let sub = h.subtrees.as_ref().expect("learned above");
            let (view, links, s) = (&h.view, &mut h.links, &h.settings);
            let (scratch, full) = (&mut h.scratch, &mut h.reduced);
            reduce_scatter::reduce_scatter_block(
                view, links, sub, s, send, recv, block, op, scratch, full,
            )
        });
        if let Err(e) = r {
            self.abort("MPI_Reduce_scatter_block", e);
        }
        true
    }

    /// Reduce_scatter with `op`: every rank contributes the bytes of all blocks (`send`,
    /// or in place `recv`'s, whose rest stays as it was), block r being `lens[r]` bytes,
    /// and gets its own block into the first `lens[rank]` bytes of `recv`. It runs as
    /// recursive halving in the hierarchy's order where the settings choose it for the
    /// blocks' mean length ([`topo_hierarchy::Settings::reduce_scatter_v_halving`]; the
    /// schedule of `MPI_Ireduce_scatter`, waited for), else as an Allreduce
    /// (`raw_all_reduce`) of which each rank keeps its block. False (nothing done) where
    /// the collectives go to MPI, or for buffers of the wrong length.
    pub fn raw_reduce_scatter(
        &mut self,
        send: Option<&[u8]>,
        recv: &mut [u8],
        lens: &[usize],
        op: &MpiCombine,
    ) -> bool {
        let size = self.world.size() as usize;
        let send_len = send.map(<[u8]>::len);
        let Some((total, mine)) = reduce_scatter_fits(size, self.rank, lens, send_len, recv.len())
        else {
            return false;
        };
        if size == 2 {
            let theirs = if self.rank == 0 {
                mine.end..total
            } else {
                0..mine.start
            };
            return self.raw_reduce_scatter_pair(send, recv, mine, theirs, op);
        }
        let halving = context::lock(&self.core)
            .hier
            .as_ref()
            .map(|h| h.settings.reduce_scatter_v_halving(total / size.max(1)));
        if halving == Some(true) {
            let op = Box::new(*op);
            let ends = crate::gatherv::ends_of(lens);
            mpi::request::scope(|scope| {
                let blocks = Blocks::Ends(&ends);
                self.sched_reduce_scatter(scope, send, recv, total, mine, op, None, blocks)
                    .wait()
            });
            return true;
        }
        let (at, mine) = (mine.start, mine.len());
        // The whole result in scratch kept by the context, this rank's block out of it (in
        // place, the rest of `recv` keeps the contribution, as Open MPI's does).
        let mut full = {
            let mut core = context::lock(&self.core);
            core.hier.as_mut().map(|h| std::mem::take(&mut h.reduced))
        }
        .unwrap_or_default();
        full.resize(total, 0);
        let contribution: &[u8] = match send {
            Some(s) => s,
            None => recv,
        };
        let done = self.raw_all_reduce(Some(contribution), &mut full, op);
        if done {
            recv[..mine].copy_from_slice(&full[at..at + mine]);
        }
        if let Some(h) = &mut context::lock(&self.core).hier {
            h.reduced = full;
        }
        done
    }

    /// Reduce_scatter(_block) on a context of two ranks, whatever the settings' form: one
    /// exchange ([`reduce_scatter::pair`]); `mine` and `theirs` are the two ranks' blocks
    /// in the contribution.
    fn raw_reduce_scatter_pair(
        &mut self,
        send: Option<&[u8]>,
        recv: &mut [u8],
        mine: std::ops::Range<usize>,
        theirs: std::ops::Range<usize>,
        op: &MpiCombine,
    ) -> bool {
        if mine.is_empty() && theirs.is_empty() {
            return true;
        }
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let r = h.on_lane(|h| {
            let (tmp, _) = h.scratch.pair(mine.len());
            reduce_scatter::pair(&h.view, &mut h.links, send, recv, mine, theirs, op, tmp)
        });
        if let Err(e) = r {
            self.abort("MPI_Reduce_scatter", e);
        }
        true
    }

    /// Broadcasts the bytes of `buf` from `root`.
    pub fn raw_broadcast(&mut self, root: i32, buf: &mut [u8]) -> bool {
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let r = h.on_lane(|h| bcast::bcast(&h.view, &mut h.links, &h.settings, root as u32, buf));
        if let Err(e) = r {
            self.abort("MPI_Bcast", e);
        }
        true
    }

    /// Reduces with `op` into `recv` at `root`. `send` is `None` in place (the root's
    /// contribution is in `recv`); `recv` is `None` on the other ranks.
    pub fn raw_reduce(
        &mut self,
        root: i32,
        send: Option<&[u8]>,
        recv: Option<&mut [u8]>,
        op: &MpiCombine,
    ) -> bool {
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let r = h.on_lane(|h| {
            let (view, settings) = (&h.view, &h.settings);
            reduce::reduce(
                view,
                &mut h.links,
                settings,
                root as u32,
                send,
                recv,
                op,
                &mut h.scratch,
            )
        });
        if let Err(e) = r {
            self.abort("MPI_Reduce", e);
        }
        true
    }

    /// Reduces with `op` into every rank's `recv`; `send` is `None` in place.
    pub fn raw_all_reduce(
        &mut self,
        send: Option<&[u8]>,
        recv: &mut [u8],
        op: &MpiCombine,
    ) -> bool {
        let flat = {
            let core = context::lock(&self.core);
            core.hier
                .as_ref()
                .is_some_and(|h| h.allreduce_is_flat(recv.len()))
        };
        if flat {
            // The flat forms' sends and receives go to different ranks over different
            // links: they run as their schedule, waited for.
            self.flat_all_reduce(send, recv, *op);
            return true;
        }
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let r = h.on_lane(|h| {
            let view = allreduce::view_for(&h.view, &h.network_view, &h.settings, recv.len());
            let settings = &h.settings;
            allreduce::allreduce(view, &mut h.links, settings, send, recv, op, &mut h.scratch)
        });
        if let Err(e) = r {
            self.abort("MPI_Allreduce", e);
        }
        true
    }

    /// Returns once every rank has called it.
    pub fn raw_barrier(&mut self) -> bool {
        let flat = {
            let core = context::lock(&self.core);
            core.hier.as_ref().is_some_and(|h| h.barrier_is_flat())
        };
        if flat {
            // Its signals go to different ranks over different links: it runs as its
            // schedule, waited for.
            self.immediate_barrier().wait();
            return true;
        }
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let r = h.on_lane(|h| barrier::barrier(&h.network_view, &mut h.links, &h.settings));
        if let Err(e) = r {
            self.abort("MPI_Barrier", e);
        }
        true
    }
}

/// Whether the buffers of a Scan (`exclusive` false) or Exscan at `rank` fit: one length
/// on both sides, a receive buffer at every rank but Exscan's rank 0 (and there in place).
/// A Reduce_scatter_block's block: `recv_len` with a send buffer of `size` blocks, or in
/// place a `size`th of `recv_len`; `None` for buffers of other lengths.
pub(super) fn block_of(size: usize, send_len: Option<usize>, recv_len: usize) -> Option<usize> {
    match send_len {
        Some(s) if s == recv_len * size => Some(recv_len),
        None if recv_len.is_multiple_of(size) => Some(recv_len / size),
        _ => None,
    }
}

/// A Reduce_scatter's whole contribution in bytes and this `rank`'s block of the result
/// in it, for blocks of `lens` bytes (one per rank), if the buffers fit: a send buffer of
/// the whole and a receive buffer of at least the block, or in place a receive buffer of
/// the whole.
pub(super) fn reduce_scatter_fits(
    size: usize,
    rank: i32,
    lens: &[usize],
    send_len: Option<usize>,
    recv_len: usize,
) -> Option<(usize, std::ops::Range<usize>)> {
    if lens.len() != size {
        return None;
    }
    let rank = rank as usize;
    let total: usize = lens.iter().sum();
    let at = lens[..rank].iter().sum::<usize>();
    let mine = at..at + lens[rank];
    let fits = match send_len {
        Some(s) => s == total && recv_len >= mine.len(),
        None => recv_len == total,
    };
    fits.then_some((total, mine))
}

pub(super) fn scan_fits(
    send: Option<&[u8]>,
    recv: Option<&[u8]>,
    exclusive: bool,
    rank: i32,
) -> bool {
    match (send, recv) {
        (Some(s), Some(r)) => s.len() == r.len(),
        (None, Some(_)) => true,
        (Some(_), None) => exclusive && rank == 0,
        (None, None) => false,
    }
}

/// `at` with every empty range made `0..0` (an empty block of a v-form may name any
/// place, also outside its buffer): copied only where one is not `0..0` already.
fn emptied(at: &[std::ops::Range<usize>]) -> Ranges<'_> {
    if at.iter().all(|r| !r.is_empty() || *r == (0..0)) {
        return std::borrow::Cow::Borrowed(at);
    }
    at.iter()
        .map(|r| if r.is_empty() { 0..0 } else { r.clone() })
        .collect()
}

/// An Allgatherv's ranges checked for its nonblocking form: one per rank, each inside the
/// receive buffer of `recv_len` bytes, none overlapping another (the schedule receives into
/// all of them at once), this rank's of its `send`'s length; each empty one made `0..0`.
pub(super) fn all_gather_v_ranges(
    size: usize,
    me: usize,
    send: Option<usize>,
    recv_len: usize,
    at: &[std::ops::Range<usize>],
) -> Option<Ranges<'_>> {
    let at = emptied(at);
    let fits = at.len() == size
        && apart(&at)
        && at.iter().all(|r| r.end <= recv_len)
        && send.is_none_or(|n| n == at[me].len());
    fits.then_some(at)
}

/// A Gatherv's or Scatterv's arguments checked: the root (and only the root) has its
/// buffer of `buf.0` bytes with one range per rank (`buf.1`), each inside it, and its own
/// block (`own`; `None` in place) has the length of its range; every other rank has its
/// own block. `Some` of the root's ranges (each empty one made `0..0` where one lies
/// outside the buffer or ends before it starts: copied only then; `None` at the other
/// ranks), or `None` for arguments that do not hold.
pub(super) fn rooted_v<'a>(
    size: usize,
    root: i32,
    me: i32,
    buf: Option<(usize, &'a [std::ops::Range<usize>])>,
    own: Option<usize>,
) -> Option<Option<std::borrow::Cow<'a, [std::ops::Range<usize>]>>> {
    let is_root = root == me;
    if root < 0 || is_root != buf.is_some() || (own.is_none() && !is_root) {
        return None;
    }
    let Some((len, at)) = buf else {
        return Some(None);
    };
    let at = if at.iter().all(|r| r.start <= r.end && r.end <= len) {
        std::borrow::Cow::Borrowed(at)
    } else {
        emptied(at)
    };
    let fits = at.len() == size
        && at.iter().all(|r| r.end <= len)
        && own.is_none_or(|n| n == at[root as usize].len());
    fits.then_some(Some(at))
}

/// A v-form's byte ranges, one per rank.
/// A v-form's ranges, borrowed from the caller where they need no change.
pub(super) type Ranges<'a> = std::borrow::Cow<'a, [std::ops::Range<usize>]>;

/// Whether an Alltoallv's ranges fit ([`Topo::raw_all_to_all_v`]): one per rank on each
/// side, non-empty ones inside their buffers (of `send.0` and `recv_len` bytes), the
/// receive ones apart, this rank's two of one length. Allocates nothing where the
/// receive ranges ascend with the ranks (the usual layout).
pub(super) fn v_ranges_fit(
    size: usize,
    me: usize,
    send: Option<(usize, &[std::ops::Range<usize>])>,
    recv_len: usize,
    recv_at: &[std::ops::Range<usize>],
) -> bool {
    let inside = |at: &[std::ops::Range<usize>], len: usize| {
        at.len() == size && at.iter().all(|r| r.is_empty() || r.end <= len)
    };
    if !inside(recv_at, recv_len) || !apart(recv_at) {
        return false;
    }
    send.is_none_or(|(len, at)| inside(at, len) && at[me].len() == recv_at[me].len())
}

/// Whether the non-empty ranges of `at` do not overlap.
fn apart(at: &[std::ops::Range<usize>]) -> bool {
    if crate::alltoall::ascending(at) {
        return true;
    }
    let mut taken: Vec<&std::ops::Range<usize>> = at.iter().filter(|r| !r.is_empty()).collect();
    taken.sort_by_key(|r| r.start);
    taken.windows(2).all(|w| w[0].end <= w[1].start)
}

/// [`v_ranges_fit`]'s ranges, with every empty range made `0..0` ([`emptied`]).
pub(super) fn v_ranges<'a>(
    size: usize,
    me: usize,
    send: Option<(usize, &'a [std::ops::Range<usize>])>,
    recv_len: usize,
    recv_at: &'a [std::ops::Range<usize>],
) -> Option<(Option<Ranges<'a>>, Ranges<'a>)> {
    v_ranges_fit(size, me, send, recv_len, recv_at)
        .then(|| (send.map(|(_, at)| emptied(at)), emptied(recv_at)))
}
