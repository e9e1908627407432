//! Scan and Exscan (one algorithm: Exscan is Scan's offset without the rank's own
//! contribution), hierarchical where every group's ranks are consecutive in the
//! communicator, recursive doubling in rank order otherwise.
//!
//! Rank r's result is the reduction of the contributions of ranks `0..=r` (Scan) or
//! `0..r` (Exscan); only commutative, associative operations come here. Where the ranks
//! under each member of every group are consecutive (block placement), rank r's
//! exclusive prefix (its *offset*) splits along the hierarchy: the offset of its group's
//! leader, then the totals of the members of its group before it. So, level by level:
//!
//! - **Up.** Below the top group, each member sends its group's leader the total of the
//!   ranks under it; the leader adds them to its own, and hands the sum on up. Rank 0's
//!   offset is empty, so in its groups the member's total goes in an exchange that brings
//!   back its whole offset (the leader's subtree and the members before it). Elsewhere,
//!   in groups of two, the total goes one way and the member waits for its offset in one
//!   message (`form`); in larger groups the member gets the part from inside the group
//!   in the exchange, in parallel with the others' combines, and the leader's offset
//!   after.
//!   In groups of more than four whose totals would come to more than 16 KiB, the members
//!   run an exclusive scan of their totals among themselves by recursive doubling (as the
//!   top group does), and the last sends the group's total to the leader (`Form`).
//! - **Top.** The members of the job's top group run an exclusive scan of their totals
//!   among themselves (recursive doubling, `ceil(log2 k)` rounds): each learns its
//!   offset without a round trip through a leader.
//! - **Down.** A leader whose offset is not empty (every rank but rank 0, which precedes
//!   everything) sends its member its whole offset (one-way form), or its own offset to
//!   them all, which they add to what they got on the way up.
//!
//! Nobody wants the total of the last ranks (those under a member whose subtree ends at
//! the communicator's last rank): their members send nothing up.
//!
//! So the network carries each node's total up and its offset down, `2 log2(nodes)`
//! messages' latency at most, where MPI's linear Scan passes the prefix rank by rank
//! (Open MPI's `basic`).
//!
//! Where some group's ranks are not consecutive (cyclic placement), the prefixes do not
//! split along the groups; the ranks then run recursive doubling over all ranks in rank
//! order, as MPICH's Scan does (`doubling`: `ceil(log2 size)` rounds, where a chain of
//! ranks, Open MPI's linear Scan, takes `size - 1`). Which form runs is agreed once per
//! context ([`in_order`]).

use crate::allreduce;
use crate::alltoall;
use crate::backoff::Backoff;
use crate::combine::{Combine, FnCombine};
use crate::error::Result;
use crate::reduce::Scratch;
use crate::subtrees::{Subtrees, below_top};
use crate::transport::{Fabric, Transfer, Transport};
use crate::view::View;
use topo_hierarchy::Settings;

/// The view whose network part is one group of `network` (every rank that reaches the
/// network) in rank order ([`View::over_network`] with the ranks sorted): where the ranks
/// under every group are consecutive, each such rank's node comes after the nodes of the
/// ranks before it, so the group's exclusive scan gives each node its offset.
pub fn network_in_order(view: &View, network: &[u32]) -> View {
    let mut sorted = network.to_vec();
    sorted.sort_unstable();
    view.over_network(&sorted)
}

/// Whether a hierarchical Scan of `len` bytes runs on the view whose network part is one
/// group of every rank that reaches the network in rank order ([`network_in_order`]):
/// from [`FLAT_NETWORK_FROM`] bytes, where the network's groups below the top (the leaf
/// switches) would pass their totals up and their offsets down in steps of their own,
/// while recursive doubling among all the nodes takes `ceil(log2 nodes)` steps across
/// the network. Below it the leaf switches' leaders take their nodes' totals at once
/// and send them their offsets, fewer steps than the doubling. Every
/// rank that reaches the network decides alike (the other ranks' groups are the same in
/// both views).
pub fn flat_network(len: usize) -> bool {
    len >= FLAT_NETWORK_FROM
}

/// The view a Scan of `len` bytes runs on: `network` (the context's
/// [`network_in_order`]) where the hierarchical form runs and [`flat_network`] says so,
/// else `view`.
pub fn view_for<'a>(hierarchical: bool, view: &'a View, network: &'a View, len: usize) -> &'a View {
    if hierarchical && flat_network(len) {
        network
    } else {
        view
    }
}

