//! Which ranks lie under each member of a rank's groups: what a leader must receive from a
//! member in a Gather, and send to it in a Scatter, so that each such transfer is one
//! message whose length both ends know.
//!
//! A rank's plan lists only its own groups, so a leader cannot tell from its view which
//! ranks a member leads below. [`Subtrees::learn`] finds out once per context (collective
//! over it): every rank sends the ranks it holds up the hierarchy as the Allgather's first
//! part sends blocks (each member to its group's leader, level by level, until it stops
//! leading), and the members of the job's top group send theirs to each other, since any
//! of them can be a Gather's or Scatter's root there. Each leader keeps, per level it
//! leads, the sorted ranks under each member; each rank keeps the ranks under itself.
//! Then every leader tells its members which member of the top group they are under, so
//! that a root below the top group knows where its result comes from (or its blocks go).
//!
//! The traffic is that of one Allgather of empty blocks and one small Broadcast, once: a
//! context keeps what it learned for its whole life.

use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::transport::{Fabric, Transfer, Transport};
use crate::view::View;

/// The ranks under each member of the groups where this rank receives from or sends to
/// several members (see the module's doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subtrees {
    /// `levels[i]`: for each member of `view.levels[i]`, the sorted ranks under it (the
    /// member included), where this rank leads the group or is in the top group; `None`
    /// at the other levels.
    levels: Vec<Option<Vec<Vec<u32>>>>,
    /// The ranks under this rank, sorted (this rank included): those it holds once every
    /// group it leads below the top has been gathered.
    mine: Vec<u32>,
    /// The level where this rank hands its ranks on (to its leader, or in the top group),
    /// or the number of levels where it does not (a rank that leads every group it has
    /// below a job without a top group: rank 0).
    entry: usize,
    /// The member of the top group this rank is under (itself if it is one; rank 0 in a
    /// job without a top group).
    top: u32,
}

/// The levels a Gather or Scatter climbs: all of them but the top group, which
/// [`Subtrees`] and the collectives treat as one step among all its members.
pub(crate) fn below_top(view: &View) -> usize {
    let n = view.levels.len();
    if n > 0 && view.is_top(n - 1) {
        n - 1
    } else {
        n
    }
}

impl Subtrees {
    /// Learns the ranks under each member (collective over the context, see the module's
    /// doc).
    pub fn learn(view: &View, fabric: &mut dyn Fabric) -> Result<Subtrees> {
        let size = view.size as usize;
        let n = view.levels.len();
        let until = below_top(view);
        let mut levels: Vec<Option<Vec<Vec<u32>>>> = vec![None; n];
        let mut held = vec![view.rank];
        let mut entry = n;
        for (i, l) in view.levels[..until].iter().enumerate() {
            let t = fabric.level(i);
            if l.me != 0 {
                send_ranks(t, l.members[0], &held)?;
                entry = i;
                break;
            }
            let mut per = vec![sorted(&held)];
            for &m in &l.members[1..] {
                let theirs = recv_ranks(t, m, size)?;
                held.extend_from_slice(&theirs);
                per.push(sorted(&theirs));
            }
            levels[i] = Some(per);
        }
        if entry == n && until < n {
            entry = until;
            let l = &view.levels[until];
            let t = fabric.level(until);
            let k = l.members.len();
            let mut per = vec![Vec::new(); k];
            per[l.me] = sorted(&held);
            // Round d: to the member d places on, from the one d places back; everyone's
            // ranks reach everyone in k - 1 rounds.
            for d in 1..k {
                let (to, from) = (l.members[(l.me + d) % k], (l.me + k - d) % k);
                per[from] = swap_ranks(t, to, &held, l.members[from], size)?;
                per[from].sort_unstable();
            }
            levels[until] = Some(per);
        }
        // Down: each leader tells its members which top member they are under.
        let mut top = view.rank;
        if entry < until {
            let mut b = [0u8; 4];
            fabric
                .level(entry)
                .recv(view.levels[entry].members[0], &mut b)?;
            top = u32::from_le_bytes(b);
            if top as usize >= size {
                return Err(bad(view.levels[entry].members[0], format!("rank {top}")));
            }
        }
        for i in (0..entry.min(until)).rev() {
            let l = &view.levels[i];
            fabric.level(i).send(&l.members[1..], &top.to_le_bytes())?;
        }
        Ok(Subtrees {
            levels,
            mine: sorted(&held),
            entry,
            top,
        })
    }

