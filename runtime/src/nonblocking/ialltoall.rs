//! Ialltoall: [`crate::alltoall`]'s pairwise form as a schedule. Every rank sends each
//! other rank its block over the link that reaches it and receives one from each: on one
//! node in `size - 1` rounds (in round d to the rank d places on, from the rank d places
//! back, as the blocking form's exchanges), across nodes all in one round, so that every
//! network transfer is posted at the start.
//!
//! Buffers: the blocks to send are in [`Buf::Send`], or in place in [`Buf::Recv`], from
//! which they are first copied to [`Buf::Tmp`] (the blocks received land in `Recv`).

use super::{Action, Buf, Builder, Link, Region};

/// The steps of rank `me`'s part in an Alltoall of `len`-byte blocks among `size` ranks
/// (`one_node`: all on one node). `send`: the blocks are in [`Buf::Send`] (else in place, in
/// [`Buf::Recv`]). Returns the builder and how many bytes of [`Buf::Tmp`] it uses.
pub fn build(me: u32, size: usize, one_node: bool, len: usize, send: bool) -> (Builder, usize) {
    let mut b = Builder::default();
    if len == 0 || size < 2 {
        if send && len > 0 {
            let (from, to) = (Region::whole(Buf::Send, len), Region::whole(Buf::Recv, len));
            b.step(Link::Local, Action::Copy { src: from, dst: to });
        }
        return (b, 0);
    }
    let me = me as usize;
    let block = |buf: Buf, r: usize| Region {
        buf,
        off: r * len,
        len,
    };
    let (src, tmp) = if send {
        b.step(
            Link::Local,
            Action::Copy {
                src: block(Buf::Send, me),
                dst: block(Buf::Recv, me),
            },
        );
        (Buf::Send, 0)
    } else {
        b.step(
            Link::Local,
            Action::Copy {
                src: Region::whole(Buf::Recv, size * len),
                dst: Region::whole(Buf::Tmp, size * len),
            },
        );
        (Buf::Tmp, size * len)
    };
    let pair = |d: usize| {
        let (to, from) = ((me + d) % size, (me + size - d) % size);
        [
            (
                Link::Peer(to as u32),
                Action::Send {
                    to: vec![to as u32],
                    src: block(src, to),
                },
            ),
            (
                Link::Peer(from as u32),
                Action::Recv {
                    from: from as u32,
                    dst: block(Buf::Recv, from),
                },
            ),
        ]
    };
    if one_node {
        for d in 1..size {
            b.round(pair(d));
        }
    } else {
        b.round((1..size).flat_map(pair));
    }
    (b, tmp)
}
