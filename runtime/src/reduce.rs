//! Reduce: per-level algorithms (flat, k-nomial, reduce-scatter-gather) and the
//! hierarchical reduce (coll/tcl ReduceGroup, bottom-up), pipelined in chunks. Only
//! commutative operations come here.

use topo_hierarchy::settings::{Collective, ReduceAlg, Settings};

use crate::combine::Combine;
use crate::error::Result;
use crate::ring::{self, Blocks};
use crate::transport::Fabric;
use crate::transport::Transport;
use crate::tree;
use crate::view::{Level, View};

/// Reduces the members' `acc` into `acc` at `members[root]`. `tmp` is scratch of the same
/// length. On other members `acc` is left partially reduced.
#[allow(clippy::too_many_arguments)]
pub fn group_reduce(
    t: &mut dyn Transport,
    members: &[u32],
    me: usize,
    root: usize,
    alg: ReduceAlg,
    acc: &mut [u8],
    tmp: &mut [u8],
    op: &dyn Combine,
) -> Result<()> {
    let n = members.len();
    match alg {
        ReduceAlg::Flat => {
            if me == root {
                // Highest position first, as coll/sharm reads the queues.
                for i in (0..n).rev().filter(|&i| i != root) {
                    t.recv_reduce(members[i], acc, tmp, op)?;
                }
                Ok(())
            } else {
                t.send_to_combine(members[root], acc)
            }
        }
        ReduceAlg::Knomial(k) => {
            let (parent, children) = tree::knomial(me, root, n, k as usize);
            // Smallest subtrees finish first.
            for &c in children.iter().rev() {
                t.recv_reduce(members[c], acc, tmp, op)?;
            }
            match parent {
                Some(p) => t.send_to_combine(members[p], acc),
                None => Ok(()),
            }
        }
        ReduceAlg::ReduceScatterGather => {
            let blocks = Blocks::new(acc.len(), n, op.elem_size());
            if !blocks.all_nonempty() {
                let alg = ReduceAlg::Knomial(2);
                return group_reduce(t, members, me, root, alg, acc, tmp, op);
            }
            // Member i ends the ring with block i + 1 of the result.
            ring::reduce_scatter(t, members, me, blocks, acc, tmp, op)?;
            if me == root {
                for i in (0..n).filter(|&i| i != root) {
                    t.recv(members[i], &mut acc[blocks.get(i + 1)])?;
                }
                Ok(())
            } else {
                t.send(&[members[root]], &acc[blocks.get(me + 1)])
            }
        }
    }
}

/// Scratch buffers reused across calls.
#[derive(Debug, Default)]
pub struct Scratch {
    a: Vec<u8>,
    b: Vec<u8>,
    c: Vec<u8>,
    d: Vec<u8>,
}

impl Scratch {
    /// Two buffers of `len` bytes.
    pub fn pair(&mut self, len: usize) -> (&mut [u8], &mut [u8]) {
        if self.a.len() < len {
            self.a.resize(len, 0);
            self.b.resize(len, 0);
        }
        (&mut self.a[..len], &mut self.b[..len])
    }

    /// Three buffers of `len` bytes.
    pub fn triple(&mut self, len: usize) -> (&mut [u8], &mut [u8], &mut [u8]) {
        for v in [&mut self.a, &mut self.b, &mut self.c] {
            if v.len() < len {
                v.resize(len, 0);
            }
        }
        (&mut self.a[..len], &mut self.b[..len], &mut self.c[..len])
    }

    /// Three buffers of `len` bytes and one of `extra`.
    pub fn quad(
        &mut self,
        len: usize,
        extra: usize,
    ) -> (&mut [u8], &mut [u8], &mut [u8], &mut [u8]) {
        self.triple(len);
        if self.d.len() < extra {
            self.d.resize(extra, 0);
        }
        (
            &mut self.a[..len],
            &mut self.b[..len],
            &mut self.c[..len],
            &mut self.d[..extra],
        )
    }
}