    /// What every rank of a job learns ([`Subtrees::learn`]), worked out from all their
    /// views at once (`views[r]` is rank r's), without any message: for tools that hold
    /// every rank's view, as `topo-run simulate` does to record the blocking collectives
    /// that use it.
    pub fn of_job(views: &[View]) -> Vec<Subtrees> {
        let mut out: Vec<Option<Subtrees>> = vec![None; views.len()];
        for r in 0..views.len() {
            climb(views, r, &mut out);
        }
        // The top group's members know each other's ranks.
        for (r, v) in views.iter().enumerate() {
            let until = below_top(v);
            let entry = out[r].as_ref().map_or(until, |t| t.entry);
            if entry == until && until < v.levels.len() {
                let per = v.levels[until]
                    .members
                    .iter()
                    .map(|&m| {
                        out[m as usize]
                            .as_ref()
                            .map_or(Vec::new(), |t| t.mine.clone())
                    })
                    .collect();
                if let Some(t) = &mut out[r] {
                    t.levels[until] = Some(per);
                }
            }
        }
        // Down: the member of the top group each rank is under, from its leader's.
        let mut top: Vec<Option<u32>> = vec![None; views.len()];
        for r in 0..views.len() {
            top_of(views, r, &out, &mut top);
        }
        out.into_iter()
            .zip(top)
            .map(|(t, top)| {
                let mut t = t.expect("every rank climbed");
                t.top = top.expect("every rank's top found");
                t
            })
            .collect()
    }

    /// The position in the top group (`view.levels[i]`, `i` the top group's level) of the
    /// member that `rank` is under, where this rank is in the top group.
    pub fn over(&self, i: usize, rank: u32) -> Option<usize> {
        let per = self.levels.get(i)?.as_ref()?;
        per.iter().position(|r| r.binary_search(&rank).is_ok())
    }

    /// The member of the top group this rank is under (itself if it is one).
    pub fn top(&self) -> u32 {
        self.top
    }

    /// The sorted ranks under member `p` of level `i`, where this rank knows them.
    pub fn under(&self, i: usize, p: usize) -> Option<&[u32]> {
        self.levels.get(i)?.as_ref()?.get(p).map(Vec::as_slice)
    }

    /// Whether, in every group this rank knows the members' ranks of (those it leads, and
    /// the top group), the ranks under the members are consecutive ranks, one member's
    /// after another's in the members' order: what [`crate::scan`]'s hierarchical form
    /// needs of every group.
    pub fn consecutive(&self) -> bool {
        self.levels.iter().flatten().all(|per| {
            let mut ranks = per.iter().flatten();
            let first = ranks.next().copied();
            ranks
                .try_fold(first, |prev, &r| {
                    (prev.map(|p| p + 1) == Some(r)).then_some(Some(r))
                })
                .is_some()
        })
    }

    /// The sorted ranks under this rank (itself included).
    pub fn mine(&self) -> &[u32] {
        &self.mine
    }

    /// The level where this rank hands its ranks on: to its leader there, or in the top
    /// group (then the top group's level); the number of levels for a rank that does not.
    pub fn entry(&self) -> usize {
        self.entry
    }
}

/// [`Subtrees::of_job`]'s way up for rank `r`: the ranks under it and under the members
/// of the groups it leads below the top (the top group's part and `top` are filled in
/// after), worked out first for the members it receives from.
fn climb(views: &[View], r: usize, out: &mut [Option<Subtrees>]) {
    if out[r].is_some() {
        return;
    }
    let v = &views[r];
    let until = below_top(v);
    let entry = v.levels[..until]
        .iter()
        .position(|l| l.me != 0)
        .unwrap_or(until);
    let mut levels: Vec<Option<Vec<Vec<u32>>>> = vec![None; v.levels.len()];
    let mut held = vec![v.rank];
    for (i, l) in v.levels[..entry].iter().enumerate() {
        let mut per = vec![sorted(&held)];
        for &m in &l.members[1..] {
            climb(views, m as usize, out);
            let theirs = out[m as usize].as_ref().map_or(&[][..], |t| &t.mine[..]);
            held.extend_from_slice(theirs);
            per.push(theirs.to_vec());
        }
        levels[i] = Some(per);
    }
    out[r] = Some(Subtrees {
        levels,
        mine: sorted(&held),
        entry,
        top: v.rank,
    });
}

