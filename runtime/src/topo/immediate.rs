//! The nonblocking collectives in rsmpi's names and types (`immediate_*`), and the
//! byte-level `raw_immediate_*` entry points of the PMPI library. The typed methods are
//! thin wrappers: a plain type becomes bytes and goes to the same schedule starters
//! (`start.rs`) as the byte-level entry points; anything else is handed to MPI's own
//! nonblocking collective.

use std::marker::PhantomData;
use std::sync::Arc;

use mpi::collective::Operation;
use mpi::datatype::Equivalence;
use mpi::request::{Scope, StaticScope};
use mpi::topology::Communicator;

use crate::ffi::native::Native;
use crate::plain::{self, MpiCombine};
use crate::request::{Progress, RawRequest, Request};
use crate::topo::Topo;

impl Topo {
    /// Starts a broadcast of `buf` from `root` (rsmpi: `Root::immediate_broadcast_into`).
    pub fn immediate_broadcast_into<'a, T, S>(
        &mut self,
        scope: S,
        root: i32,
        buf: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        if self.is_hierarchical() && plain::is_plain::<T>() {
            return self.sched_bcast(scope, root, plain::bytes_mut(buf));
        }
        self.start_native(scope, None, |r| Native::bcast(r.lend_mut(buf), root))
    }

    /// Starts a reduction of everyone's `send` into `recv` at this rank, the root
    /// (rsmpi: `Root::immediate_reduce_into_root`).
    pub fn immediate_reduce_into_root<'a, T, O, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        assert_eq!(
            send.len(),
            recv.len(),
            "immediate_reduce_into_root: send and receive lengths differ"
        );
        let root = self.world.rank();
        self.ireduce(scope, root, Some(send), Some(recv), op)
    }

    /// Like [`Topo::immediate_reduce_into_root`], with the root's contribution in `buf`.
    pub fn immediate_reduce_into_root_in_place<'a, T, O, S>(
        &mut self,
        scope: S,
        buf: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        let root = self.world.rank();
        self.ireduce(scope, root, None, Some(buf), op)
    }

    /// Starts this rank's contribution to a reduction whose result goes to `root`
    /// (rsmpi: `Root::immediate_reduce_into`).
    pub fn immediate_reduce_into<'a, T, O, S>(
        &mut self,
        scope: S,
        root: i32,
        send: &'a [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        assert_ne!(
            root,
            self.world.rank(),
            "immediate_reduce_into is for non-root ranks; the root calls immediate_reduce_into_root"
        );
        self.ireduce(scope, root, Some(send), None, op)
    }

    pub(super) fn ireduce<'a, T, O, S>(
        &mut self,
        scope: S,
        root: i32,
        send: Option<&'a [T]>,
        recv: Option<&'a mut [T]>,
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        if self.ours::<T, O>(&op) {
            let combine = Box::new(MpiCombine::new::<T, O>(&op));
            let (send, recv) = (send.map(plain::bytes), recv.map(plain::bytes_mut));
            return self.sched_reduce(scope, root, send, recv, combine, Some(Box::new(op)));
        }
        let raw_op = op.as_raw();
        self.start_native(scope, Some(Box::new(op)), |r| {
            let (send, recv) = (send.map(|s| r.lend(s)), recv.map(|b| r.lend_mut(b)));
            Native::reduce(root, send, recv, raw_op)
        })
    }

    /// Starts a reduction of everyone's `send` into every rank's `recv`
    /// (rsmpi: `CommunicatorCollectives::immediate_all_reduce_into`).
    pub fn immediate_all_reduce_into<'a, T, O, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        assert_eq!(
            send.len(),
            recv.len(),
            "immediate_all_reduce_into: send and receive lengths differ"
        );
        self.iallreduce(scope, Some(send), recv, op)
    }

    /// Like [`Topo::immediate_all_reduce_into`], with this rank's contribution in `buf`.
    pub fn immediate_all_reduce_in_place<'a, T, O, S>(
        &mut self,
        scope: S,
        buf: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        self.iallreduce(scope, None, buf, op)
    }

    pub(super) fn iallreduce<'a, T, O, S>(
        &mut self,
        scope: S,
        send: Option<&'a [T]>,
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        if self.ours::<T, O>(&op) {
            let combine = Box::new(MpiCombine::new::<T, O>(&op));
            let (send, recv) = (send.map(plain::bytes), plain::bytes_mut(recv));
            return self.sched_all_reduce(scope, send, recv, combine, Some(Box::new(op)));
        }
        let raw_op = op.as_raw();
        self.start_native(scope, Some(Box::new(op)), |r| {
            Native::all_reduce(send.map(|s| r.lend(s)), r.lend_mut(recv), raw_op)
        })
    }

    /// Starts reducing the `send` of ranks `0..=rank` into `recv` (rsmpi:
    /// `CommunicatorCollectives::immediate_scan_into`).
    pub fn immediate_scan_into<'a, T, O, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        assert_eq!(
            send.len(),
            recv.len(),
            "immediate_scan_into: send and receive lengths differ"
        );
        self.iscan(scope, Some(send), recv, op, false)
    }

    /// Like [`Topo::immediate_scan_into`], with this rank's contribution in `buf`.
    pub fn immediate_scan_in_place<'a, T, O, S>(
        &mut self,
        scope: S,
        buf: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        self.iscan(scope, None, buf, op, false)
    }

    /// Starts reducing the `send` of ranks `0..rank` into `recv` (rsmpi:
    /// `CommunicatorCollectives::immediate_exclusive_scan_into`); rank 0's `recv` is left
    /// as it was.
    pub fn immediate_exclusive_scan_into<'a, T, O, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        assert_eq!(
            send.len(),
            recv.len(),
            "immediate_exclusive_scan_into: send and receive lengths differ"
        );
        self.iscan(scope, Some(send), recv, op, true)
    }

    /// Like [`Topo::immediate_exclusive_scan_into`], with this rank's contribution in
    /// `buf`.
    pub fn immediate_exclusive_scan_in_place<'a, T, O, S>(
        &mut self,
        scope: S,
        buf: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        self.iscan(scope, None, buf, op, true)
    }

    fn iscan<'a, T, O, S>(
        &mut self,
        scope: S,
        send: Option<&'a [T]>,
        recv: &'a mut [T],
        op: O,
        exclusive: bool,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        if self.ours::<T, O>(&op) {
            let combine = Box::new(MpiCombine::new::<T, O>(&op));
            let (send, recv) = (send.map(plain::bytes), Some(plain::bytes_mut(recv)));
            return self.sched_scan(scope, send, recv, combine, Some(Box::new(op)), exclusive);
        }
        let raw_op = op.as_raw();
        self.start_native(scope, Some(Box::new(op)), |r| {
            Native::scan(send.map(|s| r.lend(s)), r.lend_mut(recv), raw_op, exclusive)
        })
    }

    /// Starts reducing every rank's `send` (`size * recv.len()` elements), block r of the
    /// result landing at rank r in `recv` (rsmpi:
    /// `CommunicatorCollectives::immediate_reduce_scatter_block_into`).
    pub fn immediate_reduce_scatter_block_into<'a, T, O, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        assert_eq!(
            send.len(),
            recv.len() * self.world.size() as usize,
            "immediate_reduce_scatter_block_into: the send buffer must hold size x recv.len() elements"
        );
        self.ireduce_scatter_block(scope, Some(send), recv, op)
    }

    /// Like [`Topo::immediate_reduce_scatter_block_into`], with this rank's contribution in
    /// `buf` (`size` blocks); its block of the result lands in the first.
    pub fn immediate_reduce_scatter_block_in_place<'a, T, O, S>(
        &mut self,
        scope: S,
        buf: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        assert!(
            buf.len().is_multiple_of(self.world.size() as usize),
            "immediate_reduce_scatter_block_in_place: the buffer must hold size blocks"
        );
        self.ireduce_scatter_block(scope, None, buf, op)
    }

    fn ireduce_scatter_block<'a, T, O, S>(
        &mut self,
        scope: S,
        send: Option<&'a [T]>,
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        O: Operation + 'a,
        S: Scope<'a>,
    {
        let size = self.world.size() as usize;
        let block = send.map_or(recv.len() / size, |_| recv.len());
        if self.ours::<T, O>(&op) {
            let combine = Box::new(MpiCombine::new::<T, O>(&op));
            let bytes = std::mem::size_of::<T>() * block;
            let at = bytes * self.rank as usize;
            let (send, recv) = (send.map(plain::bytes), plain::bytes_mut(recv));
            let (total, mine) = (bytes * size, at..at + bytes);
            let keep = Some(Box::new(op) as Box<dyn crate::request::KeepAlive + 'a>);
            let blocks = crate::subtrees::Blocks::Same(bytes);
            return self
                .sched_reduce_scatter(scope, send, recv, total, mine, combine, keep, blocks);
        }
        let raw_op = op.as_raw();
        self.start_native(scope, Some(Box::new(op)), |r| {
            Native::reduce_scatter_block(send.map(|s| r.lend(s)), r.lend_mut(recv), block, raw_op)
        })
    }

    /// Starts gathering every rank's `send` into `recv` on every rank, rank r's at
    /// `recv[r * send.len()..]` (rsmpi: `CommunicatorCollectives::immediate_all_gather_into`).
    /// Runs the remapped recursive doubling as a schedule where the blocking call would
    /// (`--allgather` rules, jobs of a power-of-two size); otherwise MPI's `MPI_Iallgather`.
    pub fn immediate_all_gather_into<'a, T, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        assert_eq!(
            send.len() * self.world.size() as usize,
            recv.len(),
            "immediate_all_gather_into: the receive buffer must hold size x send.len() elements"
        );
        self.iallgather(scope, Some(send), recv)
    }

    /// Like [`Topo::immediate_all_gather_into`], with this rank's block already at its place
    /// in `buf`.
    pub fn immediate_all_gather_in_place<'a, T, S>(
        &mut self,
        scope: S,
        buf: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        assert!(
            buf.len().is_multiple_of(self.world.size() as usize),
            "immediate_all_gather_in_place: the buffer must hold size blocks"
        );
        self.iallgather(scope, None, buf)
    }

    pub(super) fn iallgather<'a, T, S>(
        &mut self,
        scope: S,
        send: Option<&'a [T]>,
        recv: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        if plain::is_plain::<T>()
            && let Some((alg, _)) = self.exchange_for(std::mem::size_of_val(recv))
        {
            let send = send.map(plain::bytes);
            return self.sched_all_gather(scope, alg, send, plain::bytes_mut(recv));
        }
        let (rank, size) = (self.world.rank() as usize, self.world.size() as usize);
        self.start_native(scope, None, |r| {
            Native::all_gather(send.map(|s| r.lend(s)), r.lend_mut(recv), rank, size)
        })
    }

    /// Starts an Alltoall: `send` holds a block for every rank (rank r's at
    /// `send[r * n..][..n]`, `n = send.len() / size`), `recv` receives rank r's block for
    /// this rank at `recv[r * n..]` (rsmpi: `CommunicatorCollectives::immediate_all_to_all_into`).
    pub fn immediate_all_to_all_into<'a, T, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        assert!(
            send.len() == recv.len() && send.len().is_multiple_of(self.world.size() as usize),
            "immediate_all_to_all_into: both buffers must hold one block for every rank"
        );
        self.ialltoall(scope, Some(send), recv)
    }

    /// Like [`Topo::immediate_all_to_all_into`], the blocks to send in `buf`, which
    /// receives the blocks from every rank (in place).
    pub fn immediate_all_to_all_in_place<'a, T, S>(
        &mut self,
        scope: S,
        buf: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        assert!(
            buf.len().is_multiple_of(self.world.size() as usize),
            "immediate_all_to_all_in_place: the buffer must hold one block for every rank"
        );
        self.ialltoall(scope, None, buf)
    }

    /// Starts an Alltoallv: this rank sends `send[send_displs[r]..][..send_counts[r]]` to
    /// rank r and receives rank r's block into `recv[recv_displs[r]..][..recv_counts[r]]`
    /// (in elements; rsmpi: `CommunicatorCollectives::immediate_all_to_all_varcount_into`).
    /// Where the blocks are not topo-run's to move (another type, receive blocks that
    /// overlap), MPI's `MPI_Ialltoallv` runs them.
    #[allow(clippy::too_many_arguments)]
    pub fn immediate_all_to_all_varcount_into<'a, T, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        send_counts: &[mpi::Count],
        send_displs: &[mpi::Count],
        recv: &'a mut [T],
        recv_counts: &[mpi::Count],
        recv_displs: &[mpi::Count],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        let size = self.world.size() as usize;
        assert!(
            [send_counts, send_displs, recv_counts, recv_displs]
                .iter()
                .all(|v| v.len() == size),
            "immediate_all_to_all_varcount_into: one count and one displacement per rank on each side"
        );
        let e = std::mem::size_of::<T>();
        let ranges =
            |counts: &[mpi::Count], displs: &[mpi::Count]| -> Option<Vec<std::ops::Range<usize>>> {
                counts
                    .iter()
                    .zip(displs)
                    .map(|(&c, &d)| {
                        let (c, d) = (usize::try_from(c).ok()? * e, usize::try_from(d).ok()? * e);
                        Some(d..d + c)
                    })
                    .collect()
            };
        if plain::is_plain::<T>()
            && self.is_hierarchical()
            && let (Some(sat), Some(rat)) = (
                ranges(send_counts, send_displs),
                ranges(recv_counts, recv_displs),
            )
            && let Some((send_at, recv_at)) = super::raw::v_ranges(
                size,
                self.rank as usize,
                Some((std::mem::size_of_val(send), &sat[..])),
                std::mem::size_of_val(recv),
                &rat,
            )
        {
            let send = (plain::bytes(send), &send_at.expect("a send side")[..]);
            return self.sched_all_to_all_v(scope, Some(send), plain::bytes_mut(recv), &recv_at);
        }
        let counts =
            [send_counts, send_displs, recv_counts, recv_displs].map(<[mpi::Count]>::to_vec);
        self.start_native(scope, None, |r| {
            Native::all_to_all_v(r.lend(send), r.lend_mut(recv), counts)
        })
    }

    /// Starts an Allgatherv: every rank's `send` lands in `recv[displs[r]..][..counts[r]]`
    /// on every rank (counts and displacements in elements; rsmpi:
    /// `CommunicatorCollectives::immediate_all_gather_varcount_into`). Every rank sends its
    /// block straight to every other rank.
    pub fn immediate_all_gather_varcount_into<'a, T, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        recv: &'a mut [T],
        counts: &[mpi::Count],
        displs: &[mpi::Count],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        let size = self.world.size() as usize;
        assert!(
            counts.len() == size && displs.len() == size,
            "immediate_all_gather_varcount_into: one count and one displacement per rank"
        );
        if plain::is_plain::<T>()
            && self.is_hierarchical()
            && let Some(at) = super::blocking::byte_ranges::<T>(counts, displs)
            && let Some(at) = super::raw::all_gather_v_ranges(
                size,
                self.rank as usize,
                Some(std::mem::size_of_val(send)),
                std::mem::size_of_val(recv),
                &at,
            )
        {
            let send = Some(plain::bytes(send));
            return self.sched_all_gather_v(scope, send, plain::bytes_mut(recv), &at);
        }
        let counts = [counts.to_vec(), displs.to_vec()];
        self.start_native(scope, None, |r| {
            Native::all_gather_v(r.lend(send), r.lend_mut(recv), counts)
        })
    }

    /// Starts a Gather at this rank, the root: rank r's `send` lands at
    /// `recv[r * send.len()..]` (rsmpi: `Root::immediate_gather_into_root`). The direct
    /// form: every rank's block straight to the root.
    pub fn immediate_gather_into_root<'a, T, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        let size = self.world.size() as usize;
        assert_eq!(
            send.len() * size,
            recv.len(),
            "immediate_gather_into_root: the receive buffer must hold every rank's block"
        );
        let n = send.len() as mpi::Count;
        let (counts, displs) = (
            vec![n; size],
            (0..size as mpi::Count).map(|r| r * n).collect(),
        );
        self.igatherv(scope, self.rank, send, Some((recv, counts, displs)), true)
    }

    /// Contributes `send` to a Gather at `root` (rsmpi: `Root::immediate_gather_into`).
    pub fn immediate_gather_into<'a, T, S>(
        &mut self,
        scope: S,
        root: i32,
        send: &'a [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        assert_ne!(
            root, self.rank,
            "immediate_gather_into is for non-root ranks"
        );
        self.igatherv(scope, root, send, None, true)
    }

    /// Starts a Gatherv at this rank, the root: rank r's `send` lands in
    /// `recv[displs[r]..][..counts[r]]` (in elements; rsmpi:
    /// `Root::immediate_gather_varcount_into_root`).
    pub fn immediate_gather_varcount_into_root<'a, T, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        recv: &'a mut [T],
        counts: &[mpi::Count],
        displs: &[mpi::Count],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        let size = self.world.size() as usize;
        assert!(
            counts.len() == size && displs.len() == size,
            "immediate_gather_varcount_into_root: one count and one displacement per rank"
        );
        let recv = Some((recv, counts.to_vec(), displs.to_vec()));
        self.igatherv(scope, self.rank, send, recv, false)
    }

    /// Contributes `send` to a Gatherv at `root` (rsmpi:
    /// `Root::immediate_gather_varcount_into`).
    pub fn immediate_gather_varcount_into<'a, T, S>(
        &mut self,
        scope: S,
        root: i32,
        send: &'a [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        assert_ne!(
            root, self.rank,
            "immediate_gather_varcount_into is for non-root ranks"
        );
        self.igatherv(scope, root, send, None, false)
    }

    /// Starts a Scatter from this rank, the root: rank r receives
    /// `send[r * recv.len()..][..recv.len()]` (rsmpi: `Root::immediate_scatter_into_root`).
    /// The direct form: the root sends every rank its block straight.
    pub fn immediate_scatter_into_root<'a, T, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        let size = self.world.size() as usize;
        assert_eq!(
            recv.len() * size,
            send.len(),
            "immediate_scatter_into_root: the send buffer must hold every rank's block"
        );
        let n = recv.len() as mpi::Count;
        let (counts, displs) = (
            vec![n; size],
            (0..size as mpi::Count).map(|r| r * n).collect(),
        );
        self.iscatterv(scope, self.rank, Some((send, counts, displs)), recv, true)
    }

    /// Receives this rank's block of a Scatter from `root` (rsmpi:
    /// `Root::immediate_scatter_into`).
    pub fn immediate_scatter_into<'a, T, S>(
        &mut self,
        scope: S,
        root: i32,
        recv: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        assert_ne!(
            root, self.rank,
            "immediate_scatter_into is for non-root ranks"
        );
        self.iscatterv(scope, root, None, recv, true)
    }

    /// Starts a Scatterv from this rank, the root: rank r receives
    /// `send[displs[r]..][..counts[r]]` (in elements; rsmpi:
    /// `Root::immediate_scatter_varcount_into_root`).
    pub fn immediate_scatter_varcount_into_root<'a, T, S>(
        &mut self,
        scope: S,
        send: &'a [T],
        counts: &[mpi::Count],
        displs: &[mpi::Count],
        recv: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        let size = self.world.size() as usize;
        assert!(
            counts.len() == size && displs.len() == size,
            "immediate_scatter_varcount_into_root: one count and one displacement per rank"
        );
        let send = Some((send, counts.to_vec(), displs.to_vec()));
        self.iscatterv(scope, self.rank, send, recv, false)
    }

    /// Receives this rank's block of a Scatterv from `root` (rsmpi:
    /// `Root::immediate_scatter_varcount_into`).
    pub fn immediate_scatter_varcount_into<'a, T, S>(
        &mut self,
        scope: S,
        root: i32,
        recv: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        assert_ne!(
            root, self.rank,
            "immediate_scatter_varcount_into is for non-root ranks"
        );
        self.iscatterv(scope, root, None, recv, false)
    }

    /// Igather(v) on topo-run's path where the type is plain and the context
    /// hierarchical, else MPI's `MPI_Igatherv`. `recv` at the root: its buffer, counts and
    /// displacements; `same`: a Gather's (every block alike).
    fn igatherv<'a, T, S>(
        &mut self,
        scope: S,
        root: i32,
        send: &'a [T],
        recv: Option<(&'a mut [T], Vec<mpi::Count>, Vec<mpi::Count>)>,
        same: bool,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        let mine = std::mem::size_of_val(send);
        let at = match &recv {
            Some((b, c, d)) => super::blocking::byte_ranges::<T>(c, d)
                .filter(|at| fits(at, std::mem::size_of_val(*b), root, mine)),
            None => Some(Vec::new()),
        };
        if plain::is_plain::<T>()
            && self.is_hierarchical()
            && let Some(at) = at
        {
            let same = same.then_some(mine);
            let recv = recv.map(|(b, _, _)| (plain::bytes_mut(b), &at[..]));
            return self.sched_gather_v(scope, root, Some(plain::bytes(send)), recv, same);
        }
        self.start_native(scope, None, |r| {
            let (buf, counts) = match recv {
                Some((b, c, d)) => (Some(r.lend_mut(b)), Some([c, d])),
                None => (None, None),
            };
            Native::gather_v(r.lend(send), buf, counts, root)
        })
    }

    /// Iscatter(v), as [`Topo::igatherv`]: `send` at the root, its buffer, counts and
    /// displacements.
    fn iscatterv<'a, T, S>(
        &mut self,
        scope: S,
        root: i32,
        send: Option<(&'a [T], Vec<mpi::Count>, Vec<mpi::Count>)>,
        recv: &'a mut [T],
        same: bool,
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        let mine = std::mem::size_of_val(recv);
        let at = match &send {
            Some((b, c, d)) => super::blocking::byte_ranges::<T>(c, d)
                .filter(|at| fits(at, std::mem::size_of_val(*b), root, mine)),
            None => Some(Vec::new()),
        };
        if plain::is_plain::<T>()
            && self.is_hierarchical()
            && let Some(at) = at
        {
            let same = same.then_some(mine);
            let send = send.map(|(b, _, _)| (plain::bytes(b), &at[..]));
            return self.sched_scatter_v(scope, root, send, Some(plain::bytes_mut(recv)), same);
        }
        self.start_native(scope, None, |r| {
            let (buf, counts) = match send {
                Some((b, c, d)) => (Some(r.lend(b)), Some([c, d])),
                None => (None, None),
            };
            Native::scatter_v(buf, counts, r.lend_mut(recv), root)
        })
    }

    fn ialltoall<'a, T, S>(
        &mut self,
        scope: S,
        send: Option<&'a [T]>,
        recv: &'a mut [T],
    ) -> Request<'a, S>
    where
        T: Equivalence + Copy + 'static,
        S: Scope<'a>,
    {
        if plain::is_plain::<T>() && self.is_hierarchical() {
            let send = send.map(plain::bytes);
            return self.sched_all_to_all(scope, send, plain::bytes_mut(recv));
        }
        let size = self.world.size() as usize;
        self.start_native(scope, None, |r| {
            Native::all_to_all(send.map(|s| r.lend(s)), r.lend_mut(recv), size)
        })
    }

    /// Starts a barrier (rsmpi: `Communicator::immediate_barrier`).
    pub fn immediate_barrier(&mut self) -> Request<'static> {
        if self.is_hierarchical() {
            return self.sched_barrier();
        }
        self.start_native(StaticScope, None, |_| Native::barrier())
    }
}

