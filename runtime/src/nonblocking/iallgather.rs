//! Iallgather: TopoMPI's remapped recursive doubling ([`crate::allgather::recursive_doubling`])
//! as a schedule; Bruck's exchange, remapped, for any number of ranks ([`build_bruck`]); the
//! ring ([`build_ring`]). Round 0 puts this rank's block at its own place (a copy, unless in place)
//! and exchanges it for the block of rank `position`; round `k + 1` swaps the `2^k` blocks
//! each partner holds. Every transfer goes over the link that reaches the partner directly,
//! and the steps of a round touch disjoint parts of the receive buffer.

use topo_hierarchy::remap::{
    self, BruckPeers, Positions, RdPeers, RingPeers, partition::Placement,
};
use topo_hierarchy::settings::AllgatherAlg;

use super::{Action, Buf, Builder, Link, Region};

/// The ranks' positions in a flat Allgather exchange, worked out once for the whole job:
/// for `rd`, remapped recursive doubling when the job's size is a power of two, else
/// remapped Bruck; for `ring`, the ring's order.
#[derive(Debug, Clone)]
pub enum Order {
    /// Recursive doubling with ranks at these positions; for smaller blocks at others,
    /// where they differ: each with the bytes per rank it runs below, the lowest first
    /// (rank order below [`rd_plain_below`], the order chosen without the switches below
    /// [`SMALL_BLOCK`]).
    RecursiveDoubling(Positions, Vec<(Positions, usize)>),
    /// Bruck's exchange with ranks at these positions; below the second's bytes per rank
    /// ([`bruck_small_below`]) in rank order, where that differs.
    Bruck(Positions, Option<(Positions, usize)>),
    /// The ring in this order.
    Ring(Positions),
}

impl Order {
    /// The order algorithm `alg` runs with on `place`; `None` for the hierarchical form.
    pub fn new(alg: AllgatherAlg, place: &Placement) -> Option<Order> {
        match alg {
            AllgatherAlg::Hierarchical(_) => None,
            AllgatherAlg::Ring => Some(Order::Ring(Positions::new(remap::ring_positions(place)))),
            AllgatherAlg::RecursiveDoubling => Some(match remap::chosen(place) {
                Some(pos) => {
                    // The smallest blocks: rank order, which needs no first exchange
                    // into the positions.
                    let in_rank_order = pos.iter().enumerate().all(|(i, &p)| p as usize == i);
                    let mut smaller = Vec::new();
                    let mut plain_below = 0;
                    if !in_rank_order {
                        plain_below = rd_plain_below(place);
                        if plain_below > 0 {
                            let n = place.node_of().len() as u32;
                            smaller.push(((0..n).collect(), plain_below));
                        }
                    }
                    // Small blocks: the order chosen as if the switches were unknown (it
                    // keeps the heavy steps inside the nodes only, and under cyclic
                    // placement needs no first exchange across the network).
                    // Worked out only where the switches differ: with one switch (or
                    // none known) it is the same order.
                    let switches = place.switch_of();
                    let small = switches
                        .iter()
                        .any(|&s| s != switches[0])
                        .then(|| remap::chosen(&Placement::nodes(place.node_of())))
                        .flatten()
                        .filter(|p| *p != pos);
                    if let Some(small) = small.filter(|_| plain_below < SMALL_BLOCK) {
                        smaller.push((small, SMALL_BLOCK));
                    }
                    let smaller = smaller
                        .into_iter()
                        .map(|(p, below)| (Positions::new(p), below))
                        .collect();
                    Order::RecursiveDoubling(Positions::new(pos), smaller)
                }
                None => {
                    let pos = remap::bruck_chosen(place);
                    let n = place.node_of().len();
                    let small = Some((0..n as u32).collect::<Vec<u32>>())
                        .filter(|p| *p != pos)
                        .map(|p| (Positions::new(p), bruck_small_below(place)));
                    Order::Bruck(Positions::new(pos), small)
                }
            }),
        }
    }