/// See [`flat_network`]: `topo-run simulate`, block placement under leaf switches of 32
/// nodes, the Scan's time over the flat recursive doubling's with the switches' levels
/// and with one group of all nodes: 128 nodes x 2 ranks, 256 B 0.85 and 1.02, 512 B
/// 1.02 and 1.01, 1 KiB 1.36 and 1.00, 4 KiB 1.46 and 0.98; 1,024 x 2 at 512 B 0.91 and
/// 1.01, 1 KiB 1.23 and 1.00; 1,024 x 32 at 1 KiB 1.01 and 0.84.
pub const FLAT_NETWORK_FROM: usize = 512;

/// Whether the ranks under every member of every group are consecutive, with the
/// members' ranges in the members' order, on every rank of the context ([`scan`]'s
/// hierarchical form is then exact). Collective over the context: every rank
/// contributes what it checked of the groups it leads ([`Subtrees::consecutive`]) to a
/// one-byte Allreduce, so that all of them decide alike.
pub fn in_order(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
    scratch: &mut Scratch,
) -> Result<bool> {
    let mine = [u8::from(sub.consecutive())];
    let mut all = [0u8];
    let min = FnCombine {
        elem: 1,
        f: |acc: &mut [u8], x: &[u8]| {
            for (a, b) in acc.iter_mut().zip(x) {
                *a = (*a).min(*b);
            }
        },
    };
    allreduce::allreduce(view, fabric, s, Some(&mine), &mut all, &min, scratch)?;
    Ok(all[0] == 1)
}

/// Scan (`exclusive` false) or Exscan (`exclusive` true) with `op`. `send` is this rank's
/// contribution, or `None` in place (the contribution is in `recv`). `recv` gets the
/// result; it is `None` only where nothing is written to it: Exscan's rank 0, whose
/// receive buffer MPI leaves undefined (and this leaves untouched). `hierarchical` is the
/// context's [`Subtrees`] where [`in_order`] answered yes (the same on every rank),
/// `None` for recursive doubling; `spin` the settings' (how long a wait spins before it
/// yields).
#[allow(clippy::too_many_arguments)]
pub fn scan(
    view: &View,
    fabric: &mut dyn Fabric,
    spin: u32,
    hierarchical: Option<&Subtrees>,
    send: Option<&[u8]>,
    recv: Option<&mut [u8]>,
    exclusive: bool,
    op: &dyn Combine,
    scratch: &mut Scratch,
) -> Result<()> {
    let len = send.map_or_else(|| recv.as_ref().map_or(0, |r| r.len()), <[u8]>::len);
    if len == 0 {
        return Ok(());
    }
    // What a leader keeps of its members' totals: nothing at rank 0, whose members get
    // their offsets on the way up.
    let held = match hierarchical {
        Some(_) if view.rank != 0 => {
            let leads = view.levels[..below_top(view)]
                .iter()
                .take_while(|l| l.me == 0)
                .count();
            held_below(view, len, leads)
        }
        _ => 0,
    };
    let (tot, tmp, spare, held) = scratch.quad(len, held);
    // Whether `run` left the result complete (`Last`).
    let mut run = |fabric: &mut dyn Fabric, x: &[u8], off: Option<&mut [u8]>, last: Last<'_>| {
        if chain_at(view.size, spin, len) {
            chain(view, fabric, x, off, last, tmp, op)
        } else if let Some(sub) = hierarchical {
            up_down(view, fabric, spin, sub, x, off, last, tot, tmp, held, op)
        } else {
            doubling(view, fabric, spin, x, off, tot, tmp, op).map(|()| false)
        }
    };
    match (send, recv) {
        // Rank 0's offset is empty: its Scan is its contribution, its Exscan nothing.
        (Some(x), Some(out)) if view.rank == 0 && !exclusive => {
            if !run(fabric, x, None, Last::Copy(&mut *out))? {
                out.copy_from_slice(x);
            }
        }
        (Some(x), _) if view.rank == 0 => {
            run(fabric, x, None, Last::Offset)?;
        }
        (None, Some(buf)) if view.rank == 0 => {
            run(fabric, buf, None, Last::Offset)?;
        }
        (Some(x), Some(out)) => {
            let last = if exclusive { Last::Offset } else { Last::Fold };
            if !run(fabric, x, Some(&mut *out), last)? && !exclusive {
                op.combine(out, x);
            }
        }
        // In place: the offset comes into scratch, and the contribution, read where it
        // is, is combined with it there at the end (the operation commutes).
        (None, Some(buf)) => {
            run(fabric, buf, Some(&mut *spare), Last::Offset)?;
            if exclusive {
                buf.copy_from_slice(spare);
            } else {
                op.combine(buf, spare);
            }
        }
        (_, None) => unreachable!("every rank but Exscan's rank 0 passes a receive buffer"),
    }
    Ok(())
}

