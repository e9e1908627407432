//! Igather and Igatherv: the direct form of [`crate::gatherv`] as a schedule. Every rank
//! but the root sends its block straight to the root over the link that reaches it, and the
//! root receives them all, every transfer in one round, so that each is posted at the
//! start. A block of no bytes is not sent (both ends know its length). The blocking
//! Gather's way through the leaders waits at each leader for the blocks under it, which a
//! start must not do; a schedule of that form is a later step.
//!
//! Buffers: a rank's block is [`Buf::Send`] (at the root `None` in place: its block is at
//! its place in [`Buf::Recv`] already); the root's blocks land in [`Buf::Recv`].

use std::ops::Range;

use super::{Action, Buf, Builder, Link, Region};

/// The steps of rank `me`'s part in a Gatherv to `root`: at the root, `at` places rank r's
/// block at `at[r]` of [`Buf::Recv`] and `send` says whether its own is in [`Buf::Send`]
/// (else in place); elsewhere `at` is `None` and the rank's block is the `len` bytes of
/// [`Buf::Send`].
pub fn build(me: u32, root: u32, at: Option<&[Range<usize>]>, send: bool, len: usize) -> Builder {
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
                    Action::Send {
                        to: vec![root],
                        src: Region::whole(Buf::Send, len),
                    },
                )]);
            }
        }
        Some(at) => {
            let mine = &at[me as usize];
            if send && !mine.is_empty() {
                b.step(
                    Link::Local,
                    Action::Copy {
                        src: Region::whole(Buf::Send, mine.len()),
                        dst: region(Buf::Recv, mine),
                    },
                );
            }
            let from = (0..at.len() as u32).filter(|&r| r != me && !at[r as usize].is_empty());
            b.round(from.map(|r| {
                (
                    Link::Peer(r),
                    Action::Recv {
                        from: r,
                        dst: region(Buf::Recv, &at[r as usize]),
                    },
                )
            }));
        }
    }
    b
}