impl Topo {
    /// A handle that advances this context's nonblocking collectives from a progress hook.
    pub fn progress_handle(&self) -> Progress {
        Progress(Arc::clone(&self.core), PhantomData)
    }

    /// Starts a broadcast of `buf` from `root`. The byte-level entry points take buffers
    /// lent for good: the PMPI library makes them from the C caller's pointers, which MPI
    /// lets the collective use until its request completes.
    pub fn raw_immediate_broadcast(
        &mut self,
        root: i32,
        buf: &'static mut [u8],
    ) -> Option<RawRequest> {
        if !self.is_hierarchical() {
            return None;
        }
        Some(RawRequest(self.sched_bcast(StaticScope, root, buf)))
    }

    /// Starts a reduction with `op` into `recv` at `root`. `send` is `None` in place (the
    /// root's contribution is in `recv`); `recv` is `None` on the other ranks.
    pub fn raw_immediate_reduce(
        &mut self,
        root: i32,
        send: Option<&'static [u8]>,
        recv: Option<&'static mut [u8]>,
        op: MpiCombine,
    ) -> Option<RawRequest> {
        if !self.is_hierarchical() {
            return None;
        }
        let r = self.sched_reduce(StaticScope, root, send, recv, Box::new(op), None);
        Some(RawRequest(r))
    }

