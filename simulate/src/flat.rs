//! The flat algorithms MPI libraries use, over all ranks of the job as one group, as
//! programs for the simulator: what topo-run's hierarchy is compared with. Each builds
//! rank `r`'s program among `n` ranks in `O(log n)` (the ring in `O(n)` rounds), without
//! any table of the job, so that they scale to a million ranks.

use crate::program::{Program, Step};

fn send(to: u32, bytes: u64) -> Step {
    Step::Send {
        to: vec![to],
        bytes,
    }
}

fn recv(from: u32, bytes: u64, combine: bool) -> Step {
    Step::Recv {
        from,
        bytes,
        combine,
    }
}

/// Rank `r`'s lowest set bit in a binomial tree over `n` ranks rooted at 0 (the root's: the
/// power of two at or above `n`): it hears from the rank `low` below it and speaks to the
/// ranks `r + 1 .. r + low`.
fn binomial_low(r: u32, n: u32) -> u32 {
    if r == 0 {
        n.next_power_of_two()
    } else {
        1 << r.trailing_zeros()
    }
}

/// Binomial broadcast of `m` bytes from rank 0: a rank receives from the rank that
/// differs in its lowest set bit, then sends to the ranks above it, farthest first, all at
/// once.
pub fn bcast_binomial(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    let low = binomial_low(r, n);
    if r != 0 {
        p.round(vec![recv(r - low, m, false)]);
    }
    let mut children = Vec::new();
    let mut mask = low >> 1;
    while mask > 0 {
        if r + mask < n {
            children.push(r + mask);
        }
        mask >>= 1;
    }
    if !children.is_empty() {
        p.round(vec![Step::Send {
            to: children,
            bytes: m,
        }]);
    }
    p
}

/// Binomial reduce of `m` bytes to rank 0: a rank combines what its children send, nearest
/// first, then sends to its parent.
pub fn reduce_binomial(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    let low = binomial_low(r, n);
    let mut mask = 1;
    while mask < low {
        if r + mask < n {
            p.round(vec![recv(r + mask, m, true)]);
        }
        mask <<= 1;
    }
    if r != 0 {
        p.round(vec![send(r - low, m)]);
    }
    p
}

/// The largest power of two not above `n` (at least 1).
fn pof2(n: u32) -> u32 {
    1 << (31 - n.max(1).leading_zeros())
}

/// A job size that is not a power of two folds first: of the first `2 * rem` ranks, each
/// even one sends its data to the odd one above it and sits out. Returns this rank's index
/// among the `pof2` that take part, or `None`.
fn fold_in(p: &mut Program, r: u32, n: u32, m: u64) -> Option<u32> {
    let rem = n - pof2(n);
    if r < 2 * rem {
        if r.is_multiple_of(2) {
            p.round(vec![send(r + 1, m)]);
            None
        } else {
            p.round(vec![recv(r - 1, m, true)]);
            Some(r / 2)
        }
    } else {
        Some(r - rem)
    }
}

/// The rank that takes part as index `i` after [`fold_in`].
fn folded_rank(i: u32, n: u32) -> u32 {
    let rem = n - pof2(n);
    if i < rem { 2 * i + 1 } else { i + rem }
}

/// The last step of a folded job: the ranks that sat out get the result.
fn fold_out(p: &mut Program, r: u32, n: u32, m: u64) {
    let rem = n - pof2(n);
    if r < 2 * rem {
        p.round(vec![if r.is_multiple_of(2) {
            recv(r + 1, m, false)
        } else {
            send(r - 1, m)
        }]);
    }
}

/// Recursive-doubling allreduce: `log2 n` exchanges of the whole message, each combined.
pub fn allreduce_rd(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    if let Some(i) = fold_in(&mut p, r, n, m) {
        let mut mask = 1;
        while mask < pof2(n) {
            let peer = folded_rank(i ^ mask, n);
            p.round(vec![send(peer, m), recv(peer, m, true)]);
            mask <<= 1;
        }
    }
    fold_out(&mut p, r, n, m);
    p
}