/// Hierarchical reduce to world rank `root`. `send` is this rank's contribution; `recv`
/// (root only, same length) gets the result. With `send == None` the root's contribution
/// is already in `recv` (in place).
#[allow(clippy::too_many_arguments)]
pub fn reduce(
    view: &View,
    fabric: &mut dyn Fabric,
    s: &Settings,
    root: u32,
    send: Option<&[u8]>,
    mut recv: Option<&mut [u8]>,
    op: &dyn Combine,
    scratch: &mut Scratch,
) -> Result<()> {
    let total = send.map_or_else(|| recv.as_ref().map_or(0, |r| r.len()), <[u8]>::len);
    if total == 0 {
        return Ok(());
    }
    // One flat group holds the whole job and nothing is pipelined: a member sends its
    // contribution as it is, the root combines everyone's into `recv`.
    if let Some(l) = view.only_level().filter(|l| {
        l.members.len() > 1
            && s.reduce_for(l.name, l.intra, l.members.len(), total) == ReduceAlg::Flat
    }) {
        let r = l.position(root);
        match (send, recv.as_deref_mut()) {
            (Some(sb), _) if l.me != r => {
                return fabric.level(0).send_to_combine(l.members[r], sb);
            }
            (own, Some(acc)) if l.me == r => {
                let tmp = scratch.pair(acc.len()).1;
                return flat_root(fabric.level(0), l, acc, own, tmp, op);
            }
            _ => {}
        }
    }
    let chunk = view.chunk_bytes(s, Collective::Reduce, total, op.elem_size());
    let is_root = view.rank == root;
    let detour = root != 0 && (is_root || view.rank == 0) && !view.top_has(root);
    // A rank that only sends (a leaf of its lowest group) sends its buffer as it is.
    if let (Some(sb), false, Some(to)) = (send, is_root, leaf_parent(view, s, root, total)) {
        for piece in sb.chunks(chunk) {
            fabric.level(0).send_to_combine(to, piece)?;
        }
        return Ok(());
    }
    let mut off = 0;
    while off < total {
        let end = off.saturating_add(chunk).min(total);
        let len = end - off;
        let (a, tmp) = scratch.pair(len);
        // The root accumulates straight into its receive buffer (unless the result comes
        // back through rank 0).
        // Its own contribution goes in with the first message it takes, where it can
        // (`own`, see `up_onto`).
        let mut own = None;
        let acc: &mut [u8] = match (&mut recv, is_root && !detour) {
            (Some(r), true) => {
                own = send.map(|sb| &sb[off..end]);
                &mut r[off..end]
            }
            _ => {
                match (send, &recv) {
                    (Some(sb), _) => a.copy_from_slice(&sb[off..end]),
                    (None, Some(r)) => a.copy_from_slice(&r[off..end]),
                    (None, None) => {}
                }
                a
            }
        };
        up_onto(view, fabric, s, root, total, acc, own, tmp, op)?;
        if detour {
            if view.rank == 0 {
                fabric.peer(root).send(&[root], acc)?;
            } else if let Some(r) = &mut recv {
                fabric.peer(0).recv(0, &mut r[off..end])?;
            }
        }
        off = end;
    }
    Ok(())
}

/// A flat group's root (`l.me`): combines every other member's message into `acc`,
/// highest position first (as coll/sharm reads the queues). With `own`, `acc` does not
/// hold this rank's contribution yet, and the first message is taken onto `own`
/// ([`Transport::recv_reduce_onto`]: from a sender's buffer, the result is read straight
/// into `acc` and `own` combined in, instead of copying `own` to `acc` first and reading
/// the message into scratch).
fn flat_root(
    t: &mut dyn Transport,
    l: &Level,
    acc: &mut [u8],
    own: Option<&[u8]>,
    tmp: &mut [u8],
    op: &dyn Combine,
) -> Result<()> {
    let mut senders = (0..l.members.len()).rev().filter(|&i| i != l.me);
    if let Some(own) = own {
        match senders.next() {
            Some(i) => t.recv_reduce_onto(l.members[i], acc, own, tmp, op)?,
            None => acc.copy_from_slice(own),
        }
    }
    for i in senders {
        t.recv_reduce(l.members[i], acc, tmp, op)?;
    }
    Ok(())
}

