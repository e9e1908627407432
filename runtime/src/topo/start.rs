//! Starting a nonblocking collective: the schedule built for the call (or reused from
//! one of the same shape), queued in the context, and a request for it; or MPI's own
//! nonblocking collective where topo-run's path does not take the call.

use mpi::collective::Operation;
use mpi::request::{Scope, StaticScope};
use mpi::topology::Communicator;
use topo_hierarchy::settings::{AllgatherAlg, AlltoallAlg, ReduceScatterAlg};

use crate::combine::Combine;
use crate::context::{self, HierarchicalPath};
use crate::ffi::native::Native;
use crate::nonblocking::{
    Builder, Schedule, Shape, iallgatherv, iallreduce, ialltoall, ibarrier, ibcast, igather,
    ireduce, ireduce_scatter, iscan, iscatter,
};
use crate::plain::{self, MpiCombine};
use crate::request::{KeepAlive, Request};
use crate::subtrees::Blocks;
use crate::topo::Topo;

/// The steps of an Allreduce of `len` bytes of `elem`-byte elements into [`Buf::Recv`]
/// (`send`: the contribution is in the send buffer): the flat form where the settings
/// choose one, else the hierarchical one; and the bytes of scratch they use.
///
/// [`Buf::Recv`]: crate::nonblocking::Buf::Recv
fn all_reduce_steps(h: &HierarchicalPath, elem: usize, send: bool, len: usize) -> (Builder, usize) {
    h.flat_allreduce(elem, send, len)
        .unwrap_or_else(|| iallreduce::build(h.allreduce_view(len), &h.settings, send, len, elem))
}

/// The shape of a call (see [`Shape`]).
pub(super) fn shape(
    op: &'static str,
    alg: Option<AllgatherAlg>,
    root: i32,
    len: usize,
    has_send: bool,
) -> Shape {
    Shape {
        op,
        alg,
        root: root as u32,
        len,
        has_send,
        elem: 0,
        blocks: Vec::new(),
    }
}

/// A call's blocks for its [`Shape`], borrowed from the call: the parts one after another
/// (an Alltoallv's send ranges and then its receive ranges; one part or none elsewhere).
pub(super) type Parts<'b> = [&'b [std::ops::Range<usize>]; 2];

/// The parts of a call without blocks of varied lengths.
const NO_BLOCKS: Parts<'static> = [&[], &[]];

/// The shape of a Gather's or Scatter's schedule (`same`: every block's length; `leaders`:
/// through the leaders) or of a Gatherv's or Scatterv's (the root's blocks `at`, `None`
/// elsewhere; this rank's block of `len` bytes); `has`: this rank's own block is apart
/// from the root's buffer (not in place). Returns the shape without its blocks, and the
/// blocks as [`Topo::start`] takes them.
fn rooted_shape<'b>(
    name: &'static str,
    root: i32,
    same: Option<usize>,
    leaders: bool,
    at: Option<&'b [std::ops::Range<usize>]>,
    len: usize,
    has: bool,
) -> (Shape, Parts<'b>) {
    match same {
        Some(n) => (
            Shape {
                elem: usize::from(leaders),
                ..shape(name, None, root, n, has)
            },
            NO_BLOCKS,
        ),
        None => (
            shape(name, None, root, len, has),
            [at.unwrap_or_default(), &[]],
        ),
    }
}

/// What a schedule runs on: the caller's buffers and the operation.
pub(super) struct Args<'a> {
    name: &'static str,
    send: Option<&'a [u8]>,
    recv: Option<&'a mut [u8]>,
    op: Option<Box<dyn Combine>>,
}