    /// Rank `rank`'s part of it; `None` if `rank` is outside the job.
    pub fn exchange(&self, rank: u32) -> Option<Exchange> {
        match self {
            Order::RecursiveDoubling(pos, smaller) => {
                let smaller = smaller
                    .iter()
                    .map(|(p, below)| Some((p.rd_peers(rank)?, *below)))
                    .collect::<Option<Vec<_>>>()?;
                pos.rd_peers(rank)
                    .map(|peers| Exchange::RecursiveDoubling(peers, smaller))
            }
            Order::Bruck(pos, small) => {
                let small = match small {
                    Some((small, below)) => Some((small.bruck_peers(rank)?, *below)),
                    None => None,
                };
                pos.bruck_peers(rank)
                    .map(|peers| Exchange::Bruck(peers, small))
            }
            Order::Ring(pos) => pos.ring_peers(rank).map(Exchange::Ring),
        }
    }
}

/// Blocks below this many bytes per rank take recursive doubling's order chosen as if the
/// switches were unknown. Where the switches are known the order keeps the heavy steps
/// under one switch, at the price of a first exchange that crosses the network; for small
/// blocks that exchange costs more than it saves. Under cyclic placement with the map
/// (128 and 1,024 nodes x 32, 128 x 128) `topo-run simulate` predicts the switch-aware
/// order at 0.92-1.13 of plain recursive doubling for 8-byte blocks and 0.90-1.03 for
/// 64-byte ones (the upper ends with the network 5 x slower), and at 0.83-0.97 from 256
/// bytes; the order without switches is plain recursive doubling there (1.000).
pub const SMALL_BLOCK: usize = 256;

/// Blocks below this many bytes per rank take recursive doubling in rank order, as MPI
/// libraries run it, where the chosen order differs (block placement): the chosen order
/// starts with an exchange into the positions, across the network, a round of latency
/// more; rank order sends more blocks between nodes (with `h` nodes of `s` ranks, `n` in
/// all, block placement: `n - s` blocks per rank against `h`, through the node's one
/// network interface). So rank order runs while those extra blocks cost less than a round:
/// 32 KiB (about two network latencies' worth of bytes) over the node's extra blocks, `s
/// (n - s - h)`, at most 4 KiB. `topo-run simulate --ops allgather` (2026-12-04,
/// block placement, the map): the chosen order took 1.16-1.25 x the best flat algorithm
/// for 8 and 256-byte blocks on 16 nodes x 2 and 1.16 at 8 B on 128 x 2 and 1.25 on 2 x 32,
/// rank order (plain recursive doubling) 1.000 there.
pub fn rd_plain_below(place: &Placement) -> usize {
    let n = place.node_of().len();
    let (h, s) = nodes_and_per_node(place);
    match n.saturating_sub(s + h) * s {
        0 => RD_PLAIN_MAX,
        extra => (RD_PLAIN_BYTES / extra).min(RD_PLAIN_MAX),
    }
}

/// See [`rd_plain_below`].
const RD_PLAIN_BYTES: usize = 32 << 10;

/// See [`rd_plain_below`].
const RD_PLAIN_MAX: usize = 4 << 10;

/// Blocks below this many bytes per rank take Bruck's exchange in rank order, as MPI
/// libraries run it, rather than in the order chosen to send the fewest blocks between nodes
/// ([`remap::bruck_chosen`]): 12 KiB over the ranks per node to the power 1.5, at least 64
/// bytes, at most 4 KiB. The chosen order keeps the heavy last steps inside the nodes,
/// which leaves a first exchange into the positions and the first steps to cross the
/// network; for small blocks each of those rounds costs a network latency, and the more
/// ranks a node has, the sooner the blocks the chosen order keeps off the network pay for
/// them. `topo-run simulate --ops allgather` on 3-48 nodes x 2-36 ranks, job sizes that
/// are not powers of two, each order forced (2026-12-04): with block placement the chosen
/// order took 1.20-1.68 of the rank order's time for 8-byte blocks, and overtook it from
/// about 64 bytes with 36 ranks per node, 512 with 8-12, 2 KiB with 4 and not below 4 KiB
/// with 2.
pub fn bruck_small_below(place: &Placement) -> usize {
    let per_node = nodes_and_per_node(place).1 as f64;
    ((12288.0 / per_node.powf(1.5)) as usize).clamp(64, 4096)
}

/// How many nodes `place` has, and how many ranks per node (rounded up).
fn nodes_and_per_node(place: &Placement) -> (usize, usize) {
    let nodes = place
        .node_of()
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    (nodes, place.node_of().len().div_ceil(nodes.max(1)))
}