    /// Starts a Scan (`exclusive` false) or Exscan with `op` into `recv`; `send` is `None`
    /// in place, `recv` is `None` at Exscan's rank 0 only (not written there).
    pub fn raw_immediate_scan(
        &mut self,
        send: Option<&'static [u8]>,
        recv: Option<&'static mut [u8]>,
        op: MpiCombine,
        exclusive: bool,
    ) -> Option<RawRequest> {
        let fits = super::raw::scan_fits(send, recv.as_deref(), exclusive, self.world.rank());
        if !fits || !self.is_hierarchical() {
            return None;
        }
        let r = self.sched_scan(StaticScope, send, recv, Box::new(op), None, exclusive);
        Some(RawRequest(r))
    }

    /// Starts an Alltoall (this rank's block for rank r at `send[r * len..]`, `len =
    /// recv.len() / size`; `send` is `None` in place, the blocks in `recv`). `None`
    /// (nothing done) where the collectives go to MPI, or for buffers of the wrong length.
    pub fn raw_immediate_all_to_all(
        &mut self,
        send: Option<&'static [u8]>,
        recv: &'static mut [u8],
    ) -> Option<RawRequest> {
        let size = self.world.size() as usize;
        if !recv.len().is_multiple_of(size)
            || send.is_some_and(|s| s.len() != recv.len())
            || !self.is_hierarchical()
        {
            return None;
        }
        Some(RawRequest(self.sched_all_to_all(StaticScope, send, recv)))
    }