/// [`Subtrees::of_job`]'s way down for rank `r`: the member of the top group it is under
/// (its leader's, where it hands its ranks on below the top; itself otherwise).
fn top_of(views: &[View], r: usize, out: &[Option<Subtrees>], top: &mut [Option<u32>]) -> u32 {
    if let Some(t) = top[r] {
        return t;
    }
    let v = &views[r];
    let entry = out[r].as_ref().map_or(0, |t| t.entry);
    let t = if entry < below_top(v) {
        top_of(views, v.levels[entry].members[0] as usize, out, top)
    } else {
        v.rank
    };
    top[r] = Some(t);
    t
}

fn sorted(ranks: &[u32]) -> Vec<u32> {
    let mut v = ranks.to_vec();
    v.sort_unstable();
    v
}

fn rank_bytes(ranks: &[u32]) -> Vec<u8> {
    ranks.iter().flat_map(|r| r.to_le_bytes()).collect()
}

fn send_ranks(t: &mut dyn Transport, to: u32, ranks: &[u32]) -> Result<()> {
    t.send(&[to], &(ranks.len() as u32).to_le_bytes())?;
    t.send(&[to], &rank_bytes(ranks))
}

fn recv_ranks(t: &mut dyn Transport, from: u32, size: usize) -> Result<Vec<u32>> {
    let mut count = [0u8; 4];
    t.recv(from, &mut count)?;
    let count = checked_count(from, count, size)?;
    let mut bytes = vec![0u8; 4 * count];
    t.recv(from, &mut bytes)?;
    checked_ranks(from, &bytes, size)
}

fn swap_ranks(
    t: &mut dyn Transport,
    to: u32,
    ranks: &[u32],
    from: u32,
    size: usize,
) -> Result<Vec<u32>> {
    let mut count = [0u8; 4];
    t.sendrecv(to, &(ranks.len() as u32).to_le_bytes(), from, &mut count)?;
    let count = checked_count(from, count, size)?;
    let mut bytes = vec![0u8; 4 * count];
    t.sendrecv(to, &rank_bytes(ranks), from, &mut bytes)?;
    checked_ranks(from, &bytes, size)
}

fn checked_count(from: u32, count: [u8; 4], size: usize) -> Result<usize> {
    let count = u32::from_le_bytes(count) as usize;
    if count == 0 || count > size {
        return Err(bad(from, format!("{count} ranks")));
    }
    Ok(count)
}

fn checked_ranks(from: u32, bytes: &[u8], size: usize) -> Result<Vec<u32>> {
    bytes
        .chunks_exact(4)
        .map(|b| {
            let r = u32::from_le_bytes(b.try_into().expect("4 bytes"));
            if r as usize >= size {
                return Err(bad(from, format!("rank {r}")));
            }
            Ok(r)
        })
        .collect()
}

fn bad(from: u32, what: String) -> Error {
    Error::Mismatch {
        reason: format!(
            "rank {from} sent {what} while the ranks learned the hierarchy for a gather or \
             scatter; the ranks called different collectives"
        ),
    }
}

/// Where each rank's block lies in a buffer of every rank's blocks in rank order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocks<'a> {
    /// Every block of this many bytes, rank r's at `r * len`.
    Same(usize),
    /// Rank r's block at `ends[r - 1]..ends[r]` (rank 0's from 0): blocks of any lengths,
    /// one after another.
    Ends(&'a [usize]),
}

impl Blocks<'_> {
    /// Rank `r`'s block.
    pub fn at(&self, r: u32) -> std::ops::Range<usize> {
        let r = r as usize;
        match *self {
            Blocks::Same(len) => r * len..(r + 1) * len,
            Blocks::Ends(ends) => r.checked_sub(1).map_or(0, |q| ends[q])..ends[r],
        }
    }

    /// The bytes of the blocks of `ranks`.
    fn bytes(&self, ranks: &[u32]) -> usize {
        ranks.iter().map(|&r| self.at(r).len()).sum()
    }
}

/// The byte range of the blocks of `ranks` (sorted) in a buffer laid out as `blocks`, if
/// they are consecutive ranks: then a transfer of them goes straight from or into place.
pub(crate) fn run_of(ranks: &[u32], blocks: Blocks) -> Option<std::ops::Range<usize>> {
    let (&first, &last) = (ranks.first()?, ranks.last()?);
    (last as usize - first as usize + 1 == ranks.len())
        .then(|| blocks.at(first).start..blocks.at(last).end)
}

