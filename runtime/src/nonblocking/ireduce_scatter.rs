//! Ireduce_scatter_block and Ireduce_scatter, as the blocking Reduce_scatter runs: the
//! Allreduce's schedule of the whole contribution, moved into the accumulator, then this
//! rank's block of the result copied out.
//!
//! Buffers: the contribution is [`Buf::Send`], or in place the first `total` bytes of
//! [`Buf::Recv`] (copied into the accumulator first, so that the rest of the buffer keeps
//! it, as Open MPI's does); [`Buf::Acc`] (`total` bytes) holds the whole result; this
//! rank's block lands at the start of [`Buf::Recv`].

use std::ops::Range;

use super::{Action, Buf, Builder, Link, Region};

/// Wraps `allreduce`, the steps of an Allreduce of `total` bytes (built with the same
/// `send`: the contribution in [`Buf::Send`]), into a Reduce_scatter whose block for this
/// rank is `mine` of the result. The accumulator is `total` bytes.
pub fn build(allreduce: Builder, send: bool, total: usize, mine: Range<usize>) -> Builder {
    let mut b = Builder::default();
    if total == 0 {
        return b;
    }
    if !send {
        b.step(
            Link::Local,
            Action::Copy {
                src: Region::whole(Buf::Recv, total),
                dst: Region::whole(Buf::Acc, total),
            },
        );
    }
    b.append(allreduce.moved(Buf::Recv, Buf::Acc));
    if !mine.is_empty() {
        b.step(
            Link::Local,
            Action::Copy {
                src: Region {
                    buf: Buf::Acc,
                    off: mine.start,
                    len: mine.len(),
                },
                dst: Region::whole(Buf::Recv, mine.len()),
            },
        );
    }
    b
}