/// One rank's part of a flat Allgather exchange.
#[derive(Debug, Clone)]
pub enum Exchange {
    /// Remapped recursive doubling; for smaller blocks the other peers, each with the
    /// bytes per rank it runs below, the lowest first ([`Exchange::doubling_peers`]).
    RecursiveDoubling(RdPeers, Vec<(RdPeers, usize)>),
    /// Remapped Bruck; for blocks below the second's bytes the rank-order peers, if they
    /// differ ([`Exchange::bruck_peers`]).
    Bruck(BruckPeers, Option<(BruckPeers, usize)>),
    /// The ring.
    Ring(RingPeers),
}

impl Exchange {
    /// Whether it runs as a schedule even when blocking: Bruck's and the ring's sends and
    /// receives go to different ranks, maybe over different links.
    pub fn needs_schedule(&self) -> bool {
        !matches!(self, Exchange::RecursiveDoubling(..))
    }

    /// Recursive doubling's peers for blocks of `len` bytes; `None` for the other
    /// exchanges.
    pub fn doubling_peers(&self, len: usize) -> Option<&RdPeers> {
        match self {
            Exchange::RecursiveDoubling(peers, smaller) => Some(
                smaller
                    .iter()
                    .find(|(_, below)| len < *below)
                    .map_or(peers, |(small, _)| small),
            ),
            _ => None,
        }
    }

    /// Bruck's peers for blocks of `len` bytes; `None` for the other exchanges.
    pub fn bruck_peers(&self, len: usize) -> Option<&BruckPeers> {
        match self {
            Exchange::Bruck(_, Some((small, below))) if len < *below => Some(small),
            Exchange::Bruck(peers, _) => Some(peers),
            _ => None,
        }
    }

    /// Rank `rank`'s schedule for blocks of `len` bytes (see [`build_rd`]), and the bytes
    /// of scratch it needs.
    pub fn build(&self, rank: u32, len: usize, has_send: bool) -> (Builder, usize) {
        match self {
            Exchange::RecursiveDoubling(..) => {
                let peers = self.doubling_peers(len).expect("recursive doubling");
                (build_rd(rank, peers, len, has_send), 0)
            }
            Exchange::Bruck(..) => {
                let peers = self.bruck_peers(len).expect("Bruck's exchange");
                build_bruck(rank, peers, len, has_send)
            }
            Exchange::Ring(peers) => (build_ring(rank, peers, len, has_send), 0),
        }
    }
}

/// `count` blocks of `len` bytes of `buf` from block `q`, as `region(q, count)`.
fn blocks(buf: Buf, len: usize) -> impl Fn(usize, usize) -> Region {
    move |q, count| Region {
        buf,
        off: q * len,
        len: count * len,
    }
}

/// This rank's own block: the send buffer, or its place in the receive buffer.
fn own_block(rank: u32, len: usize, has_send: bool) -> Region {
    if has_send {
        Region::whole(Buf::Send, len)
    } else {
        blocks(Buf::Recv, len)(rank as usize, 1)
    }
}

/// This rank's schedule: `rank` with its remapped `peers`, blocks of `len` bytes, this
/// rank's block in the send buffer (`has_send`) or already at its place in the receive
/// buffer.
pub fn build_rd(rank: u32, peers: &RdPeers, len: usize, has_send: bool) -> Builder {
    let mut b = Builder::default();
    if len == 0 {
        return b;
    }
    let at = blocks(Buf::Recv, len);
    let own = own_block(rank, len, has_send);
    let p = peers.position as usize;
    let mut first = Vec::new();
    if has_send {
        first.push((
            Link::Local,
            Action::Copy {
                src: own,
                dst: at(rank as usize, 1),
            },
        ));
    }
    if p != rank as usize {
        let (to, from) = (peers.send_own_to, peers.start_from);
        first.push((
            Link::Peer(to),
            Action::Send {
                to: vec![to],
                src: own,
            },
        ));
        first.push((
            Link::Peer(from),
            Action::Recv {
                from,
                dst: at(p, 1),
            },
        ));
    }
    b.round(first);
    for (k, &partner) in peers.partners.iter().enumerate() {
        let width = 1usize << k;
        let mine = p & !(width - 1);
        let theirs = mine ^ width;
        b.round([
            (
                Link::Peer(partner),
                Action::Send {
                    to: vec![partner],
                    src: at(mine, width),
                },
            ),
            (
                Link::Peer(partner),
                Action::Recv {
                    from: partner,
                    dst: at(theirs, width),
                },
            ),
        ]);
    }
    b
}