/// The blocks of `ranks` (sorted) out of `all` (laid out as `blocks`), one after another.
pub(crate) fn pack(ranks: &[u32], all: &[u8], blocks: Blocks) -> Vec<u8> {
    let mut out = Vec::with_capacity(blocks.bytes(ranks));
    for &r in ranks {
        out.extend_from_slice(&all[blocks.at(r)]);
    }
    out
}

/// Puts the blocks of `ranks` (sorted), one after another in `packed`, at their places in
/// `all` (laid out as `blocks`).
pub(crate) fn unpack(ranks: &[u32], packed: &[u8], all: &mut [u8], blocks: Blocks) {
    let mut at = 0;
    for &r in ranks {
        let place = blocks.at(r);
        let n = place.len();
        all[place].copy_from_slice(&packed[at..at + n]);
        at += n;
    }
}

/// The largest message a Gather or Scatter sends between nodes: the blocks of a node go
/// in pieces of this size at most. Over Open MPI's TCP transport a message above its
/// eager limit (64 KiB) waits for the receiver's answer first; on 2 emulated nodes x 2,
/// Scatter of 32 KiB blocks took 2.4-2.6 x Open MPI's (which sends each block alone,
/// eagerly) with the node's two blocks in one message.
pub const NETWORK_PIECE: usize = 32 << 10;

/// The largest message a transfer over `view.levels[i]` sends: [`NETWORK_PIECE`] between
/// nodes, anything inside one.
pub(crate) fn piece_for(view: &View, i: usize) -> usize {
    if view.levels[i].intra {
        usize::MAX
    } else {
        NETWORK_PIECE
    }
}

/// Sends the blocks of `ranks` (sorted) out of `all` (laid out as `blocks`) to `to`:
/// straight from their place if they are consecutive, else packed in rank order; in
/// messages of `piece` bytes at most.
pub(crate) fn send_blocks(
    t: &mut dyn Transport,
    to: u32,
    ranks: &[u32],
    all: &[u8],
    blocks: Blocks,
    piece: usize,
) -> Result<()> {
    let packed;
    let bytes = match run_of(ranks, blocks) {
        Some(run) => &all[run],
        None => {
            packed = pack(ranks, all, blocks);
            &packed[..]
        }
    };
    for p in bytes.chunks(piece) {
        t.send(&[to], p)?;
    }
    Ok(())
}

/// Receives the blocks of `ranks` (sorted) from `from` into their places in `all` (laid
/// out as `blocks`), as [`send_blocks`] sends them.
pub(crate) fn recv_blocks(
    t: &mut dyn Transport,
    from: u32,
    ranks: &[u32],
    all: &mut [u8],
    blocks: Blocks,
    piece: usize,
) -> Result<()> {
    match run_of(ranks, blocks) {
        Some(run) => {
            // (No bytes, no message: the sender sends none either.)
            for p in all[run].chunks_mut(piece) {
                t.recv(from, p)?;
            }
        }
        None => {
            let mut packed = vec![0u8; blocks.bytes(ranks)];
            for p in packed.chunks_mut(piece) {
                t.recv(from, p)?;
            }
            unpack(ranks, &packed, all, blocks);
        }
    }
    Ok(())
}

/// A Gather's blocks of at least this many bytes go straight from each rank to the root
/// (over the link that reaches it: shared memory inside the node, MPI across), all at
/// once, rather than through the node leaders: the bytes cross the network either way, a
/// leader would hold a node's blocks back until all have arrived, and the root would copy
/// them out of each node's message where the node's ranks are not consecutive. On 2
/// emulated nodes x 2 (`NODES=2 bash benchmarks/components.sh 1 --ops gather,scatter
/// --max 262144`, two rounds each way) the direct form took 0.70-1.01 x the best of Open
/// MPI's components from 64 B to 16 KiB blocks and 0.54-0.83 from 64 to 256 KiB, where the
/// leaders' took 0.78-1.14 and 0.68-1.06; `topo-run simulate` predicts it at the linear
/// form's time from 64 B on 16 and 128 nodes x 32 (the leaders' form 1.01-1.89 x from 128 B,
/// most with cyclic placement, and 1.08 / 1.35 on 16 x 32 at 64 B, though 0.89 on 128 x 32
/// block there). Smaller blocks gain from one message per node (8 B on 16 x 32: 0.62 of
/// the linear form).
pub const GATHER_DIRECT_BLOCK: usize = 64;