/// The most ranks on which the Scan passes the prefix along the chain of ranks (`chain`)
/// where ranks outnumber cores ([`chain_at`]).
pub const CHAIN_UP_TO: u32 = 4;

/// Whether a Scan over `size` ranks with the settings' `spin` runs `chain`, whatever the
/// placement: on at most [`CHAIN_UP_TO`] ranks that outnumber their cores (`spin` 0,
/// `topo-run --spin 0`, the setting for that case), where every wait is a yield to a rank
/// that shares the core. The chain takes `size - 1` messages one after another, no more
/// steps than the hierarchy's way up and down on 2 nodes x 2 (three), and makes each rank
/// wait once at most, where recursive doubling makes each wait twice and the hierarchy
/// makes the node leaders wait for their members first; a rank that only sends returns
/// at once, so calls back to back overlap along the chain. The dev cluster's 2 emulated
/// nodes x 2 (block, `--spin 0`), `coll-bench --ops scan,exscan --chain` at 4-256 B: the
/// hierarchical form 11.7-13.6 us a call, recursive doubling 23.4-24.2 us, the chain
/// 6.6-7.8 us (Open MPI's linear Scan 10.2-12.5 us). Where each rank has a core of its
/// own, recursive doubling's concurrent rounds are the shorter (`topo-run simulate`, 4
/// nodes x 1 at 8 B: the chain 1.47 x recursive doubling), so the chain is left to that
/// case. Every rank sees the same size and settings.
///
/// On 2 ranks the chain is one message (rank 0 sends, rank 1 receives) where recursive
/// doubling and the hierarchy's way make both ranks send and wait: it is taken there too,
/// for messages below [`PLAIN_LAST_FROM`] (from there the other forms take their last
/// message plain and combine after, which a fold as it arrives does not beat). On 1 node x
/// 2, the build before and this one in turn, two rounds (`coll-bench --ops scan,exscan
/// --min 4 --max 4194304`, back to back and with a barrier): Scan and Exscan of 4-256 B
/// went from 0.73-1.22 x Open MPI's time to 0.62-1.04 (no row worse); from 32 KiB a chain
/// on every size took 0.9-1.1 x for Scan where the other forms take 0.5-0.8.
pub fn chain_at(size: u32, spin: u32, len: usize) -> bool {
    (size == 2 && len < PLAIN_LAST_FROM) || (size <= CHAIN_UP_TO && spin == 0)
}

/// The prefix along the chain of ranks (Open MPI's linear Scan): each rank but the first
/// receives its offset from the rank before it, and each but the last sends the rank after
/// it its offset and its contribution, each message over the transport that reaches its
/// peer. With `last` [`Last::Fold`] the offset is received onto the contribution (the
/// result is then complete: returns true), which goes on from there.
fn chain(
    view: &View,
    fabric: &mut dyn Fabric,
    x: &[u8],
    off: Option<&mut [u8]>,
    last: Last<'_>,
    tmp: &mut [u8],
    op: &dyn Combine,
) -> Result<bool> {
    let (me, n) = (view.rank, view.size);
    let next = (me + 1 < n).then_some(me + 1);
    let Some(out) = off else {
        // Rank 0: its contribution is the next rank's offset.
        if let Some(to) = next {
            fabric.peer(to).send(&[to], x)?;
        }
        return Ok(false);
    };
    let from = me - 1;
    let fold = matches!(last, Last::Fold);
    if fold {
        fabric.peer(from).recv_reduce_onto(from, out, x, tmp, op)?;
    } else {
        fabric.peer(from).recv(from, out)?;
    }
    if let Some(to) = next {
        let data: &[u8] = if fold {
            out
        } else {
            tmp.copy_from_slice(out);
            op.combine(tmp, x);
            tmp
        };
        fabric.peer(to).send(&[to], data)?;
    }
    Ok(fold)
}

