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

/// Binomial broadcast of `m` bytes from rank 0: a rank receives from the rank that
/// differs in its lowest set bit, then sends to the ranks above it, farthest first, all at
/// once.
pub fn bcast_binomial(r: u32, n: u32, m: u64) -> Program {
    let mut p = Program::default();
    let low = if r == 0 {
        n.next_power_of_two()
    } else {
        1 << r.trailing_zeros()
    };
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
    let low = if r == 0 {
        n.next_power_of_two()
    } else {
        1 << r.trailing_zeros()
    };
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
