//! Ialltoall and Ialltoallv: [`crate::alltoall`]'s pairwise form as a schedule. Every rank
//! sends each other rank its block over the link that reaches it and receives one from
//! each: on one node in `size - 1` rounds (in round d to the rank d places on, from the
//! rank d places back, as the blocking form's exchanges), across nodes all in one round, so
//! that every network transfer is posted at the start, in the blocking form's order
//! ([`crate::alltoall::turns`]: the nodes interleaved). A block of no bytes is not sent
//! (both ends know its length).
//!
//! Buffers: the blocks to send are in [`Buf::Send`], or in place in [`Buf::Recv`], from
//! which they are first copied to [`Buf::Tmp`] (the blocks received land in `Recv`).

use std::ops::Range;

use super::{Action, Buf, Builder, Link, Region};
use crate::by_node::ByNode;

/// The steps of rank `me`'s part in an Alltoall of `len`-byte blocks among `size` ranks
/// (`one_node`: all on one node; else `by_node`, if known, orders the transfers). `send`:
/// the blocks are in [`Buf::Send`] (else in place, in [`Buf::Recv`]). Returns the builder
/// and how many bytes of [`Buf::Tmp`] it uses.
pub fn build(
    me: u32,
    size: usize,
    one_node: bool,
    by_node: Option<&ByNode>,
    len: usize,
    send: bool,
) -> (Builder, usize) {
    let at: Vec<Range<usize>> = (0..size).map(|r| r * len..(r + 1) * len).collect();
    build_v(
        me,
        one_node,
        by_node,
        send.then_some(&at[..]),
        &at,
        size * len,
    )
}

/// The steps of rank `me`'s part in an Alltoallv (`one_node`: all on one node; else
/// `by_node`, if known, orders the transfers): its block for rank r is `send_at[r]` of
/// [`Buf::Send`] (`None` in place: `recv_at[r]` of [`Buf::Recv`]), rank r's block for it
/// lands at `recv_at[r]` of [`Buf::Recv`], whose blocks end by `recv_len`. Returns the
/// builder and how many bytes of [`Buf::Tmp`] it uses.
pub fn build_v(
    me: u32,
    one_node: bool,
    by_node: Option<&ByNode>,
    send_at: Option<&[Range<usize>]>,
    recv_at: &[Range<usize>],
    recv_len: usize,
) -> (Builder, usize) {
    let mut b = Builder::default();
    let size = recv_at.len();
    let me = me as usize;
    let region = |buf: Buf, r: &Range<usize>| Region {
        buf,
        off: r.start,
        len: r.len(),
    };
    let (src, from_at, tmp) = match send_at {
        Some(at) => {
            if !at[me].is_empty() {
                b.step(
                    Link::Local,
                    Action::Copy {
                        src: region(Buf::Send, &at[me]),
                        dst: region(Buf::Recv, &recv_at[me]),
                    },
                );
            }
            (Buf::Send, at, 0)
        }
        None if size > 1 && recv_len > 0 => {
            b.step(
                Link::Local,
                Action::Copy {
                    src: Region::whole(Buf::Recv, recv_len),
                    dst: Region::whole(Buf::Tmp, recv_len),
                },
            );
            (Buf::Tmp, recv_at, recv_len)
        }
        None => (Buf::Tmp, recv_at, 0),
    };
    let (tos, froms) = if one_node {
        (Vec::new(), Vec::new())
    } else {
        crate::alltoall::turns(me as u32, size, by_node)
    };
    let pair = |d: usize| {
        let (to, from) = if one_node {
            ((me + d) % size, (me + size - d) % size)
        } else {
            (tos[d - 1] as usize, froms[d - 1] as usize)
        };
        let send = (!from_at[to].is_empty()).then(|| {
            (
                Link::Peer(to as u32),
                Action::Send {
                    to: vec![to as u32],
                    src: region(src, &from_at[to]),
                },
            )
        });
        let recv = (!recv_at[from].is_empty()).then(|| {
            (
                Link::Peer(from as u32),
                Action::Recv {
                    from: from as u32,
                    dst: region(Buf::Recv, &recv_at[from]),
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
    (b, tmp)
}
