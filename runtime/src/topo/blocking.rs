//! The blocking collectives in rsmpi's names and types: a plain type goes to the
//! byte-level entry points (`raw.rs`), anything else to MPI's own collective.

use super::*;
use mpi::Count;
use mpi::datatype::{Partition, PartitionMut};

impl Topo {
    /// Gathers every rank's `send` into `recv` on every rank, rank r's at
    /// `recv[r * send.len()..]` (rsmpi: `CommunicatorCollectives::all_gather_into`).
    /// `recv` holds `size * send.len()` elements.
    pub fn all_gather_into<T: Equivalence + Copy + 'static>(&mut self, send: &[T], recv: &mut [T]) {
        // `raw_all_gather` refuses a `recv` of the wrong length, which MPI then reports.
        if plain::is_plain::<T>()
            && self.raw_all_gather(Some(plain::bytes(send)), plain::bytes_mut(recv))
        {
            return;
        }
        drop(self.quiesced());
        self.world.all_gather_into(send, recv)
    }

    /// Allgather in place: `buf` holds `size` blocks and this rank's is already at its
    /// place, `buf[rank * len..(rank + 1) * len]` (as `MPI_IN_PLACE` asks); on return it
    /// holds every rank's.
    pub fn all_gather_in_place<T: Equivalence + Copy + 'static>(&mut self, buf: &mut [T]) {
        if plain::is_plain::<T>() && self.raw_all_gather(None, plain::bytes_mut(buf)) {
            return;
        }
        drop(self.quiesced());
        // rsmpi has no in-place Allgather: gather a copy of this rank's block.
        let size = self.world.size() as usize;
        let len = buf.len() / size;
        let at = self.world.rank() as usize * len;
        let own = buf[at..at + len].to_vec();
        self.world.all_gather_into(&own[..], buf)
    }

    /// Broadcasts `buf` from `root` (rsmpi: `Root::broadcast_into`).
    pub fn broadcast_into<T: Equivalence + Copy + 'static>(&mut self, root: i32, buf: &mut [T]) {
        if plain::is_plain::<T>() && self.raw_broadcast(root, plain::bytes_mut(buf)) {
            return;
        }
        drop(self.quiesced());
        self.world.process_at_rank(root).broadcast_into(buf)
    }

    /// Reduces everyone's `send` into `recv` at this rank, the root
    /// (rsmpi: `Root::reduce_into_root`).
    pub fn reduce_into_root<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) {
        assert_eq!(
            send.len(),
            recv.len(),
            "reduce_into_root: send and receive lengths differ"
        );
        self.reduce_impl(self.rank, Some(send), Some(recv), op);
    }

    /// Like [`Topo::reduce_into_root`], with the root's contribution in `buf` (in place).
    pub fn reduce_into_root_in_place<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        buf: &mut [T],
        op: O,
    ) {
        self.reduce_impl(self.rank, None, Some(buf), op);
    }

    /// Contributes `send` to a reduction whose result goes to `root`
    /// (rsmpi: `Root::reduce_into`).
    pub fn reduce_into<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        root: i32,
        send: &[T],
        op: O,
    ) {
        assert_ne!(
            root, self.rank,
            "reduce_into is for non-root ranks; the root calls reduce_into_root"
        );
        self.reduce_impl(root, Some(send), None, op);
    }

    pub(super) fn reduce_impl<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        root: i32,
        send: Option<&[T]>,
        mut recv: Option<&mut [T]>,
        op: O,
    ) {
        if plain::is_plain::<T>() && plain::commutes(&op) {
            let combine = MpiCombine::reuse::<T, O>(&op, &mut self.combine);
            let r = recv.as_deref_mut().map(plain::bytes_mut);
            if self.raw_reduce(root, send.map(plain::bytes), r, &combine) {
                return;
            }
        }
        drop(self.quiesced());
        let p = self.world.process_at_rank(root);
        match (send, recv) {
            (Some(s), Some(r)) => p.reduce_into_root(s, r, op),
            (None, Some(r)) => {
                let s = r.to_vec();
                p.reduce_into_root(&s[..], r, op)
            }
            (Some(s), None) => p.reduce_into(s, op),
            (None, None) => {}
        }
    }

    /// Reduces everyone's `send` into every rank's `recv` (rsmpi:
    /// `CommunicatorCollectives::all_reduce_into`).
    pub fn all_reduce_into<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) {
        assert_eq!(
            send.len(),
            recv.len(),
            "all_reduce_into: send and receive lengths differ"
        );
        self.all_reduce_impl(Some(send), recv, op);
    }

    /// Like [`Topo::all_reduce_into`], with this rank's contribution in `buf` (in place).
    pub fn all_reduce_in_place<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        buf: &mut [T],
        op: O,
    ) {
        self.all_reduce_impl(None, buf, op);
    }

    pub(super) fn all_reduce_impl<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        send: Option<&[T]>,
        recv: &mut [T],
        op: O,
    ) {
        if plain::is_plain::<T>() && plain::commutes(&op) {
            let combine = MpiCombine::reuse::<T, O>(&op, &mut self.combine);
            if self.raw_all_reduce(send.map(plain::bytes), plain::bytes_mut(recv), &combine) {
                return;
            }
        }
        drop(self.quiesced());
        match send {
            Some(s) => self.world.all_reduce_into(s, recv, op),
            None => {
                let s = recv.to_vec();
                self.world.all_reduce_into(&s[..], recv, op)
            }
        }
    }

    /// Gathers everyone's `send` into `recv` at this rank, the root: rank r's lands at
    /// `recv[r * send.len()..]` (rsmpi: `Root::gather_into_root`).
    pub fn gather_into_root<T: Equivalence + Copy + 'static>(
        &mut self,
        send: &[T],
        recv: &mut [T],
    ) {
        assert_eq!(
            send.len() * self.world.size() as usize,
            recv.len(),
            "gather_into_root: the receive buffer must hold every rank's block"
        );
        let len = std::mem::size_of_val(send);
        if plain::is_plain::<T>()
            && self.raw_gather(
                self.rank,
                Some(plain::bytes(send)),
                Some(plain::bytes_mut(recv)),
                len,
            )
        {
            return;
        }
        drop(self.quiesced());
        self.world
            .process_at_rank(self.rank)
            .gather_into_root(send, recv)
    }

    /// Like [`Topo::gather_into_root`], with the root's block at its place in `buf`
    /// already (in place).
    pub fn gather_into_root_in_place<T: Equivalence + Copy + 'static>(&mut self, buf: &mut [T]) {
        let size = self.world.size() as usize;
        assert!(
            buf.len().is_multiple_of(size),
            "gather_into_root_in_place: the buffer must hold every rank's block"
        );
        let len = std::mem::size_of_val(buf) / size;
        if plain::is_plain::<T>()
            && self.raw_gather(self.rank, None, Some(plain::bytes_mut(buf)), len)
        {
            return;
        }
        drop(self.quiesced());
        let n = buf.len() / size;
        let at = self.rank as usize * n;
        let own = buf[at..at + n].to_vec();
        self.world
            .process_at_rank(self.rank)
            .gather_into_root(&own[..], buf)
    }

    /// Contributes `send` to a Gather at `root` (rsmpi: `Root::gather_into`).
    pub fn gather_into<T: Equivalence + Copy + 'static>(&mut self, root: i32, send: &[T]) {
        assert_ne!(
            root, self.rank,
            "gather_into is for non-root ranks; the root calls gather_into_root"
        );
        let len = std::mem::size_of_val(send);
        if plain::is_plain::<T>() && self.raw_gather(root, Some(plain::bytes(send)), None, len) {
            return;
        }
        drop(self.quiesced());
        self.world.process_at_rank(root).gather_into(send)
    }

    /// Gatherv at this rank, the root: rank r's `send` lands in
    /// `recv[displs[r]..][..counts[r]]` (counts and displacements in elements; rsmpi:
    /// `Root::gather_varcount_into_root` with a `PartitionMut`).
    pub fn gather_varcount_into_root<T: Equivalence + Copy + 'static>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        counts: &[Count],
        displs: &[Count],
    ) {
        let size = self.world.size() as usize;
        assert!(
            counts.len() == size && displs.len() == size,
            "gather_varcount_into_root: one count and one displacement per rank"
        );
        if plain::is_plain::<T>()
            && let Some(at) = byte_ranges::<T>(counts, displs)
            && self.raw_gather_v(
                self.rank,
                Some(plain::bytes(send)),
                Some((plain::bytes_mut(recv), &at)),
            )
        {
            return;
        }
        drop(self.quiesced());
        let mut recv = PartitionMut::new(recv, counts, displs);
        self.world
            .process_at_rank(self.rank)
            .gather_varcount_into_root(send, &mut recv)
    }

    /// Contributes `send` to a Gatherv at `root` (rsmpi: `Root::gather_varcount_into`).
    pub fn gather_varcount_into<T: Equivalence + Copy + 'static>(&mut self, root: i32, send: &[T]) {
        assert_ne!(
            root, self.rank,
            "gather_varcount_into is for non-root ranks; the root calls gather_varcount_into_root"
        );
        if plain::is_plain::<T>() && self.raw_gather_v(root, Some(plain::bytes(send)), None) {
            return;
        }
        drop(self.quiesced());
        self.world.process_at_rank(root).gather_varcount_into(send)
    }

    /// Scatterv from this rank, the root: rank r receives `send[displs[r]..][..counts[r]]`
    /// into its `recv` (counts and displacements in elements; rsmpi:
    /// `Root::scatter_varcount_into_root` with a `Partition`).
    pub fn scatter_varcount_into_root<T: Equivalence + Copy + 'static>(
        &mut self,
        send: &[T],
        counts: &[Count],
        displs: &[Count],
        recv: &mut [T],
    ) {
        let size = self.world.size() as usize;
        assert!(
            counts.len() == size && displs.len() == size,
            "scatter_varcount_into_root: one count and one displacement per rank"
        );
        if plain::is_plain::<T>()
            && let Some(at) = byte_ranges::<T>(counts, displs)
            && self.raw_scatter_v(
                self.rank,
                Some((plain::bytes(send), &at)),
                Some(plain::bytes_mut(recv)),
            )
        {
            return;
        }
        drop(self.quiesced());
        let send = Partition::new(send, counts, displs);
        self.world
            .process_at_rank(self.rank)
            .scatter_varcount_into_root(&send, recv)
    }

    /// Receives this rank's block of a Scatterv from `root` into `recv` (rsmpi:
    /// `Root::scatter_varcount_into`).
    pub fn scatter_varcount_into<T: Equivalence + Copy + 'static>(
        &mut self,
        root: i32,
        recv: &mut [T],
    ) {
        assert_ne!(
            root, self.rank,
            "scatter_varcount_into is for non-root ranks; the root calls \
             scatter_varcount_into_root"
        );
        if plain::is_plain::<T>() && self.raw_scatter_v(root, None, Some(plain::bytes_mut(recv))) {
            return;
        }
        drop(self.quiesced());
        self.world.process_at_rank(root).scatter_varcount_into(recv)
    }

    /// Alltoall: this rank's `send` holds a block for every rank (rank r's at
    /// `send[r * n..][..n]`, `n = send.len() / size`), and `recv` receives rank r's block
    /// for this rank at `recv[r * n..]` (rsmpi: `CommunicatorCollectives::all_to_all_into`).
    pub fn all_to_all_into<T: Equivalence + Copy + 'static>(&mut self, send: &[T], recv: &mut [T]) {
        let size = self.world.size() as usize;
        assert!(
            send.len() == recv.len() && send.len().is_multiple_of(size),
            "all_to_all_into: both buffers must hold one block for every rank"
        );
        if plain::is_plain::<T>()
            && self.raw_all_to_all(Some(plain::bytes(send)), plain::bytes_mut(recv))
        {
            return;
        }
        drop(self.quiesced());
        self.world.all_to_all_into(send, recv)
    }

    /// Like [`Topo::all_to_all_into`], the blocks to send in `buf`, which receives the
    /// blocks from every rank (in place).
    pub fn all_to_all_in_place<T: Equivalence + Copy + 'static>(&mut self, buf: &mut [T]) {
        assert!(
            buf.len().is_multiple_of(self.world.size() as usize),
            "all_to_all_in_place: the buffer must hold one block for every rank"
        );
        if plain::is_plain::<T>() && self.raw_all_to_all(None, plain::bytes_mut(buf)) {
            return;
        }
        drop(self.quiesced());
        let send = buf.to_vec();
        self.world.all_to_all_into(&send[..], buf)
    }

    /// Allgatherv: every rank's `send` lands in `recv[displs[r]..][..counts[r]]` on every
    /// rank (counts and displacements in elements; rsmpi:
    /// `CommunicatorCollectives::all_gather_varcount_into` with a `PartitionMut`).
    pub fn all_gather_varcount_into<T: Equivalence + Copy + 'static>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        counts: &[Count],
        displs: &[Count],
    ) {
        let size = self.world.size() as usize;
        assert!(
            counts.len() == size && displs.len() == size,
            "all_gather_varcount_into: one count and one displacement per rank"
        );
        if plain::is_plain::<T>()
            && let Some(at) = byte_ranges::<T>(counts, displs)
            && self.raw_all_gather_v(Some(plain::bytes(send)), plain::bytes_mut(recv), &at)
        {
            return;
        }
        drop(self.quiesced());
        let mut recv = PartitionMut::new(recv, counts, displs);
        self.world.all_gather_varcount_into(send, &mut recv)
    }

    /// Alltoallv: this rank sends `send[send_displs[r]..][..send_counts[r]]` to rank r and
    /// receives rank r's block into `recv[recv_displs[r]..][..recv_counts[r]]` (counts and
    /// displacements in elements; rsmpi: `CommunicatorCollectives::all_to_all_varcount_into`
    /// with a `Partition` of each buffer).
    #[allow(clippy::too_many_arguments)]
    pub fn all_to_all_varcount_into<T: Equivalence + Copy + 'static>(
        &mut self,
        send: &[T],
        send_counts: &[Count],
        send_displs: &[Count],
        recv: &mut [T],
        recv_counts: &[Count],
        recv_displs: &[Count],
    ) {
        let size = self.world.size() as usize;
        assert!(
            [send_counts, send_displs, recv_counts, recv_displs]
                .iter()
                .all(|v| v.len() == size),
            "all_to_all_varcount_into: one count and one displacement per rank on each side"
        );
        if plain::is_plain::<T>()
            && let Some(sat) = byte_ranges::<T>(send_counts, send_displs)
            && let Some(rat) = byte_ranges::<T>(recv_counts, recv_displs)
            && self.raw_all_to_all_v(
                Some((plain::bytes(send), &sat)),
                plain::bytes_mut(recv),
                &rat,
            )
        {
            return;
        }
        drop(self.quiesced());
        let send = Partition::new(send, send_counts, send_displs);
        let mut recv = PartitionMut::new(recv, recv_counts, recv_displs);
        self.world.all_to_all_varcount_into(&send, &mut recv)
    }

    /// Scatters `send` from this rank, the root: rank r receives
    /// `send[r * recv.len()..][..recv.len()]` into its `recv` (rsmpi:
    /// `Root::scatter_into_root`).
    pub fn scatter_into_root<T: Equivalence + Copy + 'static>(
        &mut self,
        send: &[T],
        recv: &mut [T],
    ) {
        assert_eq!(
            recv.len() * self.world.size() as usize,
            send.len(),
            "scatter_into_root: the send buffer must hold every rank's block"
        );
        let len = std::mem::size_of_val(recv);
        if plain::is_plain::<T>()
            && self.raw_scatter(
                self.rank,
                Some(plain::bytes(send)),
                Some(plain::bytes_mut(recv)),
                len,
            )
        {
            return;
        }
        drop(self.quiesced());
        self.world
            .process_at_rank(self.rank)
            .scatter_into_root(send, recv)
    }

    /// Like [`Topo::scatter_into_root`], the root keeping its own block in `send` (in
    /// place).
    pub fn scatter_into_root_in_place<T: Equivalence + Copy + 'static>(&mut self, send: &[T]) {
        let size = self.world.size() as usize;
        assert!(
            send.len().is_multiple_of(size),
            "scatter_into_root_in_place: the send buffer must hold every rank's block"
        );
        let len = std::mem::size_of_val(send) / size;
        if plain::is_plain::<T>()
            && self.raw_scatter(self.rank, Some(plain::bytes(send)), None, len)
        {
            return;
        }
        drop(self.quiesced());
        let mut own = send[..send.len() / size].to_vec();
        self.world
            .process_at_rank(self.rank)
            .scatter_into_root(send, &mut own[..])
    }

    /// Receives this rank's block of a Scatter from `root` into `recv` (rsmpi:
    /// `Root::scatter_into`).
    pub fn scatter_into<T: Equivalence + Copy + 'static>(&mut self, root: i32, recv: &mut [T]) {
        assert_ne!(
            root, self.rank,
            "scatter_into is for non-root ranks; the root calls scatter_into_root"
        );
        let len = std::mem::size_of_val(recv);
        if plain::is_plain::<T>() && self.raw_scatter(root, None, Some(plain::bytes_mut(recv)), len)
        {
            return;
        }
        drop(self.quiesced());
        self.world.process_at_rank(root).scatter_into(recv)
    }

    /// Reduces the `send` of ranks `0..=rank` into `recv` (rsmpi:
    /// `CommunicatorCollectives::scan_into`).
    pub fn scan_into<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) {
        assert_eq!(
            send.len(),
            recv.len(),
            "scan_into: send and receive lengths differ"
        );
        self.scan_impl(Some(send), Some(recv), op, false);
    }

    /// Like [`Topo::scan_into`], with this rank's contribution in `buf` (in place).
    pub fn scan_in_place<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        buf: &mut [T],
        op: O,
    ) {
        self.scan_impl(None, Some(buf), op, false);
    }

    /// Reduces the `send` of ranks `0..rank` into `recv` (rsmpi:
    /// `CommunicatorCollectives::exclusive_scan_into`). Rank 0's `recv` is left as it was
    /// (MPI leaves it undefined).
    pub fn exclusive_scan_into<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) {
        assert_eq!(
            send.len(),
            recv.len(),
            "exclusive_scan_into: send and receive lengths differ"
        );
        self.scan_impl(Some(send), Some(recv), op, true);
    }

    /// Like [`Topo::exclusive_scan_into`], with this rank's contribution in `buf` (in
    /// place).
    pub fn exclusive_scan_in_place<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        buf: &mut [T],
        op: O,
    ) {
        self.scan_impl(None, Some(buf), op, true);
    }

    fn scan_impl<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        send: Option<&[T]>,
        mut recv: Option<&mut [T]>,
        op: O,
        exclusive: bool,
    ) {
        if plain::is_plain::<T>() && plain::commutes(&op) {
            let combine = MpiCombine::reuse::<T, O>(&op, &mut self.combine);
            let r = recv.as_deref_mut().map(plain::bytes_mut);
            if self.raw_scan(send.map(plain::bytes), r, &combine, exclusive) {
                return;
            }
        }
        drop(self.quiesced());
        let Some(recv) = recv else {
            return;
        };
        let own;
        let send = match send {
            Some(s) => s,
            None => {
                own = recv.to_vec();
                &own[..]
            }
        };
        if exclusive {
            self.world.exclusive_scan_into(send, recv, op)
        } else {
            self.world.scan_into(send, recv, op)
        }
    }

    /// Reduces every rank's `send` (`size * recv.len()` elements) and leaves block r of the
    /// result at rank r, in `recv` (rsmpi:
    /// `CommunicatorCollectives::reduce_scatter_block_into`).
    pub fn reduce_scatter_block_into<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) {
        assert_eq!(
            send.len(),
            recv.len() * self.world.size() as usize,
            "reduce_scatter_block_into: the send buffer must hold size x recv.len() elements"
        );
        self.reduce_scatter_block_impl(Some(send), recv, op);
    }

    /// Like [`Topo::reduce_scatter_block_into`], with this rank's contribution in `buf`
    /// (`size` blocks); its block of the result lands in the first.
    pub fn reduce_scatter_block_in_place<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        buf: &mut [T],
        op: O,
    ) {
        assert!(
            buf.len().is_multiple_of(self.world.size() as usize),
            "reduce_scatter_block_in_place: the buffer must hold size blocks"
        );
        self.reduce_scatter_block_impl(None, buf, op);
    }

    fn reduce_scatter_block_impl<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        send: Option<&[T]>,
        recv: &mut [T],
        op: O,
    ) {
        if plain::is_plain::<T>() && plain::commutes(&op) {
            let combine = MpiCombine::reuse::<T, O>(&op, &mut self.combine);
            let send = send.map(plain::bytes);
            if self.raw_reduce_scatter_block(send, plain::bytes_mut(recv), &combine) {
                return;
            }
        }
        drop(self.quiesced());
        match send {
            Some(s) => self.world.reduce_scatter_block_into(s, recv, op),
            None => {
                let s = recv.to_vec();
                let block = recv.len() / self.world.size() as usize;
                self.world
                    .reduce_scatter_block_into(&s[..], &mut recv[..block], op)
            }
        }
    }

    /// Returns once every rank has called it (rsmpi: `Communicator::barrier`).
    pub fn barrier(&mut self) {
        if !self.raw_barrier() {
            self.world.barrier();
        }
    }
}

/// The byte ranges of blocks of `counts` elements of `T` at `displs` (in elements);
/// `None` for a negative count or displacement (erroneous: MPI reports it).
pub(super) fn byte_ranges<T>(
    counts: &[Count],
    displs: &[Count],
) -> Option<Vec<std::ops::Range<usize>>> {
    let e = std::mem::size_of::<T>();
    counts
        .iter()
        .zip(displs)
        .map(|(&c, &d)| {
            let (c, d) = (usize::try_from(c).ok()? * e, usize::try_from(d).ok()? * e);
            Some(d..d + c)
        })
        .collect()
}