/// What [`up_down`] does beside leaving a rank's offset, where the rank hands its offset
/// to nobody (it leads no group below the top).
enum Last<'a> {
    /// Nothing: the offset is the result (Exscan), or is needed whole.
    Offset,
    /// The contribution is combined into the offset as the last message arrives, fragment
    /// by fragment where the transport can, instead of a pass over the whole result after
    /// it (an inclusive Scan whose result is the offset's buffer).
    Fold,
    /// Rank 0's inclusive Scan: the contribution is copied into this buffer (its result)
    /// while its last message is on its way, instead of after.
    Copy(&'a mut [u8]),
}

/// The largest contribution for which a group of two above the lowest level takes the
/// one-way form ([`Form::OneWay`]), whose leader keeps its own subtree's total for the
/// context's life; and the most bytes of members' totals a group's leader takes one after
/// another before its members run recursive doubling instead ([`doubling_at`]).
const ONE_WAY_COMBINES: usize = 16 << 10;

/// The bytes the leader of `view.levels[i]` keeps in the one-way form (groups of two):
/// the total of its own subtree below the level, until its offset is known (above level
/// 0; at level 0 that total is the contribution itself).
fn held_at(len: usize, i: usize) -> usize {
    usize::from(i > 0) * len
}

/// How the members of a group below the top group learn the part of their offsets from
/// inside the group, and the leader the group's total.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// Each member sends its total up and gets its whole offset in one message, once the
    /// leader knows its own (at once in rank 0's groups, whose leader's offset is empty,
    /// where the member's total goes in an exchange).
    OneWay,
    /// Each member exchanges its total with the leader for the part of its offset from
    /// inside the group, and gets the leader's offset in a second message (but in rank
    /// 0's groups).
    Exchange,
    /// The members run an exclusive scan of their totals among themselves (recursive
    /// doubling, `ceil(log2 k)` rounds, as the top group does); the last sends the group's
    /// total to the leader, and each gets the leader's offset in a second message (but in
    /// rank 0's groups).
    Doubling,
}

/// The most members of a group below the top whose totals its leader takes one after
/// another however large they are ([`Form::Exchange`]).
const LEADER_TAKES: usize = 4;

/// Whether a group of `k` members below the top runs [`Form::Doubling`] for
/// contributions of `len` bytes, in the blocking form and the nonblocking one alike: in
/// groups of more than [`LEADER_TAKES`] whose totals would pass through the leader one
/// after another with more than [`ONE_WAY_COMBINES`] in all. Recursive doubling takes
/// `ceil(log2 k) + 1` steps up where the leader takes `k - 1` messages; for small totals
/// those arrive at once and cost the leader little, so the leader's way is the faster
/// (`topo-run simulate`, 128 nodes x 2 ranks under leaf switches of 32 nodes, each leaf
/// switch's leader taking its 31 node leaders' totals: 4 KiB 2.1 x the flat recursive
/// doubling, 1.5 with recursive doubling among them; 8 B 0.68, 1.29).
fn doubling_at(k: usize, len: usize) -> bool {
    k > LEADER_TAKES && (k - 1).saturating_mul(len) > ONE_WAY_COMBINES
}

/// How group `view.levels[i]` (below the top group) runs for contributions of `len`
/// bytes: by recursive doubling where [`doubling_at`] says so; one-way in groups of two,
/// where the leader's one combine replaces its member's and one message of the three
/// goes (at the lowest level whatever the size; above it up to [`ONE_WAY_COMBINES`],
/// where the leader keeps its own subtree's total, a contribution's length per level for
/// as long as the context lives); else the exchange. In larger groups the leader would
/// combine every member's offset one after another once its own is known, where in the
/// exchange each member combines its own in parallel: `topo-run simulate`, block
/// placement, the Scan's time over the flat recursive doubling's with the one-way form
/// in groups of up to 16 KiB of totals and with the exchange there: 2 nodes x 4 ranks at
/// 4 KiB 1.20 and 0.92, 2 x 8 at 4 KiB 1.16 and 1.00, 16 x 8 at 1 KiB 1.08 and 1.03,
/// 128 x 32 at 256 B 0.97 and 0.86. Leader and members decide alike: all see the
/// group's size.
pub(crate) fn form(view: &View, len: usize, i: usize) -> Form {
    let k = view.levels[i].members.len();
    if doubling_at(k, len) {
        Form::Doubling
    } else if k == 2 && (i == 0 || len <= ONE_WAY_COMBINES) {
        Form::OneWay
    } else {
        Form::Exchange
    }
}