    /// Starts an Alltoallv: this rank's block for rank r is `send.0[send.1[r]]` (`send` is
    /// `None` in place: the blocks are `recv`'s, at `recv_at`), rank r's block for this rank
    /// lands in `recv[recv_at[r]]`. `None` (nothing done) where the collectives go to MPI, for
    /// ranges that pass their buffer's end, receive ranges that overlap, or a rank's own two
    /// ranges of different lengths.
    pub fn raw_immediate_all_to_all_v(
        &mut self,
        send: Option<(&'static [u8], &[std::ops::Range<usize>])>,
        recv: &'static mut [u8],
        recv_at: &[std::ops::Range<usize>],
    ) -> Option<RawRequest> {
        let me = self.rank as usize;
        let (send_at, recv_at) = super::raw::v_ranges(
            self.world.size() as usize,
            me,
            send.map(|(b, at)| (b.len(), at)),
            recv.len(),
            recv_at,
        )?;
        if !self.is_hierarchical() {
            return None;
        }
        let send = send.map(|(b, _)| b).zip(send_at.as_deref());
        Some(RawRequest(self.sched_all_to_all_v(
            StaticScope,
            send,
            recv,
            &recv_at,
        )))
    }

    /// Starts an Allgatherv: rank r's block lands at `recv[at[r]]` on every rank; `send` is
    /// this rank's block, or `None` in place (at `recv[at[rank]]`). `None` (nothing done)
    /// where the collectives go to MPI, for ranges that pass `recv`'s end or overlap, or a
    /// `send` of another length than this rank's range.
    pub fn raw_immediate_all_gather_v(
        &mut self,
        send: Option<&'static [u8]>,
        recv: &'static mut [u8],
        at: &[std::ops::Range<usize>],
    ) -> Option<RawRequest> {
        let at = super::raw::all_gather_v_ranges(
            self.world.size() as usize,
            self.rank as usize,
            send.map(<[u8]>::len),
            recv.len(),
            at,
        )?;
        if !self.is_hierarchical() {
            return None;
        }
        Some(RawRequest(self.sched_all_gather_v(
            StaticScope,
            send,
            recv,
            &at,
        )))
    }

    /// Starts a Gatherv to `root` (the direct form: every rank's block straight to the
    /// root): rank r's block lands at `recv.0[recv.1[r]]` at the root. `send` is this rank's
    /// block, or `None` at the root in place; `recv` is `Some` at the root only. `same`:
    /// every block has this length (a Gather). `None` (nothing done) where the collectives
    /// go to MPI, or where the root's arguments are wrong (as [`Topo::raw_gather_v`]'s).
    pub fn raw_immediate_gather_v(
        &mut self,
        root: i32,
        send: Option<&'static [u8]>,
        recv: Option<(&'static mut [u8], &[std::ops::Range<usize>])>,
        same: Option<usize>,
    ) -> Option<RawRequest> {
        let size = self.world.size() as usize;
        let buf = recv.as_ref().map(|(b, at)| (b.len(), *at));
        let at = super::raw::rooted_v(size, root, self.rank, buf, send.map(<[u8]>::len))?;
        if !self.is_hierarchical() {
            return None;
        }
        let recv = recv.zip(at.as_deref()).map(|((b, _), at)| (b, at));
        let r = self.sched_gather_v(StaticScope, root, send, recv, same);
        Some(RawRequest(r))
    }

    /// Starts a Scatterv from `root` (the direct form: the root sends every rank its block
    /// straight): rank r receives `send.0[send.1[r]]` into `recv`. `send` is `Some` at the
    /// root only; `recv` is `None` at the root in place. `same` as for
    /// [`Topo::raw_immediate_gather_v`]. `None` (nothing done) where the collectives go to
    /// MPI, or where the root's arguments are wrong (as [`Topo::raw_scatter_v`]'s).
    pub fn raw_immediate_scatter_v(
        &mut self,
        root: i32,
        send: Option<(&'static [u8], &[std::ops::Range<usize>])>,
        recv: Option<&'static mut [u8]>,
        same: Option<usize>,
    ) -> Option<RawRequest> {
        let size = self.world.size() as usize;
        let buf = send.map(|(b, at)| (b.len(), at));
        let own = recv.as_ref().map(|b| b.len());
        let at = super::raw::rooted_v(size, root, self.rank, buf, own)?;
        if !self.is_hierarchical() {
            return None;
        }
        let send = send.zip(at.as_deref()).map(|((b, _), at)| (b, at));
        let r = self.sched_scatter_v(StaticScope, root, send, recv, same);
        Some(RawRequest(r))
    }

    /// Starts a reduction with `op` into every rank's `recv`; `send` is `None` in place.
    pub fn raw_immediate_all_reduce(
        &mut self,
        send: Option<&'static [u8]>,
        recv: &'static mut [u8],
        op: MpiCombine,
    ) -> Option<RawRequest> {
        if !self.is_hierarchical() {
            return None;
        }
        let r = self.sched_all_reduce(StaticScope, send, recv, Box::new(op), None);
        Some(RawRequest(r))
    }

    /// Starts a Reduce_scatter_block with `op` (see [`Topo::raw_reduce_scatter_block`] for
    /// the buffers). `None` (nothing done) where the collectives go to MPI, or for buffers
    /// of the wrong length.
    pub fn raw_immediate_reduce_scatter_block(
        &mut self,
        send: Option<&'static [u8]>,
        recv: &'static mut [u8],
        op: MpiCombine,
    ) -> Option<RawRequest> {
        let size = self.world.size() as usize;
        let block = super::raw::block_of(size, send.map(<[u8]>::len), recv.len())?;
        if !self.is_hierarchical() {
            return None;
        }
        let (total, mine) = (block * size, block * self.rank as usize);
        let op = Box::new(op);
        let mine = mine..mine + block;
        let blocks = crate::subtrees::Blocks::Same(block);
        let r = self.sched_reduce_scatter(StaticScope, send, recv, total, mine, op, None, blocks);
        Some(RawRequest(r))
    }

    /// Starts a Reduce_scatter with `op`, block r being `lens[r]` bytes (see
    /// [`Topo::raw_reduce_scatter`] for the buffers). `None` (nothing done) where the
    /// collectives go to MPI, or for buffers of the wrong length.
    pub fn raw_immediate_reduce_scatter(
        &mut self,
        send: Option<&'static [u8]>,
        recv: &'static mut [u8],
        lens: &[usize],
        op: MpiCombine,
    ) -> Option<RawRequest> {
        let size = self.world.size() as usize;
        let send_len = send.map(<[u8]>::len);
        let (total, mine) =
            super::raw::reduce_scatter_fits(size, self.rank, lens, send_len, recv.len())?;
        if !self.is_hierarchical() {
            return None;
        }
        let op = Box::new(op);
        let ends = crate::gatherv::ends_of(lens);
        let blocks = crate::subtrees::Blocks::Ends(&ends);
        let r = self.sched_reduce_scatter(StaticScope, send, recv, total, mine, op, None, blocks);
        Some(RawRequest(r))
    }

    /// Starts an Allgather into `recv` (rank r's block at `r * len`, `len = recv.len() /
    /// size`); `send` is `None` when this rank's block is in place. `None` (nothing done)
    /// where the blocking call would not run the remapped recursive doubling: the caller
    /// hands the call to MPI.
    pub fn raw_immediate_all_gather(
        &mut self,
        send: Option<&'static [u8]>,
        recv: &'static mut [u8],
    ) -> Option<RawRequest> {
        let size = self.world.size() as usize;
        if !recv.len().is_multiple_of(size) || send.is_some_and(|b| b.len() * size != recv.len()) {
            return None;
        }
        let (alg, _) = self.exchange_for(recv.len())?;
        Some(RawRequest(self.sched_all_gather(
            StaticScope,
            alg,
            send,
            recv,
        )))
    }

    /// Starts a barrier.
    pub fn raw_immediate_barrier(&mut self) -> Option<RawRequest> {
        self.is_hierarchical()
            .then(|| RawRequest(self.sched_barrier()))
    }
}

/// Whether the root's block ranges `at` of a Gather(v) or Scatter(v) lie in its buffer of
/// `len` bytes and its own block has its `mine` bytes: else the call goes to MPI, which
/// reports the error.
fn fits(at: &[std::ops::Range<usize>], len: usize, root: i32, mine: usize) -> bool {
    at.iter().all(|r| r.is_empty() || r.end <= len) && at[root as usize].len() == mine
}