/// A Scatter's blocks of at least this many bytes go straight from the root to each rank
/// (as [`GATHER_DIRECT_BLOCK`]): from there a block's time on the network outweighs a
/// message's overhead, and the leaders' form only adds its last node's distribution after
/// the root's interface has sent everything. `topo-run simulate` (`bash
/// benchmarks/simulate-scale.sh --nodes 2,4,16,128 --rpn 2,32 --placements block,cyclic
/// --ops scatter`) has the direct form at 1.000-1.04 of the best flat algorithm from 2 KiB
/// on jobs of 4 nodes and more, where the leaders' took 1.01-1.86 (1.15-1.59 on 16 x 32);
/// with LogP's per-message overheads in the model (`--models logp`) the leaders' form is
/// the faster below about 2 KiB (0.76-0.97 of the best flat on 16 x 32, where the direct
/// form's root pays an overhead per rank: 1.1-12 x) and the direct form from there. On 2
/// emulated nodes x 2 (`NODES=2 bash benchmarks/components.sh 1 --ops scatter --max
/// 131072`, two rounds each) the direct form took 0.75-1.46 x the best component from 2 to
/// 128 KiB, the leaders' 0.72-1.67 (and one 78 x outlier); below 2 KiB the leaders' took
/// 0.60-1.00, the direct one 0.90-1.20, 1.01-1.07 in the jobs beside Open MPI's han.
pub const SCATTER_DIRECT_BLOCK: usize = 2 << 10;

/// Whether a Gather (`gather`) or Scatter of `len`-byte blocks in a job on `nodes` nodes
/// (`Settings::nodes`, the same on every rank) goes straight between the root and each
/// rank ([`GATHER_DIRECT_BLOCK`], [`SCATTER_DIRECT_BLOCK`], on one node a Scatter's
/// [`ONE_NODE_SCATTER_DIRECT_BLOCK`]): the same answer on every rank.
pub fn direct(gather: bool, nodes: u32, len: usize) -> bool {
    match (gather, nodes > 1) {
        (true, true) => len >= GATHER_DIRECT_BLOCK,
        (false, true) => len >= SCATTER_DIRECT_BLOCK,
        (true, false) => false,
        (false, false) => len >= ONE_NODE_SCATTER_DIRECT_BLOCK,
    }
}

/// On one node, a Scatter's blocks of at least this many bytes go straight from the root
/// to each rank, all at once, the root copying its own block while the others read theirs
/// (by single copy, each on its own core) where the leaders' form sends to its members one
/// after another and copies its own block last. On 1 node x 2 (`coll-bench --ops
/// scatter,scatterv --min 4096 --max 4194304 --chain`, the build before and this one in
/// turn, two rounds) Scatter and Scatterv of 32 KiB-4 MiB went from 0.96-1.16 x Open MPI's
/// time to 0.78-0.91; below 16 KiB a block is a queue fragment and the two forms are one.
pub const ONE_NODE_SCATTER_DIRECT_BLOCK: usize = 16 << 10;

/// On one node, a Gather's blocks of at least this many bytes go straight from every rank
/// into the root's buffer, written by their ranks ([`Transport::write_into`], from the
/// single-copy threshold): the root copies its own block meanwhile instead
/// of reading every block itself after it. On 1 node x 2 (`coll-bench --ops
/// gather,gatherv --min 65536 --max 4194304`, the build before and this one in turn, two
/// rounds) Gather of 128 KiB-4 MiB went from 1.01-1.19 x Open MPI's time to 0.75-1.04 in
/// each side's own loop and from 0.81-1.00 to 0.62-0.85 back to back.
pub const ONE_NODE_GATHER_WRITTEN_BLOCK: usize = 16 << 10;