/// Where level `i`'s totals are kept in a leader's `held` (see [`held_at`]): the levels
/// below it that take the one-way form come first.
fn held_range(view: &View, len: usize, i: usize) -> std::ops::Range<usize> {
    let start = held_below(view, len, i);
    start..start + held_at(len, i)
}

/// What the leader of the groups `view.levels[..i]` keeps of them (see [`held_at`]).
fn held_below(view: &View, len: usize, i: usize) -> usize {
    (0..i)
        .filter(|&j| form(view, len, j) == Form::OneWay)
        .map(|j| held_at(len, j))
        .sum()
}

/// Whether the total of the ranks in `ranks` (consecutive and sorted) is wanted by
/// anyone: only where some rank comes after them (the last ranks' total enters nobody's
/// offset, so the member over them sends nothing up).
pub(crate) fn wanted(ranks: Option<&[u32]>, size: u32) -> bool {
    ranks.and_then(<[u32]>::last) != Some(&(size - 1))
}
/// The hierarchical form (see the module's doc): leaves this rank's offset in `off`
/// (`None` at rank 0, which has none), and does what `last` asks where it applies;
/// returns whether it did (the Scan's result is then complete). `sub` tells which
/// members' totals anyone wants; `tot` and `tmp` are scratch of `x`'s length, `held` of
/// the sum of [`held_range`]s of the groups this rank leads below the top.
#[allow(clippy::too_many_arguments)]
fn up_down(
    view: &View,
    fabric: &mut dyn Fabric,
    spin: u32,
    sub: &Subtrees,
    x: &[u8],
    mut off: Option<&mut [u8]>,
    mut last: Last<'_>,
    tot: &mut [u8],
    tmp: &mut [u8],
    held: &mut [u8],
    op: &dyn Combine,
) -> Result<bool> {
    let n = view.levels.len();
    let len = x.len();
    // The job's top group runs its own exclusive scan; below it, leaders and members.
    let until = below_top(view);
    // A member at the lowest level leads nothing, nor does a top member without levels
    // below the top: their offsets go nowhere but into the result.
    let fold =
        |entry: usize, last: &Last<'_>| matches!(last, Last::Fold) && (entry == 0 || until == 0);
    let mut done = false;
    // Whether `tot` holds the total of the ranks under this one; until something is
    // added, the total is `x` itself (not copied).
    let mut added = false;
    // Up: the level where this rank is a member, not the leader (`n` where it leads
    // every group below the top).
    let mut entry = n;
    for (i, l) in view.levels[..until].iter().enumerate() {
        let t = fabric.level(i);
        let k = l.members.len();
        if l.me != 0 {
            // Everything under the group before this rank's subtree.
            let out = off.as_deref_mut().expect("a member has an offset");
            let leader = l.members[0];
            let data = if added { &*tot } else { x };
            let sends = wanted(Some(sub.mine()), view.size);
            done = fold(i, &last);
            entry = i;
            let form = form(view, len, i);
            if form == Form::Doubling {
                done = false;
                doubling_in(t, l, x, tot, &mut added, out, tmp, op)?;
                if l.me + 1 == k && sends {
                    // The last member: the group's total (its offset inside the group
                    // and its own total, which its running total still is) to the leader.
                    tmp.copy_from_slice(out);
                    op.combine(tmp, if added { &*tot } else { x });
                    t.send(&[leader], tmp)?;
                }
                if leader != 0 {
                    t.recv_reduce(leader, out, tmp, op)?;
                }
                break;
            }
            if leader == 0 || form == Form::OneWay {
                // The offset whole in one message: at once from rank 0's groups (its
                // offset is empty), from other leaders once they know theirs.
                if leader != 0 && sends {
                    t.send(&[leader], data)?;
                }
                match (leader == 0 && sends, done) {
                    (true, true) => t.sendrecv_onto(leader, data, leader, out, x, tmp, op)?,
                    (true, false) => t.sendrecv(leader, data, leader, out)?,
                    (false, true) => t.recv_reduce_onto(leader, out, x, tmp, op)?,
                    (false, false) => t.recv(leader, out)?,
                }
                break;
            }
            if sends {
                t.sendrecv(leader, data, leader, out)?;
            } else {
                t.recv(leader, out)?;
            }
            // The leader's own offset, sent on its way down; with `fold` the contribution
            // goes in while it comes, and the offset as it arrives.
            if done {
                op.combine(out, x);
                t.recv_reduce(leader, out, tmp, op)?;
            } else {
                t.recv(leader, tmp)?;
                op.combine(out, tmp);
            }
            break;
        }
        let wants_last = wanted(sub.under(i, k - 1), view.size);
        let form = form(view, len, i);
        if form == Form::Doubling {
            // This rank's total to the members 1, 2, 4, ... on (it receives nothing in
            // the scan), then the group's total from the last member.
            let own = if added { &*tot } else { x };
            let mut d = 1;
            while d < k {
                t.send(&[l.members[d]], own)?;
                d *= 2;
            }
            if wants_last {
                t.recv(l.members[k - 1], tot)?;
                added = true;
            }
            continue;
        }
        if view.rank != 0 && form == Form::OneWay {
            // The one member's total comes one way; this rank's own total so far is
            // kept until its offset is known (above level 0: at level 0 it is `x`).
            if i > 0 {
                held[held_range(view, len, i)].copy_from_slice(if added { &*tot } else { x });
            }
            if wants_last {
                t.recv(l.members[1], tmp)?;
                if !added {
                    tot.copy_from_slice(x);
                    added = true;
                }
                op.combine(tot, tmp);
            }
            continue;
        }
        for (j, &m) in l.members.iter().enumerate().skip(1) {
            let data = if added { &*tot } else { x };
            if j + 1 == k && !wants_last {
                t.send(&[m], data)?;
            } else if added {
                t.sendrecv(m, tot, m, tmp)?;
                op.combine(tot, tmp);
            } else {
                t.sendrecv_onto(m, x, m, tot, x, tmp, op)?;
                added = true;
            }
        }
    }
    if entry == n && until < n {
        // The top group: an exclusive scan of the members' totals.
        entry = until;
        let l = &view.levels[until];
        let t = fabric.level(until);
        let (k, me) = (l.members.len(), l.me);
        // Inside a node only: across the network, the extra polling of a nonblocking
        // transfer costs more than the copy it hides (2 emulated nodes x 2, calls back to
        // back: 2.2-2.7 x Open MPI's time against 1.3-1.7 x blocking).
        let polled = l.intra;
        let mut have = false;
        let mut d = 1;
        while d < k {
            let to = (me + d < k).then(|| l.members[me + d]);
            let Some(from) = (me >= d).then(|| l.members[me - d]) else {
                if let Some(to) = to {
                    let data = if added { &*tot } else { x };
                    if polled && me == 0 && 2 * d >= k {
                        // The first member's last message goes as a nonblocking
                        // transfer (its receiver knows it), so that rank 0's result is
                        // copied while it goes.
                        let copy = match &mut last {
                            Last::Copy(dst) => Some((&mut **dst, x)),
                            _ => None,
                        };
                        done = copy.is_some();
                        send_copying(t, spin, to, data, copy)?;
                    } else {
                        t.send(&[to], data)?;
                    }
                }
                d *= 2;
                continue;
            };
            // The first message lands in the offset itself, later ones are added to it.
            let out = off.as_deref_mut().expect("a member has an offset");
            let data = if added { &*tot } else { x };
            if polled && me == d && 2 * d >= k {
                // The first member's last message, a nonblocking transfer (above); no
                // rank comes after this one at this distance (`to` is none).
                let folding = fold(entry, &last);
                if folding && !have && out.len() >= PLAIN_LAST_FROM {
                    // Received as it is, then the contribution combined onto it.
                    recv_polled(t, spin, from, out, None)?;
                    op.combine(out, x);
                    done = true;
                    break;
                }
                if folding {
                    if have {
                        op.combine(out, x);
                    } else {
                        out.copy_from_slice(x);
                    }
                }
                recv_polled(t, spin, from, out, (have || folding).then_some(op))?;
                done = folding;
                break;
            }
            if 2 * d >= k && fold(entry, &last) {
                // The last message, needed for the result only: combined onto the
                // contribution (and what came before) as it arrives.
                done = true;
                match (to, have) {
                    (Some(to), false) => t.sendrecv_onto(to, data, from, out, x, tmp, op)?,
                    // The contribution is copied while the message is on its way.
                    (None, false) => {
                        out.copy_from_slice(x);
                        t.recv_reduce(from, out, tmp, op)?;
                    }
                    (to, true) => {
                        op.combine(out, x);
                        match to {
                            Some(to) => {
                                t.sendrecv(to, data, from, tmp)?;
                                op.combine(out, tmp);
                            }
                            None => t.recv_reduce(from, out, tmp, op)?,
                        }
                    }
                }
                break;
            }
            let dst: &mut [u8] = if have { &mut *tmp } else { &mut *out };
            match to {
                Some(to) => t.sendrecv(to, data, from, dst)?,
                None => t.recv(from, dst)?,
            }
            // `tot` is sent no more after the last round.
            take_in(out, tmp, &mut have, 2 * d < k, tot, &mut added, x, op);
            d *= 2;
        }
    }
    // Down: the offset to the members of every group this rank leads, the farthest
    // first.
    if let Some(out) = off {
        for i in (0..entry.min(until)).rev() {
            let l = &view.levels[i];
            let t = fabric.level(i);
            if form(view, len, i) != Form::OneWay {
                // The members have the rest from the exchange on the way up.
                t.send(&l.members[1..], out)?;
                continue;
            }
            // The member's whole offset: this rank's and its own subtree's below the
            // level.
            tmp.copy_from_slice(out);
            op.combine(
                tmp,
                if i > 0 {
                    &held[held_range(view, len, i)]
                } else {
                    x
                },
            );
            t.send(&l.members[1..], tmp)?;
        }
    }
    Ok(done)
}