/// If this rank receives nothing in a reduce to `root` (it is not its lowest group's root
/// and has no children there), the rank it sends to.
fn leaf_parent(view: &View, s: &Settings, root: u32, total: usize) -> Option<u32> {
    let l = view.levels.first()?;
    let r = view.group_root(0, root);
    if l.me == r {
        return None;
    }
    match s.reduce_for(l.name, l.intra, l.members.len(), total) {
        ReduceAlg::Flat => Some(l.members[r]),
        ReduceAlg::Knomial(k) => match tree::knomial(l.me, r, l.members.len(), k as usize) {
            (Some(p), children) if children.is_empty() => Some(l.members[p]),
            _ => None,
        },
        ReduceAlg::ReduceScatterGather => None,
    }
}

/// The root's bottom-up part through every level, with `acc` not yet holding the root's
/// contribution `own` (when there is one). A root whose lowest group reduces flat takes
/// the first message onto `own` ([`Transport::recv_reduce_onto`]: from a sender's buffer,
/// the result is read straight into `acc` and `own` combined in, instead of copying `own`
/// to `acc` first and reading the message into scratch); otherwise `own` is copied first.
#[allow(clippy::too_many_arguments)]
fn up_onto(
    view: &View,
    fabric: &mut dyn Fabric,
    s: &Settings,
    root: u32,
    total: usize,
    acc: &mut [u8],
    own: Option<&[u8]>,
    tmp: &mut [u8],
    op: &dyn Combine,
) -> Result<bool> {
    let until = view.levels.len();
    let Some(own) = own else {
        return up(view, fabric, s, root, total, until, acc, tmp, op);
    };
    let first = view.levels.first().filter(|l| {
        l.me == view.group_root(0, root)
            && l.members.len() > 1
            && s.reduce_for(l.name, l.intra, l.members.len(), total) == ReduceAlg::Flat
    });
    let Some(l) = first else {
        acc.copy_from_slice(own);
        return up(view, fabric, s, root, total, until, acc, tmp, op);
    };
    flat_root(fabric.level(0), l, acc, Some(own), tmp, op)?;
    up_from(view, fabric, s, root, total, 1, until, acc, tmp, op)
}

/// The bottom-up part: reduce `acc` through `view.levels[..until]`. Returns whether this
/// rank still holds a partial result (it is the group root of every level it passed).
#[allow(clippy::too_many_arguments)]
pub(crate) fn up(
    view: &View,
    fabric: &mut dyn Fabric,
    s: &Settings,
    root: u32,
    total: usize,
    until: usize,
    acc: &mut [u8],
    tmp: &mut [u8],
    op: &dyn Combine,
) -> Result<bool> {
    up_from(view, fabric, s, root, total, 0, until, acc, tmp, op)
}

/// [`up`] through `view.levels[start..until]`.
#[allow(clippy::too_many_arguments)]
fn up_from(
    view: &View,
    fabric: &mut dyn Fabric,
    s: &Settings,
    root: u32,
    total: usize,
    start: usize,
    until: usize,
    acc: &mut [u8],
    tmp: &mut [u8],
    op: &dyn Combine,
) -> Result<bool> {
    for i in start..until {
        let l = &view.levels[i];
        let alg = s.reduce_for(l.name, l.intra, l.members.len(), total);
        let r = view.group_root(i, root);
        group_reduce(fabric.level(i), &l.members, l.me, r, alg, acc, tmp, op)?;
        if l.me != r {
            return Ok(false);
        }
    }
    Ok(true)
}
