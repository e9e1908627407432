//! Iallgatherv: every rank sends its block straight to every other rank over the link that
//! reaches it and receives each other rank's into its place: on one node in `size - 1`
//! rounds (in round d to the rank d places on, from the rank d places back, as Ialltoall's),
//! across nodes all in one round, so that every network transfer is posted at the start.
//! A block of no bytes is not sent (every rank knows every length). The blocking
//! Allgatherv's way up the hierarchy, across the top group and down waits at each leader;
//! a schedule of that form is a later step.
//!
//! Buffers: this rank's block is [`Buf::Send`], or in place at its place in [`Buf::Recv`];
//! rank r's block lands at its place in [`Buf::Recv`].

use std::ops::Range;

use super::{Action, Buf, Builder, Link, Region};

/// The steps of rank `me`'s part in an Allgatherv (`one_node`: all on one node): rank r's
/// block lands at `at[r]` of [`Buf::Recv`]; `send`: this rank's block is [`Buf::Send`]
/// (else in place, at `at[me]` of [`Buf::Recv`]).
pub fn build(me: u32, one_node: bool, at: &[Range<usize>], send: bool) -> Builder {
    let mut b = Builder::default();
    let size = at.len();
    let me = me as usize;
    let region = |buf: Buf, r: &Range<usize>| Region {
        buf,
        off: r.start,
        len: r.len(),
    };
    let mine = &at[me];
    let src = if send {
        if !mine.is_empty() {
            b.step(
                Link::Local,
                Action::Copy {
                    src: Region::whole(Buf::Send, mine.len()),
                    dst: region(Buf::Recv, mine),
                },
            );
        }
        Region::whole(Buf::Send, mine.len())
    } else {
        region(Buf::Recv, mine)
    };
    let pair = |d: usize| {
        let (to, from) = ((me + d) % size, (me + size - d) % size);
        let send = (!mine.is_empty()).then(|| {
            (
                Link::Peer(to as u32),
                Action::Send {
                    to: vec![to as u32],
                    src,
                },
            )
        });
        let recv = (!at[from].is_empty()).then(|| {
            (
                Link::Peer(from as u32),
                Action::Recv {
                    from: from as u32,
                    dst: region(Buf::Recv, &at[from]),
                },
            )
        });
        send.into_iter().chain(recv)
    };
    if one_node {
        for d in 1..size {
            b.round(pair(d));
        }
    } else {
        b.round((1..size).flat_map(pair));
    }
    b
}