/// The exclusive scan of the members' totals among the members of group `l` (not its
/// leader, which only sends) by recursive doubling over `t`: in the round of distance
/// `d`, each member sends the total of the members it has heard of (itself and up to
/// `2d - 1` before it) to the member `d` on, and adds the one from the member `d` back to
/// its prefix. This member's total is `tot` if `added`, else `x`; the running total
/// grows in `tot` (`x` copied there first), so `tot` no longer holds the member's own
/// total after, but in the last member, whose running total never grows. Leaves the
/// prefix in `out` (every member hears from the one before it).
#[allow(clippy::too_many_arguments)]
fn doubling_in(
    t: &mut dyn Transport,
    l: &crate::view::Level,
    x: &[u8],
    tot: &mut [u8],
    added: &mut bool,
    out: &mut [u8],
    tmp: &mut [u8],
    op: &dyn Combine,
) -> Result<()> {
    let (k, me) = (l.members.len(), l.me);
    let mut have = false;
    let mut d = 1;
    while d < k {
        let to = (me + d < k).then(|| l.members[me + d]);
        let from = (me >= d).then(|| l.members[me - d]);
        let data: &[u8] = if *added { &*tot } else { x };
        let dst: &mut [u8] = if have { &mut *tmp } else { &mut *out };
        match (to, from) {
            (Some(to), Some(from)) => t.sendrecv(to, data, from, dst)?,
            (Some(to), None) => t.send(&[to], data)?,
            (None, Some(from)) => t.recv(from, dst)?,
            (None, None) => {}
        }
        if from.is_some() {
            // The running total is sent no more once no member lies that far on.
            take_in(out, tmp, &mut have, me + 2 * d < k, tot, added, x, op);
        }
        d *= 2;
    }
    Ok(())
}