/// Ring allreduce: a reduce-scatter and an allgather, each `n - 1` steps of `m / n` bytes
/// around the ring (the first `m % n` blocks one byte larger).
pub fn allreduce_ring(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    if n == 1 {
        return p;
    }
    let block = |b: u32| m / u64::from(n) + u64::from(u64::from(b) < m % u64::from(n));
    let (right, left) = ((r + 1) % n, (r + n - 1) % n);
    for step in 0..n - 1 {
        let (out, inb) = ((r + n - step) % n, (r + 2 * n - step - 1) % n);
        p.round(vec![send(right, block(out)), recv(left, block(inb), true)]);
    }
    for step in 0..n - 1 {
        let (out, inb) = ((r + 1 + n - step) % n, (r + 2 * n - step) % n);
        p.round(vec![send(right, block(out)), recv(left, block(inb), false)]);
    }
    p
}

/// Rabenseifner's allreduce: a reduce-scatter by recursive halving (exchanges of `m/2`,
/// `m/4`, ... combined), then an allgather by recursive doubling back up.
pub fn allreduce_rabenseifner(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    if let Some(i) = fold_in(&mut p, r, n, m) {
        let q = pof2(n);
        let mut sizes = Vec::new();
        let (mut mask, mut part) = (q >> 1, m);
        while mask > 0 {
            let peer = folded_rank(i ^ mask, n);
            part /= 2;
            p.round(vec![send(peer, part), recv(peer, part, true)]);
            sizes.push((peer, part));
            mask >>= 1;
        }
        for &(peer, part) in sizes.iter().rev() {
            p.round(vec![send(peer, part), recv(peer, part, false)]);
        }
    }
    fold_out(&mut p, r, n, m);
    p
}

/// Dissemination barrier: at step `k`, an empty message to the rank `2^k` on and one from
/// the rank `2^k` back.
pub fn barrier_dissemination(r: u32, n: u32) -> Program {
    let mut p = Program::default();
    let mut d = 1;
    while d < n {
        p.round(vec![send((r + d) % n, 0), recv((r + n - d) % n, 0, false)]);
        d *= 2;
    }
    p
}

/// Allgather of `m` bytes per rank by recursive doubling (`n` a power of two: at step `k`,
/// `2^k` blocks each way with the rank that differs in bit `k`), else Bruck's (at the step
/// of distance `d`, `min(d, n - d)` blocks to the rank `d` back and from the rank `d` on,
/// then a local rotation of the result).
pub fn allgather_rd(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    if n.is_power_of_two() {
        let mut d = 1;
        while d < n {
            let peer = r ^ d;
            p.round(vec![
                send(peer, m * u64::from(d)),
                recv(peer, m * u64::from(d), false),
            ]);
            d *= 2;
        }
    } else {
        let mut d = 1;
        while d < n {
            let blocks = u64::from(d.min(n - d));
            p.round(vec![
                send((r + n - d) % n, m * blocks),
                recv((r + d) % n, m * blocks, false),
            ]);
            d *= 2;
        }
        p.round(vec![Step::Local {
            bytes: m * u64::from(n),
            combine: false,
        }]);
    }
    p
}

/// Ring allgather: `n - 1` steps of one block of `m` bytes around the ring.
pub fn allgather_ring(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    for _ in 1..n {
        p.round(vec![send((r + 1) % n, m), recv((r + n - 1) % n, m, false)]);
    }
    p
}

/// The blocks a binomial tree rooted at 0 holds under rank `r`: its own and those of the
/// ranks it receives from (`r + 1 .. r + low`, cut at `n`).
fn binomial_subtree(r: u32, n: u32) -> u32 {
    let low = binomial_low(r, n);
    low.min(n - r)
}

/// Binomial gather of `m` bytes per rank to rank 0: a rank receives the blocks of its
/// children's subtrees, nearest first, then sends all it holds to its parent in one
/// message (MPICH's, and Open MPI's for small blocks).
pub fn gather_binomial(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    let low = binomial_low(r, n);
    let mut mask = 1;
    while mask < low {
        if r + mask < n {
            let blocks = binomial_subtree(r + mask, n);
            p.round(vec![recv(r + mask, m * u64::from(blocks), false)]);
        }
        mask <<= 1;
    }
    if r != 0 {
        p.round(vec![send(r - low, m * u64::from(binomial_subtree(r, n)))]);
    }
    p
}

