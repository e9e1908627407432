//! Iscatter and Iscatterv: the direct form of [`crate::scatterv`] as a schedule. The root
//! sends every other rank its block straight over the link that reaches it, every
//! transfer in one round, so that each is posted at the start; each rank receives its
//! own. A block of no bytes is not sent (both ends know its length). As for Igather, the
//! form through the leaders is a later step.
//!
//! Buffers: the root's blocks are in [`Buf::Send`]; a rank's block lands in [`Buf::Recv`]
//! (at the root `None` in place: its block stays in [`Buf::Send`]).

use std::ops::Range;

use super::{Action, Buf, Builder, Link, Region};

/// The steps of rank `me`'s part in a Scatterv from `root`: at the root, `at` places rank
/// r's block at `at[r]` of [`Buf::Send`] and `recv` says whether its own lands in
/// [`Buf::Recv`] (else it stays in place); elsewhere `at` is `None` and the rank's block
/// lands in the `len` bytes of [`Buf::Recv`].
pub fn build(me: u32, root: u32, at: Option<&[Range<usize>]>, recv: bool, len: usize) -> Builder {
    let mut b = Builder::default();
    let region = |buf: Buf, r: &Range<usize>| Region {
        buf,
        off: r.start,
        len: r.len(),
    };
    match at {
        None => {
            if len > 0 {
                b.round([(
                    Link::Peer(root),
                    Action::Recv {
                        from: root,
                        dst: Region::whole(Buf::Recv, len),
                    },
                )]);
            }
        }
        Some(at) => {
            let mine = &at[me as usize];
            if recv && !mine.is_empty() {
                b.step(
                    Link::Local,
                    Action::Copy {
                        src: region(Buf::Send, mine),
                        dst: Region::whole(Buf::Recv, mine.len()),
                    },
                );
            }
            let to = (0..at.len() as u32).filter(|&r| r != me && !at[r as usize].is_empty());
            b.round(to.map(|r| {
                (
                    Link::Peer(r),
                    Action::Send {
                        to: vec![r],
                        src: region(Buf::Send, &at[r as usize]),
                    },
                )
            }));
        }
    }
    b
}