/// The root's side of a Gather or Gatherv on one node whose ranks write their blocks
/// straight into its buffer ([`Transport::write_into`]): lends each rank its place in
/// `parts` (rank, place), runs `meanwhile` (the root's own copy, and receives of blocks
/// that come as plain messages), then waits for every block. A rank whose block does not
/// go by single copy sends it as a plain message, which the wait receives.
pub(crate) fn lent_to_root(
    fabric: &mut dyn Fabric,
    parts: &mut [(u32, &mut [u8])],
    meanwhile: impl FnOnce(&mut dyn Fabric) -> Result<()>,
) -> Result<()> {
    for (r, part) in parts.iter_mut() {
        fabric.peer(*r).lend(*r, part)?;
    }
    meanwhile(fabric)?;
    for (r, part) in parts.iter_mut() {
        fabric.peer(*r).wait_lent(*r, part)?;
    }
    Ok(())
}

/// Whether a block of `len` bytes of a Gather or Gatherv on one node is written by its
/// rank into the root's buffer ([`Transport::write_into`]): the same answer at both ends.
pub fn written(len: usize) -> bool {
    len >= ONE_NODE_GATHER_WRITTEN_BLOCK
}

/// A rank's side of a direct Gather or Scatter: its one transfer with the root, made
/// through the same nonblocking calls as the root's side ([`root_exchange`]), which over
/// MPI carry a tag of their own. `step(link, transfer)` makes the progress it can and
/// says whether the transfer has completed; `sends` says whether it is a send
/// ([`tests_at_once`]).
pub(crate) fn with_root(
    fabric: &mut dyn Fabric,
    spin: u32,
    root: u32,
    sends: bool,
    mut step: impl FnMut(&mut dyn Transport, &mut Transfer) -> Result<bool>,
) -> Result<()> {
    let mut t = Transfer::default();
    let mut backoff = Backoff::new(spin);
    let mut first = tests_at_once(sends);
    while !step(fabric.peer(root), &mut t)? {
        if !std::mem::take(&mut first) && backoff.pause() {
            fabric.peer(root).check_peer(root)?;
        }
    }
    Ok(())
}

/// Whether a blocking wait over transfers it has just posted polls them a second time
/// before its first pause: where some are sends. The first poll over MPI only posts a
/// transfer (`Transport::posts_ahead`), and a small send is complete at the second, so the
/// rank leaves without pausing; with `--spin 0` a pause yields the core, which cost every
/// rank of a direct Gather(v) of 4 B-4 KiB on 2 emulated nodes x 2 back to back 2.7 us
/// of its 15.3. A wait over receives alone pauses first: their messages are rarely there
/// yet, and the yield lends the core to a rank that may be the one to send them (a
/// Scatterv of 4 B-2 KiB after han's barrier took 1.35-1.48 x the best component when its
/// receivers tested at once, against at most 1.11 when they paused).
pub(crate) fn tests_at_once(sends: bool) -> bool {
    sends
}

/// The root's side of a direct Gather or Scatter: one transfer with every other rank,
/// all in flight at once over the links that reach them, until every one has completed.
/// `step(link, r, transfer)` makes the progress it can on rank `r`'s transfer and says
/// whether it has completed; `sends` says whether the transfers are sends
/// ([`tests_at_once`]). `meanwhile`, if any, runs once, after the first round has posted
/// every transfer: the root's copy of its own block, made while the others' move (a
/// reader of a single-copy send copies on its own core at the same time).
pub(crate) fn root_exchange(
    view: &View,
    fabric: &mut dyn Fabric,
    spin: u32,
    sends: bool,
    mut step: impl FnMut(&mut dyn Transport, u32, &mut Transfer) -> Result<bool>,
    mut meanwhile: Option<impl FnOnce()>,
) -> Result<()> {
    let mut open: Vec<(u32, Transfer)> = (0..view.size)
        .filter(|&r| r != view.rank)
        .map(|r| (r, Transfer::default()))
        .collect();
    let mut backoff = Backoff::new(spin);
    let mut first = tests_at_once(sends);
    while !open.is_empty() {
        let before = open.len();
        let mut i = 0;
        while i < open.len() {
            let (r, t) = &mut open[i];
            if step(fabric.peer(*r), *r, t)? {
                open.swap_remove(i);
            } else {
                i += 1;
            }
        }
        if let Some(m) = meanwhile.take() {
            m();
        }
        let posted = std::mem::take(&mut first);
        if open.len() == before && !posted && backoff.pause() {
            for (r, _) in &open {
                fabric.peer(*r).check_peer(*r)?;
            }
        }
    }
    // (Every transfer completed in the first round.)
    if let Some(m) = meanwhile.take() {
        m();
    }
    Ok(())
}