impl Topo {
    /// Starts a schedule built from this rank's view and settings; `build` returns the
    /// rounds and the sizes of the accumulator and the scratch. Calls of one shape (`shape`
    /// with the blocks `blocks` one after another, which are compared as they lie and
    /// copied only where no kept steps match) reuse the steps of the last one that
    /// completed instead of building them again.
    pub(super) fn start<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        args: Args<'a>,
        keep: Option<Box<dyn KeepAlive + 'a>>,
        (shape, blocks): (Shape, Parts<'_>),
        build: impl FnOnce(&HierarchicalPath) -> (Builder, usize, usize),
    ) -> Request<'a, S> {
        let request = self.request(scope, keep);
        let id = request.id();
        let send = args.send.map(|s| request.lend(s));
        let recv = args.recv.map(|r| request.lend_mut(r));
        let bytes = send
            .map_or(0, <[u8]>::len)
            .max(recv.as_ref().map_or(0, |r| r.len()));
        let mut core = context::lock(&self.core);
        let (shape, (b, acc, tmp)) = match core.reuse(&shape, &blocks) {
            Some((shape, b, acc, tmp)) => (shape, (b, acc, tmp)),
            None => {
                let built = build(
                    core.hier
                        .as_ref()
                        .expect("schedules run on the hierarchical path"),
                );
                (
                    Shape {
                        blocks: blocks.concat(),
                        ..shape
                    },
                    built,
                )
            }
        };
        let (acc, tmp) = (core.buffer(acc), core.buffer(tmp));
        let sched = Schedule::lent(args.name, b, send, recv, acc, tmp, args.op).shaped(shape);
        core.start(id, sched);
        let in_flight = core.has_schedules();
        drop(core);
        if in_flight {
            crate::progress_thread::kick(bytes);
        }
        request
    }

    /// A request for a collective about to start on this context, registered with
    /// `scope` (the context's poison checked first).
    fn request<'a, S: Scope<'a>>(
        &self,
        scope: S,
        keep: Option<Box<dyn KeepAlive + 'a>>,
    ) -> Request<'a, S> {
        let mut core = context::lock(&self.core);
        core.check_poison();
        let id = core.take_id();
        drop(core);
        Request::new(&self.core, id, scope, keep)
    }

    /// Hands a collective to MPI: `native` describes it on the buffers the request lends,
    /// and it starts on topo-run's world communicator.
    pub(super) fn start_native<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        keep: Option<Box<dyn KeepAlive + 'a>>,
        native: impl FnOnce(&Request<'a, S>) -> Native,
    ) -> Request<'a, S> {
        let request = self.request(scope, keep);
        let started = native(&request).start(&self.world);
        context::lock(&self.core).start_native(request.id(), started);
        request
    }

    pub(super) fn sched_bcast<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        root: i32,
        buf: &'a mut [u8],
    ) -> Request<'a, S> {
        let len = buf.len();
        let args = Args {
            name: "MPI_Ibcast",
            send: None,
            recv: Some(buf),
            op: None,
        };
        let shape = shape(args.name, None, root, len, false);
        self.start(scope, args, None, (shape, NO_BLOCKS), |h| {
            (ibcast::build(&h.view, &h.settings, root as u32, len), 0, 0)
        })
    }

    pub(super) fn sched_reduce<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        root: i32,
        send: Option<&'a [u8]>,
        recv: Option<&'a mut [u8]>,
        op: Box<dyn Combine>,
        keep: Option<Box<dyn KeepAlive + 'a>>,
    ) -> Request<'a, S> {
        let has_send = send.is_some();
        let len = send.map_or_else(|| recv.as_ref().map_or(0, |r| r.len()), <[u8]>::len);
        let elem = op.elem_size();
        let args = Args {
            name: "MPI_Ireduce",
            send,
            recv,
            op: Some(op),
        };
        let shape = shape(args.name, None, root, len, has_send);
        self.start(scope, args, keep, (shape, NO_BLOCKS), |h| {
            let (b, acc) = ireduce::build(&h.view, &h.settings, root as u32, has_send, len, elem);
            (b, acc, 0)
        })
    }

    /// A flat Allreduce ([`crate::context::HierarchicalPath::flat_allreduce`]) run as its schedule and
    /// waited for: the blocking form.
    pub(crate) fn flat_all_reduce(&mut self, send: Option<&[u8]>, recv: &mut [u8], op: MpiCombine) {
        mpi::request::scope(|scope| {
            self.sched_all_reduce(scope, send, recv, Box::new(op), None)
                .wait()
        });
    }

    pub(super) fn sched_all_reduce<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        send: Option<&'a [u8]>,
        recv: &'a mut [u8],
        op: Box<dyn Combine>,
        keep: Option<Box<dyn KeepAlive + 'a>>,
    ) -> Request<'a, S> {
        let has_send = send.is_some();
        let len = recv.len();
        let args = Args {
            name: "MPI_Iallreduce",
            send,
            recv: Some(recv),
            op: Some(op),
        };
        let elem = args.op.as_ref().map_or(1, |op| op.elem_size());
        let shape = Shape {
            elem,
            ..shape(args.name, None, 0, len, has_send)
        };
        self.start(scope, args, keep, (shape, NO_BLOCKS), |h| {
            let (b, tmp) = all_reduce_steps(h, elem, has_send, len);
            (b, 0, tmp)
        })
    }

    /// Ireduce_scatter_block (`blocks` [`Blocks::Same`]) or Ireduce_scatter (`blocks`
    /// [`Blocks::Ends`], every rank's block): the Allreduce's schedule of the `total` bytes
    /// of the contribution (`send`, or in place `recv`'s first `total`), of which this rank
    /// keeps `mine` in the first bytes of `recv` ([`ireduce_scatter::build`]), or recursive
    /// halving where the settings choose it for the blocks' mean length
    /// ([`ireduce_scatter::build_halving`]). The steps serve later calls of the shape (a
    /// Reduce_scatter's, of the same blocks).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn sched_reduce_scatter<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        send: Option<&'a [u8]>,
        recv: &'a mut [u8],
        total: usize,
        mine: std::ops::Range<usize>,
        op: Box<dyn Combine>,
        keep: Option<Box<dyn KeepAlive + 'a>>,
        blocks: Blocks<'_>,
    ) -> Request<'a, S> {
        let has_send = send.is_some();
        let elem = op.elem_size();
        let block = matches!(blocks, Blocks::Same(_));
        let name = if block {
            "MPI_Ireduce_scatter_block"
        } else {
            "MPI_Ireduce_scatter"
        };
        let args = Args {
            name,
            send,
            recv: Some(recv),
            op: Some(op),
        };
        let key = match blocks {
            Blocks::Same(_) => Vec::new(),
            Blocks::Ends(ends) => (0..ends.len() as u32).map(|r| blocks.at(r)).collect(),
        };
        let shape = Shape {
            elem,
            ..shape(name, None, 0, total, has_send)
        };
        self.start(scope, args, keep, (shape, [&key, &[]]), |h| {
            let mean = total / (h.view.size as usize).max(1);
            if h.settings.reduce_scatter_for(mean) == ReduceScatterAlg::Ring
                && let Some(peers) = h.exchanges.ring()
            {
                let (b, tmp) = ireduce_scatter::build_ring(peers, blocks, total, has_send);
                return (b, 0, tmp);
            }
            if let Some(halving) = h.halving_blocks(total, block) {
                let (b, tmp) = ireduce_scatter::build_halving(halving, blocks, has_send);
                return (b, 0, tmp);
            }
            let (b, tmp) = all_reduce_steps(h, elem, has_send, total);
            (ireduce_scatter::build(b, has_send, total, mine), total, tmp)
        })
    }

    /// Iscan (`exclusive` false) or Iexscan: `send` is `None` in place; `recv` is `None`
    /// at Iexscan's rank 0 only. The hierarchical form where the context has agreed on it
    /// (at a blocking Scan or Exscan before: a start does not wait for the other ranks),
    /// else recursive doubling; every rank of the context has seen the same calls, so all
    /// choose alike.
    pub(super) fn sched_scan<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        send: Option<&'a [u8]>,
        recv: Option<&'a mut [u8]>,
        op: Box<dyn Combine>,
        keep: Option<Box<dyn KeepAlive + 'a>>,
        exclusive: bool,
    ) -> Request<'a, S> {
        let has_send = send.is_some();
        let len = send.map_or_else(|| recv.as_ref().map_or(0, |r| r.len()), <[u8]>::len);
        let hierarchical = context::lock(&self.core)
            .hier
            .as_ref()
            .is_some_and(|h| h.scan_in_order == Some(true));
        let args = Args {
            name: if exclusive {
                "MPI_Iexscan"
            } else {
                "MPI_Iscan"
            },
            send,
            recv,
            op: Some(op),
        };
        let elem = args.op.as_ref().map_or(1, |op| op.elem_size());
        // The form in the shape's root (a scan has none), so that steps built for
        // recursive doubling are not reused once the hierarchical form is agreed.
        let shape = Shape {
            elem,
            ..shape(args.name, None, i32::from(hierarchical), len, has_send)
        };
        self.start(scope, args, keep, (shape, NO_BLOCKS), |h| {
            let view = crate::scan::view_for(hierarchical, &h.view, &h.scan_view, len);
            let sub = h.subtrees.as_ref().filter(|_| hierarchical);
            iscan::build(view, h.settings.spin, sub, has_send, len, exclusive)
        })
    }

    pub(super) fn sched_all_to_all<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        send: Option<&'a [u8]>,
        recv: &'a mut [u8],
    ) -> Request<'a, S> {
        let has_send = send.is_some();
        let size = self.world.size() as usize;
        let len = recv.len() / size;
        let rank = self.world.rank() as u32;
        let args = Args {
            name: "MPI_Ialltoall",
            send,
            recv: Some(recv),
            op: None,
        };
        let shape = shape(args.name, None, 0, len, has_send);
        self.start(scope, args, None, (shape, NO_BLOCKS), |h| {
            let one_node = h.settings.nodes == 1;
            let by_node = h.exchanges.by_node();
            match (h.settings.alltoall_for(len), by_node) {
                (AlltoallAlg::Spread, Some(nodes)) if !one_node && nodes.nodes() > 1 => {
                    ialltoall::build_spread(rank, nodes, len, has_send)
                }
                _ => {
                    let (b, tmp) = ialltoall::build(rank, size, one_node, by_node, len, has_send);
                    (b, 0, tmp)
                }
            }
        })
    }

    /// An Alltoallv's schedule (see [`Topo::raw_immediate_all_to_all_v`]); its steps serve
    /// later calls of the same blocks.
    pub(super) fn sched_all_to_all_v<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        send: Option<(&'a [u8], &[std::ops::Range<usize>])>,
        recv: &'a mut [u8],
        recv_at: &[std::ops::Range<usize>],
    ) -> Request<'a, S> {
        let rank = self.world.rank() as u32;
        let recv_len = recv_at.iter().map(|r| r.end).max().unwrap_or(0);
        let send_at = send.map(|(_, at)| at);
        let args = Args {
            name: "MPI_Ialltoallv",
            send: send.map(|(b, _)| b),
            recv: Some(recv),
            op: None,
        };
        let shape = shape(args.name, None, 0, recv_len, send_at.is_some());
        let blocks = [send_at.unwrap_or_default(), recv_at];
        self.start(scope, args, None, (shape, blocks), |h| {
            let one_node = h.settings.nodes == 1;
            let by_node = h.exchanges.by_node();
            let (b, tmp) = ialltoall::build_v(rank, one_node, by_node, send_at, recv_at, recv_len);
            (b, 0, tmp)
        })
    }

    /// A Gather's or Gatherv's schedule, the direct form (see
    /// [`Topo::raw_immediate_gather_v`]): `at` places each rank's block at the root (`None`
    /// elsewhere); `same` is the one length of every block, where the blocks are a Gather's.
    /// The steps serve later calls of the shape (a Gatherv's, of the same blocks).
    pub(super) fn sched_gather_v<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        root: i32,
        send: Option<&'a [u8]>,
        recv: Option<(&'a mut [u8], &[std::ops::Range<usize>])>,
        same: Option<usize>,
    ) -> Request<'a, S> {
        let rank = self.world.rank() as u32;
        let has_send = send.is_some();
        let len = send.map_or(0, <[u8]>::len);
        let (recv, at) = match recv {
            Some((b, at)) => (Some(b), Some(at)),
            None => (None, None),
        };
        let name = if same.is_some() {
            "MPI_Igather"
        } else {
            "MPI_Igatherv"
        };
        // A Gather goes through the leaders where the blocking one would and the context
        // knows its subtrees already (a start does not wait to learn them).
        let leaders = same.is_some_and(|n| self.leaders_know(true, n));
        let args = Args {
            name,
            send,
            recv,
            op: None,
        };
        let shape = rooted_shape(name, root, same, leaders, at, len, has_send);
        self.start(scope, args, None, shape, |h| match (same, &h.subtrees) {
            (Some(n), Some(sub)) if leaders => {
                igather::build_leaders(&h.view, sub, root as u32, has_send, n)
            }
            _ => {
                let one_node = h.settings.nodes == 1;
                let b = igather::build(rank, root as u32, at, has_send, len, one_node);
                (b, 0, 0)
            }
        })
    }

    /// A Scatter's or Scatterv's schedule, the direct form (see
    /// [`Topo::raw_immediate_scatter_v`]): `at` places each rank's block at the root
    /// (`None` elsewhere); `same` as for [`Topo::sched_gather_v`].
    pub(super) fn sched_scatter_v<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        root: i32,
        send: Option<(&'a [u8], &[std::ops::Range<usize>])>,
        recv: Option<&'a mut [u8]>,
        same: Option<usize>,
    ) -> Request<'a, S> {
        let rank = self.world.rank() as u32;
        let has_recv = recv.is_some();
        let len = recv.as_ref().map_or(0, |r| r.len());
        let (send, at) = match send {
            Some((b, at)) => (Some(b), Some(at)),
            None => (None, None),
        };
        let name = if same.is_some() {
            "MPI_Iscatter"
        } else {
            "MPI_Iscatterv"
        };
        // As for Igather.
        let leaders = same.is_some_and(|n| self.leaders_know(false, n));
        let args = Args {
            name,
            send,
            recv,
            op: None,
        };
        let shape = rooted_shape(name, root, same, leaders, at, len, has_recv);
        self.start(scope, args, None, shape, |h| match (same, &h.subtrees) {
            (Some(n), Some(sub)) if leaders => {
                iscatter::build_leaders(&h.view, sub, root as u32, has_recv, n)
            }
            _ => (iscatter::build(rank, root as u32, at, has_recv, len), 0, 0),
        })
    }

    /// An Allgatherv's schedule (see [`Topo::raw_immediate_all_gather_v`]); its steps serve
    /// later calls of the same blocks.
    pub(super) fn sched_all_gather_v<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        send: Option<&'a [u8]>,
        recv: &'a mut [u8],
        at: &[std::ops::Range<usize>],
    ) -> Request<'a, S> {
        let rank = self.world.rank() as u32;
        let has_send = send.is_some();
        let args = Args {
            name: "MPI_Iallgatherv",
            send,
            recv: Some(recv),
            op: None,
        };
        let total = at.iter().map(std::ops::Range::len).sum();
        let shape = shape(args.name, None, 0, total, has_send);
        self.start(scope, args, None, (shape, [at, &[]]), |h| {
            use crate::nonblocking::iallgather::Exchange;
            let size = at.len();
            let flat = iallgatherv::schedule_flat(h.settings.nodes, size, total);
            // The Allgather's rules for the blocks' total choose the exchange: the ring, or
            // recursive doubling (Bruck's for a size that is not a power of two).
            let ring = h.exchanges.ring();
            let doubling = match h.settings.allgather_for(total, size) {
                AllgatherAlg::Ring if ring.is_some() => None,
                _ => h.exchanges.get(AllgatherAlg::RecursiveDoubling),
            };
            let (b, tmp) = match (doubling, ring) {
                (Some(Exchange::RecursiveDoubling(peers, _)), _) if flat => {
                    iallgatherv::build_rd(rank, peers, at, has_send)
                }
                (Some(e @ Exchange::Bruck(..)), _) if flat => {
                    let peers = e.bruck_peers(total / size).expect("Bruck's exchange");
                    iallgatherv::build_bruck(rank, peers, at, has_send)
                }
                (_, Some(peers)) if flat => (iallgatherv::build_ring(rank, peers, at, has_send), 0),
                _ => (
                    iallgatherv::build(rank, h.settings.nodes == 1, at, has_send),
                    0,
                ),
            };
            (b, 0, tmp)
        })
    }

    /// Flat exchange `alg`'s schedule; the caller has checked [`Topo::exchange_for`].
    pub(crate) fn sched_all_gather<'a, S: Scope<'a>>(
        &mut self,
        scope: S,
        alg: AllgatherAlg,
        send: Option<&'a [u8]>,
        recv: &'a mut [u8],
    ) -> Request<'a, S> {
        let has_send = send.is_some();
        let len = recv.len() / self.world.size() as usize;
        let rank = self.world.rank() as u32;
        let args = Args {
            name: "MPI_Iallgather",
            send,
            recv: Some(recv),
            op: None,
        };
        let shape = shape(args.name, Some(alg), 0, len, has_send);
        self.start(scope, args, None, (shape, NO_BLOCKS), |h| {
            let e = h.exchanges.get(alg).expect("exchange_for found the peers");
            let (b, tmp) = e.build(rank, len, has_send);
            (b, 0, tmp)
        })
    }

    pub(super) fn sched_barrier(&mut self) -> Request<'static> {
        let args = Args {
            name: "MPI_Ibarrier",
            send: None,
            recv: None,
            op: None,
        };
        let shape = shape(args.name, None, 0, 0, false);
        self.start(StaticScope, args, None, (shape, NO_BLOCKS), |h| {
            let b = h.flat_barrier();
            (
                b.unwrap_or_else(|| ibarrier::build(&h.network_view, &h.settings)),
                0,
                0,
            )
        })
    }

    /// Whether an Allgatherv with blocks at `at` runs a flat exchange, recursive doubling
    /// or the ring ([`iallgatherv::flat_for`]), whose order the context worked out at setup.
    pub(super) fn all_gather_v_flat(&self, at: &[std::ops::Range<usize>]) -> bool {
        let total = at.iter().map(std::ops::Range::len).sum();
        context::lock(&self.core).hier.as_ref().is_some_and(|h| {
            h.exchanges.ring().is_some() && iallgatherv::flat_for(h.settings.nodes, at.len(), total)
        })
    }

    /// Whether a Gather or Scatter of `len`-byte blocks goes through the leaders as a
    /// schedule: where the blocking one would ([`crate::subtrees::direct`] says no) and the
    /// context has learned its subtrees (at a blocking Gather, Scatter, Alltoall or Scan
    /// before; every rank has seen the same calls, so all choose alike).
    fn leaders_know(&self, gather: bool, len: usize) -> bool {
        context::lock(&self.core).hier.as_ref().is_some_and(|h| {
            h.subtrees.is_some() && !crate::subtrees::direct(gather, h.settings.nodes, len)
        })
    }

    /// Whether a reduction over `T` with `op` takes the hierarchical path.
    pub(super) fn ours<T: 'static, O: Operation>(&self, op: &O) -> bool {
        self.is_hierarchical() && plain::is_plain::<T>() && plain::commutes(op)
    }
}