/// Linear gather of `m` bytes per rank to rank 0: every rank sends its block straight to
/// the root, which receives them all at once (Open MPI's `basic_linear`).
pub fn gather_linear(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    if r == 0 {
        p.round((1..n).map(|q| recv(q, m, false)).collect());
    } else {
        p.round(vec![send(0, m)]);
    }
    p
}

/// Binomial scatter of `m` bytes per rank from rank 0: a rank receives the blocks of its
/// subtree from its parent, then sends each child its child's subtree, farthest first.
pub fn scatter_binomial(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    let low = binomial_low(r, n);
    if r != 0 {
        p.round(vec![recv(
            r - low,
            m * u64::from(binomial_subtree(r, n)),
            false,
        )]);
    }
    let mut mask = low >> 1;
    while mask > 0 {
        if r + mask < n {
            let blocks = binomial_subtree(r + mask, n);
            p.round(vec![send(r + mask, m * u64::from(blocks))]);
        }
        mask >>= 1;
    }
    p
}

/// Linear scatter of `m` bytes per rank from rank 0: the root sends every rank its block,
/// all at once.
pub fn scatter_linear(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    if r == 0 {
        p.round((1..n).map(|q| send(q, m)).collect());
    } else {
        p.round(vec![recv(0, m, false)]);
    }
    p
}

/// Pairwise alltoall of `m`-byte blocks: `n - 1` steps, at step `k` a block to the rank `k`
/// on and one from the rank `k` back (the form MPI libraries use for large blocks).
pub fn alltoall_pairwise(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    for k in 1..n {
        p.round(vec![send((r + k) % n, m), recv((r + n - k) % n, m, false)]);
    }
    p
}

/// Linear alltoall of `m`-byte blocks: every block sent and received at once (Open MPI's
/// `basic_linear`, MPICH's for medium blocks).
pub fn alltoall_linear(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    let mut steps: Vec<Step> = (1..n).map(|k| send((r + k) % n, m)).collect();
    steps.extend((1..n).map(|k| recv((r + n - k) % n, m, false)));
    p.round(steps);
    p
}

/// Bruck's alltoall of `m`-byte blocks (MPI libraries' for small blocks): a local
/// rotation, then at the step of distance `d = 2^k` the blocks whose index has bit `k` set
/// (about half of them) to the rank `d` on and from the rank `d` back, then a local
/// rotation back.
pub fn alltoall_bruck(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    let all = m * u64::from(n);
    p.round(vec![Step::Local {
        bytes: all,
        combine: false,
    }]);
    let mut d = 1;
    while d < n {
        // The indices in 0..n with bit `d` set: `d` in every full period of `2d`, and
        // those of the last one past its first `d`.
        let blocks = u64::from((n / (2 * d)) * d + (n % (2 * d)).saturating_sub(d));
        p.round(vec![
            send((r + d) % n, m * blocks),
            recv((r + n - d) % n, m * blocks, false),
        ]);
        d *= 2;
    }
    p.round(vec![Step::Local {
        bytes: all,
        combine: false,
    }]);
    p
}

/// Reduce_scatter of `m` bytes per rank's block by recursive halving (MPI libraries' for
/// commutative operations): exchanges of half, a quarter, ... of the `n * m` bytes, each
/// combined; a job size that is not a power of two folds first and hands the folded ranks
/// their blocks at the end. The contribution is first copied into scratch, where the
/// halving combines, and a rank's block copied out of it at the end (MPICH's
/// `MPIR_Reduce_scatter_block_intra_recursive_halving` and Open MPI's
/// `ompi_coll_base_reduce_scatter_intra_basic_recursivehalving` both do).
pub fn reduce_scatter_halving(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    let total = m * u64::from(n);
    p.round(vec![Step::Local {
        bytes: total,
        combine: false,
    }]);
    if let Some(i) = fold_in(&mut p, r, n, total) {
        let q = pof2(n);
        let (mut mask, mut part) = (q >> 1, total);
        while mask > 0 {
            let peer = folded_rank(i ^ mask, n);
            part /= 2;
            p.round(vec![send(peer, part), recv(peer, part, true)]);
            mask >>= 1;
        }
        p.round(vec![Step::Local {
            bytes: m,
            combine: false,
        }]);
    }
    // The ranks that sat out get their blocks.
    fold_out(&mut p, r, n, m);
    p
}