/// Bruck's exchange over any number of ranks, remapped (`topo_hierarchy::remap::bruck_chosen`),
/// as a schedule; returns it and the scratch it needs (all `size` blocks). Round 0 puts the
/// block of rank `position` first in the scratch (exchanging this rank's own for it); round
/// `k + 1` sends the first `min(2^k, size - 2^k)` blocks of the scratch to the rank `2^k`
/// positions back and appends as many from the rank `2^k` positions on, so that block `j`
/// of the scratch ends as rank `position + j`'s (mod `size`); the last round copies the
/// scratch, rotated, into the receive buffer.
pub fn build_bruck(rank: u32, peers: &BruckPeers, len: usize, has_send: bool) -> (Builder, usize) {
    let mut b = Builder::default();
    let n = peers.size as usize;
    if len == 0 {
        return (b, 0);
    }
    let (tmp, recv) = (blocks(Buf::Tmp, len), blocks(Buf::Recv, len));
    let own = own_block(rank, len, has_send);
    let p = peers.position as usize;
    if p == rank as usize {
        b.step(
            Link::Local,
            Action::Copy {
                src: own,
                dst: tmp(0, 1),
            },
        );
    } else {
        let (to, from) = (peers.send_own_to, peers.start_from);
        b.round([
            (
                Link::Peer(to),
                Action::Send {
                    to: vec![to],
                    src: own,
                },
            ),
            (
                Link::Peer(from),
                Action::Recv {
                    from,
                    dst: tmp(0, 1),
                },
            ),
        ]);
    }
    let mut d = 1usize;
    for (&to, &from) in peers.to.iter().zip(&peers.from) {
        let blocks = d.min(n - d);
        b.round([
            (
                Link::Peer(to),
                Action::Send {
                    to: vec![to],
                    src: tmp(0, blocks),
                },
            ),
            (
                Link::Peer(from),
                Action::Recv {
                    from,
                    dst: tmp(d, blocks),
                },
            ),
        ]);
        d *= 2;
    }
    // Block j of the scratch is rank (p + j) mod n's.
    let mut last = vec![(
        Link::Local,
        Action::Copy {
            src: tmp(0, n - p),
            dst: recv(p, n - p),
        },
    )];
    if p > 0 {
        last.push((
            Link::Local,
            Action::Copy {
                src: tmp(n - p, p),
                dst: recv(0, p),
            },
        ));
    }
    b.round(last);
    (b, n * len)
}

/// The ring (`topo_hierarchy::remap::RingPeers`) as a schedule: round `s` sends to the next
/// rank the block of the rank `s` positions back (this rank's own at round 0, with the copy
/// to its place unless in place) and receives from the previous rank the block of the
/// rank `s + 1` positions back, straight into its place in the receive buffer.
pub fn build_ring(rank: u32, peers: &RingPeers, len: usize, has_send: bool) -> Builder {
    let mut b = Builder::default();
    let n = peers.size();
    if len == 0 {
        return b;
    }
    let at = |r: u32| blocks(Buf::Recv, len)(r as usize, 1);
    let own = own_block(rank, len, has_send);
    // Round 0 also copies this rank's block to its place; its send reads the send buffer.
    let mut round = Vec::new();
    if has_send {
        round.push((
            Link::Local,
            Action::Copy {
                src: own,
                dst: at(rank),
            },
        ));
    }
    let (next, prev) = (peers.next(), peers.prev());
    for s in 0..n.saturating_sub(1) {
        let (sent, received) = peers.step(s);
        let src = if s == 0 { own } else { at(sent) };
        round.push((
            Link::Peer(next),
            Action::Send {
                to: vec![next],
                src,
            },
        ));
        round.push((
            Link::Peer(prev),
            Action::Recv {
                from: prev,
                dst: at(received),
            },
        ));
        b.round(std::mem::take(&mut round));
    }
    b.round(round);
    b
}