/// What a round of recursive doubling does with the message it received (into `out` the
/// first time, `have` false, into `tmp` after): adds it to the offset, and if `grow` (the
/// running total goes out again in a later round) to the running total, `tot` if
/// `added`, else `x` copied into `tot` first.
#[allow(clippy::too_many_arguments)]
fn take_in(
    out: &mut [u8],
    tmp: &[u8],
    have: &mut bool,
    grow: bool,
    tot: &mut [u8],
    added: &mut bool,
    x: &[u8],
    op: &dyn Combine,
) {
    let incoming: &[u8] = if *have {
        op.combine(out, tmp);
        tmp
    } else {
        *have = true;
        out
    };
    if grow {
        if !*added {
            tot.copy_from_slice(x);
            *added = true;
        }
        op.combine(tot, incoming);
    }
}

/// From this many bytes, the member after the first of a group of two receives the first
/// one's last message as it is and combines its contribution onto it after, instead of
/// copying its contribution first and combining the message onto it as it comes: where
/// the message comes by single copy (32 KiB and more between ranks that share a cache by
/// default), one read straight into place and one pass of the operation beat a read into
/// scratch a piece at a time with a pass over each piece. On 1 node x 2 (`coll-bench --ops
/// scan --min 32768 --max 4194304`, both builds in turn, two rounds each) Scan of 32 KiB-4
/// MiB took 0.50-0.71 x Open MPI's time, where it took 0.62-1.02 before (0.93-1.02 from
/// 512 KiB); from 2 to 16 KiB, where the message comes through the queues, the two were
/// alike.
pub const PLAIN_LAST_FROM: usize = 32 << 10;