/// Ring reduce_scatter of `m` bytes per rank's block: `n - 1` steps of one block around the
/// ring, each combined, in scratch that the contribution is copied into first (Open MPI's
/// `ompi_coll_base_reduce_scatter_intra_ring` does).
pub fn reduce_scatter_ring(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    p.round(vec![Step::Local {
        bytes: m * u64::from(n),
        combine: false,
    }]);
    for _ in 1..n {
        p.round(vec![send((r + 1) % n, m), recv((r + n - 1) % n, m, true)]);
    }
    p
}

/// Recursive-doubling scan of `m` bytes, as MPICH's `MPIR_Scan_intra_recursive_doubling`
/// and Open MPI's `ompi_coll_base_scan_intra_recursivedoubling` run it: the contribution
/// copied into the result and into a running partial; at the step of mask `d`, the partial
/// exchanged with rank `r ^ d` (where there is one) and combined into this rank's partial,
/// and from a lower rank into its result too.
pub fn scan_rd(r: u32, n: u32, m: u64) -> Program {
    doubling_scan(r, n, m, false)
}

/// The recursive-doubling scan (`exclusive` false) or exclusive scan of `m` bytes: the
/// contribution copied into a running partial (and a scan's into its result too); at the
/// step of mask `d` the partial exchanged with rank `r ^ d` and combined into this rank's;
/// what a lower rank sent also goes into the result (an exclusive scan's first one copied
/// there, as it has no result before).
fn doubling_scan(r: u32, n: u32, m: u64, exclusive: bool) -> Program {
    let mut p = Program::default();
    p.round(vec![Step::Local {
        bytes: if exclusive { m } else { 2 * m },
        combine: false,
    }]);
    let (mut d, mut first) = (1, true);
    while d < n {
        let peer = r ^ d;
        if peer < n {
            p.round(vec![send(peer, m), recv(peer, m, true)]);
            if peer < r {
                p.round(vec![Step::Local {
                    bytes: m,
                    combine: !(exclusive && first),
                }]);
                first = false;
            }
        }
        d *= 2;
    }
    p
}

/// Linear scan of `m` bytes (Open MPI's `basic`): each rank combines the prefix from the
/// rank before it and passes its own on.
pub fn scan_linear(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    if r > 0 {
        p.round(vec![recv(r - 1, m, true)]);
    }
    if r + 1 < n {
        p.round(vec![send(r + 1, m)]);
    }
    p
}

/// Recursive-doubling exclusive scan of `m` bytes, as MPICH's
/// `MPIR_Exscan_intra_recursive_doubling` and Open MPI's
/// `ompi_coll_base_exscan_intra_recursivedoubling` run it: the contribution copied into a
/// running partial; at the step of mask `d`, the partial exchanged with rank `r ^ d` (where
/// there is one) and combined into this rank's; what a lower rank sent also goes into the
/// result (copied there the first time, combined after).
pub fn exscan_rd(r: u32, n: u32, m: u64) -> Program {
    doubling_scan(r, n, m, true)
}

/// Linear exclusive scan of `m` bytes (Open MPI's `basic`): rank r receives its result from
/// rank `r - 1`, combines its own contribution into it and passes that on.
pub fn exscan_linear(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    if r > 0 {
        p.round(vec![recv(r - 1, m, false)]);
    }
    if r + 1 < n {
        if r > 0 {
            p.round(vec![Step::Local {
                bytes: m,
                combine: true,
            }]);
        }
        p.round(vec![send(r + 1, m)]);
    }
    p
}
