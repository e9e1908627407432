//! Ring building blocks over a group split into `n` blocks of whole elements: the
//! reduce-scatter and the allgather of the ring allreduce, reused by the broadcast's
//! scatter-allgather and the reduce's reduce-scatter-gather.

use std::ops::Range;

use crate::combine::Combine;
use crate::error::Result;
use crate::transport::Transport;

/// A message of `len` bytes split into `n` blocks of whole `elem`-byte elements, the
/// first `count % n` blocks one element longer.
#[derive(Debug, Clone, Copy)]
pub struct Blocks {
    count: usize,
    n: usize,
    elem: usize,
}

impl Blocks {
    /// The blocks of a `len`-byte message among `n` members.
    pub fn new(len: usize, n: usize, elem: usize) -> Self {
        Blocks {
            count: len / elem,
            n,
            elem,
        }
    }

    /// Whether every block holds at least one element (else the ring is pointless).
    pub fn all_nonempty(&self) -> bool {
        self.count >= self.n
    }

    /// Byte range of block `b` (taken modulo `n`).
    pub fn get(&self, b: usize) -> Range<usize> {
        let b = b % self.n;
        let (q, r) = (self.count / self.n, self.count % self.n);
        let start = b * q + b.min(r);
        let len = q + usize::from(b < r);
        start * self.elem..(start + len) * self.elem
    }
}

/// `buf[send]` and `buf[recv]` at once; the ranges must not overlap.
pub fn split(buf: &mut [u8], send: Range<usize>, recv: Range<usize>) -> (&[u8], &mut [u8]) {
    debug_assert!(send.end <= recv.start || recv.end <= send.start);
    if send.start < recv.start {
        let (a, b) = buf.split_at_mut(recv.start);
        (&a[send], &mut b[..recv.len()])
    } else {
        let (a, b) = buf.split_at_mut(send.start);
        (&b[..send.len()], &mut a[recv])
    }
}

/// Ring reduce-scatter: after `n - 1` steps member `me` holds block `me + 1` of the
/// reduction of everyone's `acc` (other blocks hold partial sums). `tmp` is scratch of at
/// least one block.
pub fn reduce_scatter(
    t: &mut dyn Transport,
    members: &[u32],
    me: usize,
    blocks: Blocks,
    acc: &mut [u8],
    tmp: &mut [u8],
    op: &dyn Combine,
) -> Result<()> {
    let n = members.len();
    let right = members[(me + 1) % n];
    let left = members[(me + n - 1) % n];
    for step in 0..n - 1 {
        let sb = blocks.get(me + n - step);
        let rb = blocks.get(me + 2 * n - step - 1);
        let rlen = rb.len();
        t.sendrecv(right, &acc[sb], left, &mut tmp[..rlen])?;
        op.combine(&mut acc[rb], &tmp[..rlen]);
    }
    Ok(())
}

/// Ring allgather: member `me` starts with block `me + shift` of `buf` and ends with all
/// of them.
pub fn allgather(
    t: &mut dyn Transport,
    members: &[u32],
    me: usize,
    blocks: Blocks,
    shift: usize,
    buf: &mut [u8],
) -> Result<()> {
    let n = members.len();
    let right = members[(me + 1) % n];
    let left = members[(me + n - 1) % n];
    for step in 0..n - 1 {
        let sb = blocks.get(me + shift + n - step);
        let rb = blocks.get(me + shift + 2 * n - step - 1);
        let (s, r) = split(buf, sb, rb);
        t.sendrecv(right, s, left, r)?;
    }
    Ok(())
}