/// Receives the message that [`send_copying`] sends from `from` into `buf`, combined
/// into it with `op` if given.
fn recv_polled(
    t: &mut dyn Transport,
    spin: u32,
    from: u32,
    buf: &mut [u8],
    op: Option<&dyn Combine>,
) -> Result<()> {
    let mut transfer = Transfer::default();
    let mut backoff = Backoff::new(spin);
    while !t.poll_recv(&mut transfer, from, buf, op)? {
        if backoff.pause() {
            t.check_peer(from)?;
        }
    }
    Ok(())
}

/// Sends `data` to `to` over `t` as a nonblocking transfer, and copies `copy`'s source
/// into its destination a piece at a time while the transfer waits on its receiver (the
/// queues full, or the receiver reading by single copy); what is left of the copy after
/// the transfer is done then.
fn send_copying(
    t: &mut dyn Transport,
    spin: u32,
    to: u32,
    data: &[u8],
    copy: Option<(&mut [u8], &[u8])>,
) -> Result<()> {
    /// The piece copied between two polls of the transfer.
    const PIECE: usize = 8 << 10;
    let (dst, src) = copy.unwrap_or((&mut [], &[]));
    let mut pieces = dst.chunks_mut(PIECE).zip(src.chunks(PIECE));
    let mut transfer = Transfer::default();
    let mut backoff = Backoff::new(spin);
    while !t.poll_send(&mut transfer, &[to], data)? {
        if let Some((d, s)) = pieces.next() {
            d.copy_from_slice(s);
        } else if backoff.pause() {
            t.check_peer(to)?;
        }
    }
    pieces.for_each(|(d, s)| d.copy_from_slice(s));
    Ok(())
}

/// Recursive doubling over every rank in rank order (any placement; MPICH's Scan): in the
/// round of distance `d`, each rank sends the total of the ranks it has heard of (itself
/// and the `2d - 1` before it, or fewer) to the rank `d` on, and adds the one from the
/// rank `d` back to its offset and its total; `ceil(log2 size)` rounds. The operation
/// commutes, so the order of the additions does not matter. `tot` and `tmp` are scratch
/// of `x`'s length; the transfers of a round are in flight at once, each over the link
/// that reaches its peer.
#[allow(clippy::too_many_arguments)]
fn doubling(
    view: &View,
    fabric: &mut dyn Fabric,
    spin: u32,
    x: &[u8],
    mut off: Option<&mut [u8]>,
    tot: &mut [u8],
    tmp: &mut [u8],
    op: &dyn Combine,
) -> Result<()> {
    let (n, me) = (view.size, view.rank);
    // Whether `tot` holds more than `x` (until then `x` goes out as it is), and whether
    // the offset holds something yet (the first message lands in it).
    let (mut added, mut have) = (false, false);
    let mut d = 1;
    while d < n {
        let to = (me + d < n).then_some(me + d);
        let from = me.checked_sub(d);
        let data: &[u8] = if added { tot } else { x };
        let sends: Vec<(u32, &[u8])> = to.map(|t| (t, data)).into_iter().collect();
        match from {
            None => alltoall::exchange(fabric, spin, None, &sends, &mut [])?,
            Some(from) => {
                let out = off
                    .as_deref_mut()
                    .expect("a rank after rank 0 has an offset");
                let dst: &mut [u8] = if have { &mut *tmp } else { &mut *out };
                alltoall::exchange(fabric, spin, None, &sends, &mut [(from, dst)])?;
                // `tot` is sent no more after the last round.
                take_in(out, tmp, &mut have, 2 * d < n, tot, &mut added, x, op);
            }
        }
        d *= 2;
    }
    Ok(())
}
