//! TopoMPI's rank remapping for the recursive-doubling Allgather
//! (`../shared/papers/topompi-allgather-slides.ru.txt`, "recursive doubling exch.").
//!
//! Recursive doubling over `n = 2^L` positions exchanges, at step `k`, the `2^k` blocks
//! gathered so far between positions `p` and `p ^ 2^k`: the last steps carry the most. Its
//! exchange graph for one-byte blocks has an edge of weight `2^k` between `p` and
//! `p ^ 2^k`. TopoMPI partitions that graph into the job's nodes, minimising the weight of
//! the edges between parts, and gives the ranks of each node the positions of one part
//! (`π`). Here a partition is first constructed: ranks in node-major
//! order (nodes in the order of their first rank, each node's ranks in rank order) take
//! the positions `bitrev(0), bitrev(1), ...`. A run of `2^j` consecutive bit-reversed
//! indices starting at a multiple of `2^j` is a subcube over the top `j` bits, so a node
//! of `2^j` ranks keeps the `j` heaviest steps inside it: with `h` nodes of equal
//! power-of-two size every rank sends `h - 1` blocks between nodes, the least any
//! Allgather can (each node must receive the other nodes' blocks once per rank).
//!
//! Plain recursive doubling (position = rank) is as good when ranks are placed cyclically
//! over nodes of equal power-of-two size (the low bits of the rank name the node, and the
//! light steps are the ones that cross), and worst with block placement, where the heavy
//! steps cross: `n - s` blocks per rank between nodes against `h - 1`.
//!
//! "Exch.": before the exchange, rank `r` sends its block to the rank at position `r` and
//! receives, from rank `π(r)`, the block of that rank, so that the block at position `q`
//! is rank `q`'s and the gathered buffer needs no reordering. Each rank keeps `L + 2` rank
//! numbers (`O(log n)`), computed once from the placement. That first exchange crosses
//! nodes too (up to one block per rank), so [`chosen`] starts from the plain order where it
//! sends no more between nodes (cyclic placement), and from the remapped one elsewhere;
//! then it searches for a better partition of the graph ([`partition::refine`]), which
//! matters where nodes differ in size or are not powers of two. Where the switches are
//! known ([`partition::Placement`]), ranks go in switch-major, node-major order and the
//! search keeps the heavy steps under one switch first, then inside one node.

pub mod halving;
pub mod partition;

use partition::{Graph, Placement};

/// One rank's part of the remapped exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdPeers {
    /// This rank's position `π(rank)`.
    pub position: u32,
    /// Where this rank's own block goes first: the rank at position `rank`.
    pub send_own_to: u32,
    /// Whose block this rank starts with: rank `position`.
    pub start_from: u32,
    /// The partner of each step `k`: the rank at position `position ^ 2^k`.
    pub partners: Vec<u32>,
}

/// The node-major index of every rank: nodes in the order of their first rank, each
/// node's ranks in rank order. `node_of[r]` is any label of rank `r`'s node.
pub fn node_major(node_of: &[u32]) -> Vec<u32> {
    major(&Placement::nodes(node_of))
}

/// `x` with its low `bits` bits reversed.
fn bitrev(x: u32, bits: u32) -> u32 {
    if bits == 0 {
        0
    } else {
        x.reverse_bits() >> (32 - bits)
    }
}

/// Every rank's position in the remapped exchange (switches unknown), or `None` unless the
/// number of ranks is a power of two (recursive doubling needs one).
pub fn positions(node_of: &[u32]) -> Option<Vec<u32>> {
    let n = u32::try_from(node_of.len()).ok()?;
    if !n.is_power_of_two() {
        return None;
    }
    let bits = n.trailing_zeros();
    Some(
        node_major(node_of)
            .into_iter()
            .map(|i| bitrev(i, bits))
            .collect(),
    )
}

/// The positions to run with: of the remapped ones and the identity (plain), the one that
/// sends less between switches, then between nodes (first exchange included; plain on a
/// tie), improved by [`partition::refine`]. `None` unless the number of ranks is a power of
/// two.
pub fn chosen(place: &Placement) -> Option<Vec<u32>> {
    let n = place.node_of().len();
    let bits = u32::try_from(n)
        .ok()
        .filter(|n| n.is_power_of_two())?
        .trailing_zeros();
    let graph = rd_graph(n);
    let start = constructed(place, &graph, bits);
    Some(partition::refine(&graph, place, start))
}

/// [`chosen`]'s starting point on recursive doubling's `graph` of `2^bits` positions: the
/// remapped positions (ranks in switch-major, node-major order) or the identity, whichever
/// costs less (plain on a tie).
fn constructed(place: &Placement, graph: &Graph, bits: u32) -> Vec<u32> {
    let remapped: Vec<u32> = major(place).into_iter().map(|i| bitrev(i, bits)).collect();
    let plain: Vec<u32> = (0..graph.size() as u32).collect();
    if graph.cost(place, &remapped) < graph.cost(place, &plain) {
        remapped
    } else {
        plain
    }
}

/// The index of every rank in switch-major, node-major order: switches in the order of
/// their first rank, then nodes in that order, each node's ranks in rank order (node-major
/// order when switches are unknown).
fn major(place: &Placement) -> Vec<u32> {
    let (switch, node) = (first_seen(place.switch_of()), first_seen(place.node_of()));
    let mut order: Vec<u32> = (0..node.len() as u32).collect();
    order.sort_by_key(|&r| (switch[r as usize], node[r as usize]));
    invert(&order)
}

/// For each rank, the order in which its label first appears in `label_of`.
fn first_seen(label_of: &[u32]) -> Vec<u32> {
    let mut seen = std::collections::HashMap::new();
    label_of
        .iter()
        .map(|&l| {
            let next = seen.len() as u32;
            *seen.entry(l).or_insert(next)
        })
        .collect()
}

/// The positions of the ranks listed in `order`, position by position.
fn invert(order: &[u32]) -> Vec<u32> {
    let mut pos = vec![0u32; order.len()];
    for (p, &r) in order.iter().enumerate() {
        pos[r as usize] = p as u32;
    }
    pos
}

/// The ranks' positions in a flat exchange (a permutation of `0..n`) and the rank at
/// each position, worked out once: each rank's peers then take time in its own rounds, so
/// a whole job's (as the simulator builds them) takes linear time, not quadratic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Positions {
    pos: Vec<u32>,
    rank_at: Vec<u32>,
}

impl Positions {
    /// The positions `pos`, rank by rank (a permutation of `0..n`).
    pub fn new(pos: Vec<u32>) -> Self {
        let rank_at = invert(&pos);
        Positions { pos, rank_at }
    }

    /// Rank `rank`'s recursive doubling peers (`n` a power of two); `None` if `rank` is out
    /// of range.
    pub fn rd_peers(&self, rank: u32) -> Option<RdPeers> {
        let position = *self.pos.get(rank as usize)?;
        let steps = self.pos.len().trailing_zeros();
        Some(RdPeers {
            position,
            send_own_to: self.rank_at[rank as usize],
            start_from: position,
            partners: (0..steps)
                .map(|k| self.rank_at[(position ^ (1 << k)) as usize])
                .collect(),
        })
    }

    /// Rank `rank`'s peers in Bruck's exchange; `None` if `rank` is out of range.
    pub fn bruck_peers(&self, rank: u32) -> Option<BruckPeers> {
        let n = self.pos.len();
        let position = *self.pos.get(rank as usize)?;
        let p = position as usize;
        let (mut to, mut from) = (Vec::new(), Vec::new());
        for (d, _) in bruck_steps(n) {
            to.push(self.rank_at[(p + n - d) % n]);
            from.push(self.rank_at[(p + d) % n]);
        }
        Some(BruckPeers {
            size: n as u32,
            position,
            send_own_to: self.rank_at[rank as usize],
            start_from: position,
            to,
            from,
        })
    }

    /// Rank `rank`'s part of the ring; `None` if `rank` is out of range.
    pub fn ring_peers(&self, rank: u32) -> Option<RingPeers> {
        Some(RingPeers {
            position: *self.pos.get(rank as usize)?,
            rank_at: self.rank_at.clone(),
        })
    }

    /// Rank `rank`'s rounds of a dissemination: in round `k` it signals the rank `2^k`
    /// positions on and hears from the one `2^k` positions back, `(to, from)`; `None` if
    /// `rank` is out of range.
    pub fn dissemination_peers(&self, rank: u32) -> Option<Vec<(u32, u32)>> {
        let p = *self.pos.get(rank as usize)? as usize;
        let n = self.rank_at.len();
        let mut rounds = Vec::new();
        let mut d = 1;
        while d < n {
            rounds.push((self.rank_at[(p + d) % n], self.rank_at[(p + n - d) % n]));
            d *= 2;
        }
        Some(rounds)
    }
}

/// Recursive doubling's exchange graph on `n = 2^L` positions: at step `k`, `2^k` blocks
/// from `p` to `p ^ 2^k`.
pub fn rd_graph(n: usize) -> Graph {
    let steps = n.trailing_zeros();
    Graph::new(n, |p| (0..steps).map(move |k| (p ^ (1 << k), 1u64 << k)))
}

/// Bruck's exchange graph on `n` positions: at the step of distance `d`, `min(d, n - d)`
/// blocks from `p` to `p - d` (mod `n`).
pub fn bruck_graph(n: usize) -> Graph {
    Graph::new(n, |p| {
        bruck_steps(n).map(move |(d, blocks)| ((p + n - d) % n, blocks as u64))
    })
}

/// Rank `rank`'s peers when ranks sit at `pos` (a permutation of `0..n`, `n` a power of
/// two); `None` if `rank` is out of range.
pub fn peers(pos: &[u32], rank: u32) -> Option<RdPeers> {
    Positions::new(pos.to_vec()).rd_peers(rank)
}

/// The blocks recursive doubling sends between nodes, in all, with ranks at `pos`
/// (`None`: plain, position = rank; a remapped exchange adds its first exchange).
/// Each rank sends `2^k` blocks at step `k`.
pub fn blocks_between_nodes(node_of: &[u32], pos: Option<&[u32]>) -> u64 {
    let plain: Vec<u32>;
    let pos = match pos {
        Some(pos) => pos,
        None => {
            plain = (0..node_of.len() as u32).collect();
            &plain
        }
    };
    rd_graph(node_of.len())
        .cost(&Placement::nodes(node_of), pos)
        .nodes
}

/// One rank's part of the remapped Bruck exchange (any number of ranks): at step `k`
/// the blocks gathered so far go to the rank `2^k` positions back while those of the rank
/// `2^k` positions on arrive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BruckPeers {
    /// The number of ranks.
    pub size: u32,
    /// This rank's position.
    pub position: u32,
    /// Where this rank's own block goes first: the rank at position `rank`.
    pub send_own_to: u32,
    /// Whose block this rank starts with: rank `position`.
    pub start_from: u32,
    /// Step `k`'s receiver, the rank at position `position - 2^k` (mod `size`).
    pub to: Vec<u32>,
    /// Step `k`'s sender, the rank at position `position + 2^k` (mod `size`).
    pub from: Vec<u32>,
}

/// Bruck's steps for `n` ranks: `(distance, blocks)` of each.
fn bruck_steps(n: usize) -> impl Iterator<Item = (usize, usize)> {
    std::iter::successors(Some(1usize), |d| d.checked_mul(2))
        .take_while(move |&d| d < n)
        .map(move |d| (d, d.min(n - d)))
}

/// The blocks Bruck sends between nodes, in all, with ranks at `pos` (first exchange
/// included).
pub fn bruck_blocks_between_nodes(node_of: &[u32], pos: &[u32]) -> u64 {
    bruck_graph(node_of.len())
        .cost(&Placement::nodes(node_of), pos)
        .nodes
}

/// The positions Bruck runs with: of the plain order, node-major order and the order that
/// deals each node's ranks round-robin over the nodes (so that ranks of one node sit
/// `nodes` positions apart, where the long late steps of equal node sizes land), the one
/// that sends the fewest blocks between nodes (the first on a tie), improved by
/// [`partition::refine`].
pub fn bruck_chosen(place: &Placement) -> Vec<u32> {
    let graph = bruck_graph(place.node_of().len());
    let start = bruck_constructed(place, &graph);
    partition::refine(&graph, place, start)
}

/// [`bruck_chosen`]'s starting point: the best of its three orders (switch-major where
/// switches are known).
fn bruck_constructed(place: &Placement, graph: &Graph) -> Vec<u32> {
    let n = place.node_of().len();
    let plain: Vec<u32> = (0..n as u32).collect();
    // Round-robin: ranks ordered by (index within their node, node order).
    let node = first_seen(place.node_of());
    let mut count = std::collections::HashMap::new();
    let local: Vec<u32> = node
        .iter()
        .map(|&i| {
            let c = count.entry(i).or_insert(0u32);
            *c += 1;
            *c - 1
        })
        .collect();
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by_key(|&r| (local[r as usize], node[r as usize]));
    [plain, major(place), invert(&order)]
        .into_iter()
        .min_by_key(|pos| graph.cost(place, pos))
        .expect("three candidates")
}

/// Rank `rank`'s peers in Bruck's exchange with ranks at `pos` (a permutation of `0..n`);
/// `None` if `rank` is out of range.
pub fn bruck_peers(pos: &[u32], rank: u32) -> Option<BruckPeers> {
    Positions::new(pos.to_vec()).bruck_peers(rank)
}

/// One rank's part of the ring Allgather (any number of ranks): at step `s` it passes the
/// block it received at step `s - 1` (its own at step 0) to the next position and receives
/// the one before from the previous position, so that after `n - 1` steps every block has
/// gone round. Each block sits at its rank's place in the receive buffer, so the rank
/// needs to know whose block each step carries: the whole order, `n` rank numbers, which
/// is the price of the ring (4 bytes per rank of the job; a large-message algorithm).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingPeers {
    /// This rank's position in the ring.
    pub position: u32,
    /// The rank at each position.
    pub rank_at: Vec<u32>,
}

impl RingPeers {
    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.rank_at.len()
    }

    /// The rank this one sends to.
    pub fn next(&self) -> u32 {
        self.rank_at[(self.position as usize + 1) % self.size()]
    }

    /// The rank this one receives from.
    pub fn prev(&self) -> u32 {
        let n = self.size();
        self.rank_at[(self.position as usize + n - 1) % n]
    }

    /// The ranks whose blocks step `s` sends and receives.
    pub fn step(&self, s: usize) -> (u32, u32) {
        let (n, p) = (self.size(), self.position as usize);
        (
            self.rank_at[(p + n - s % n) % n],
            self.rank_at[(p + 2 * n - s % n - 1) % n],
        )
    }
}

/// The ring's positions: switch-major, node-major order, where every block crosses each
/// node boundary of the ring once, `nodes` edges between nodes out of `n` (and `switches`
/// between switches), the fewest a ring over more than one node (switch) can have.
pub fn ring_positions(place: &Placement) -> Vec<u32> {
    major(place)
}

/// Rank `rank`'s part of the ring with ranks at `pos` (a permutation of `0..n`); `None` if
/// `rank` is out of range.
pub fn ring_peers(pos: &[u32], rank: u32) -> Option<RingPeers> {
    Positions::new(pos.to_vec()).ring_peers(rank)
}

/// The flat barrier's positions: the nodes interleaved, the first rank of every node (nodes
/// in switch-major order), then the second of every node, and so on. Consecutive positions
/// sit on different nodes, as cyclic placement puts ranks; nodes with fewer ranks drop out
/// of the later turns.
pub fn interleaved_positions(place: &Placement) -> Vec<u32> {
    let (switch, node) = (first_seen(place.switch_of()), first_seen(place.node_of()));
    let mut seen = vec![0u32; node.iter().max().map_or(0, |&m| m as usize + 1)];
    let local: Vec<u32> = node
        .iter()
        .map(|&nd| {
            seen[nd as usize] += 1;
            seen[nd as usize] - 1
        })
        .collect();
    let mut order: Vec<u32> = (0..node.len() as u32).collect();
    order.sort_by_key(|&r| (local[r as usize], switch[r as usize], node[r as usize]));
    invert(&order)
}

/// Rank `rank`'s rounds of a dissemination over ranks at `pos` (a permutation of `0..n`):
/// in round `k` it signals the rank `2^k` positions on and hears from the one `2^k`
/// positions back, `(to, from)`; `None` if `rank` is out of range.
pub fn dissemination_peers(pos: &[u32], rank: u32) -> Option<Vec<(u32, u32)>> {
    Positions::new(pos.to_vec()).dissemination_peers(rank)
}

/// The blocks the ring sends between nodes, in all, with ranks at `pos`: `n - 1` over each
/// edge of the ring whose ends are on different nodes.
pub fn ring_blocks_between_nodes(node_of: &[u32], pos: &[u32]) -> u64 {
    let n = node_of.len();
    let rank_at = invert(pos);
    let crossing = (0..n)
        .filter(|&p| node_of[rank_at[p] as usize] != node_of[rank_at[(p + 1) % n] as usize])
        .count() as u64;
    crossing * (n as u64).saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn block(nodes: u32, per: u32) -> Vec<u32> {
        (0..nodes * per).map(|r| r / per).collect()
    }

    pub(super) fn cyclic(nodes: u32, per: u32) -> Vec<u32> {
        (0..nodes * per).map(|r| r % nodes).collect()
    }

    #[test]
    fn interleaved_positions_put_consecutive_places_on_different_nodes() {
        // Block placement, 3 nodes x 2: node 0's first rank, node 1's, node 2's, then the
        // second ranks.
        assert_eq!(
            interleaved_positions(&Placement::nodes(&block(3, 2))),
            [0, 3, 1, 4, 2, 5]
        );
        // Cyclic placement is interleaved already.
        let c = cyclic(4, 3);
        assert_eq!(
            interleaved_positions(&Placement::nodes(&c)),
            (0..12).collect::<Vec<u32>>()
        );
        // Nodes in switch-major order; a node with fewer ranks drops out of later turns.
        let place = Placement::with_switches(&[0, 1, 2, 2, 0, 0], &[7, 3, 7, 7, 7, 7]);
        assert_eq!(interleaved_positions(&place), [0, 2, 1, 4, 3, 5]);
        for node_of in [block(5, 7), cyclic(6, 5), vec![2, 2, 0, 1, 1, 1, 0]] {
            let pos = interleaved_positions(&Placement::nodes(&node_of));
            let mut sorted = pos.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..node_of.len() as u32).collect::<Vec<_>>());
        }
    }

    #[test]
    fn dissemination_rounds_pair_up() {
        for n in [1u32, 2, 3, 5, 8, 13] {
            let pos: Vec<u32> = (0..n).rev().collect();
            let rounds = (n as f64).log2().ceil() as usize;
            for r in 0..n {
                let me = dissemination_peers(&pos, r).unwrap();
                assert_eq!(me.len(), rounds);
                for (k, &(to, from)) in me.iter().enumerate() {
                    // Whom this rank signals hears from it in the same round.
                    assert_eq!(dissemination_peers(&pos, to).unwrap()[k].1, r);
                    assert_eq!(dissemination_peers(&pos, from).unwrap()[k].0, r);
                }
            }
        }
        assert!(dissemination_peers(&[0, 1], 2).is_none());
    }

    #[test]
    fn node_major_order() {
        assert_eq!(node_major(&[5, 3, 5, 3]), [0, 2, 1, 3]);
        assert_eq!(node_major(&[0, 0, 1, 1]), [0, 1, 2, 3]);
    }

    #[test]
    fn positions_are_a_permutation_and_peers_are_consistent() {
        for node_of in [
            block(8, 8),
            cyclic(8, 8),
            block(2, 4),
            vec![3, 1, 1, 0, 3, 3, 1, 2],
        ] {
            let pos = positions(&node_of).unwrap();
            let mut sorted = pos.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..node_of.len() as u32).collect::<Vec<_>>());
            for r in 0..node_of.len() as u32 {
                let me = peers(&pos, r).unwrap();
                assert_eq!(me.position, pos[r as usize]);
                assert_eq!(pos[me.send_own_to as usize], r);
                for (k, &q) in me.partners.iter().enumerate() {
                    // Partnership is mutual.
                    assert_eq!(peers(&pos, q).unwrap().partners[k], r);
                }
            }
        }
        assert!(positions(&[0, 0, 1]).is_none());
    }

    #[test]
    fn remapping_reaches_the_least_inter_node_volume() {
        // 8 nodes x 8 ranks: each rank must receive the other 56 blocks; between nodes the
        // least is 7 per rank (each node receives each other node's blocks once per rank).
        let n = 64u64;
        let least = n * 7;
        let node_of = block(8, 8);
        let pos = positions(&node_of).unwrap();
        assert_eq!(blocks_between_nodes(&node_of, None), n * (64 - 8));
        // The exchange reaches the least; the first exchange adds one block for each of
        // the 56 ranks whose position-r rank is on another node.
        assert_eq!(blocks_between_nodes(&node_of, Some(&pos)), least + 56);
        assert_eq!(chosen(&Placement::nodes(&node_of)).unwrap(), pos);

        // Cyclic: plain recursive doubling already sends the least; it is kept.
        let node_of = cyclic(8, 8);
        assert_eq!(blocks_between_nodes(&node_of, None), least);
        let pos = positions(&node_of).unwrap();
        assert!(blocks_between_nodes(&node_of, Some(&pos)) > least);
        assert_eq!(
            chosen(&Placement::nodes(&node_of)).unwrap(),
            (0..64).collect::<Vec<u32>>()
        );
        let plain = peers(&chosen(&Placement::nodes(&node_of)).unwrap(), 5).unwrap();
        assert_eq!((plain.send_own_to, plain.start_from), (5, 5));
    }

    #[test]
    fn the_chosen_order_never_sends_more_than_plain() {
        // Random placements on 1 to 8 nodes of uneven sizes.
        let mut seed = 0x9e37_79b9_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for n in [2u32, 4, 8, 16, 32, 64, 128] {
            for _ in 0..20 {
                let nodes = 1 + next() % 8;
                let node_of: Vec<u32> = (0..n).map(|_| next() % nodes).collect();
                let pos = chosen(&Placement::nodes(&node_of)).unwrap();
                assert!(
                    blocks_between_nodes(&node_of, Some(&pos))
                        <= blocks_between_nodes(&node_of, None)
                );
            }
        }
    }

    #[test]
    fn bruck_peers_mirror_each_other_and_the_choice_never_sends_more() {
        for node_of in [
            vec![0, 0, 0, 1, 1, 1],
            vec![0, 1, 2, 0, 1, 2, 0],
            vec![4, 4, 1, 4, 1],
        ] {
            let n = node_of.len();
            let pos = bruck_chosen(&Placement::nodes(&node_of));
            let mut sorted = pos.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n as u32).collect::<Vec<_>>());
            let plain: Vec<u32> = (0..n as u32).collect();
            assert!(
                bruck_blocks_between_nodes(&node_of, &pos)
                    <= bruck_blocks_between_nodes(&node_of, &plain)
            );
            for r in 0..n as u32 {
                let me = bruck_peers(&pos, r).unwrap();
                for (k, &t) in me.to.iter().enumerate() {
                    // My receiver at step k receives from me.
                    assert_eq!(bruck_peers(&pos, t).unwrap().from[k], r);
                }
            }
        }
        // 4 nodes x 3 ranks in blocks: dealing the ranks round-robin puts ranks of one node
        // 4 positions apart, so the steps at distance 4 and 8 stay inside nodes: 44 blocks
        // between nodes instead of plain's 116.
        let node_of: Vec<u32> = (0..12).map(|r| r / 3).collect();
        let plain: Vec<u32> = (0..12).collect();
        let pos = bruck_chosen(&Placement::nodes(&node_of));
        assert_eq!(bruck_blocks_between_nodes(&node_of, &plain), 116);
        assert_eq!(bruck_blocks_between_nodes(&node_of, &pos), 44);
    }

    #[test]
    fn the_ring_passes_every_block_round_once() {
        for node_of in [block(4, 3), cyclic(3, 4), vec![7], vec![2, 0, 2, 1, 0]] {
            let n = node_of.len();
            let pos = ring_positions(&Placement::nodes(&node_of));
            for r in 0..n as u32 {
                let me = ring_peers(&pos, r).unwrap();
                let next = ring_peers(&pos, me.next()).unwrap();
                assert_eq!(next.prev(), r);
                // What this rank sends at step s, its successor receives at step s.
                let mut seen = vec![r];
                for s in 0..n.saturating_sub(1) {
                    assert_eq!(me.step(s).0, next.step(s).1);
                    seen.push(me.step(s).1);
                }
                seen.sort_unstable();
                assert_eq!(
                    seen,
                    (0..n as u32).collect::<Vec<_>>(),
                    "rank {r} of {node_of:?}"
                );
            }
        }
        // Node-major order crosses each node boundary once: 4 edges of 11 blocks each.
        let node_of = cyclic(4, 3);
        let pos = ring_positions(&Placement::nodes(&node_of));
        assert_eq!(ring_blocks_between_nodes(&node_of, &pos), 4 * 11);
        let plain: Vec<u32> = (0..12).collect();
        assert_eq!(ring_blocks_between_nodes(&node_of, &plain), 12 * 11);
        assert_eq!(ring_blocks_between_nodes(&[0, 0, 0], &[0, 1, 2]), 0);
    }

    #[test]
    fn the_searched_partition_beats_the_constructed_orders_on_uneven_nodes() {
        // Random placements on 2 to 5 nodes of uneven sizes: the search never sends more
        // than where it starts, and in all sends less.
        let mut seed = 0x1234_5678_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for n in [6usize, 12, 24, 48, 8, 16, 32, 64] {
            let (mut start, mut searched) = (0u64, 0u64);
            for _ in 0..10 {
                let nodes = 2 + next() % 4;
                let node_of: Vec<u32> = (0..n).map(|_| next() % nodes).collect();
                let place = Placement::nodes(&node_of);
                let (a, b) = if n.is_power_of_two() {
                    (
                        blocks_between_nodes(
                            &node_of,
                            Some(&constructed(&place, &rd_graph(n), n.trailing_zeros())),
                        ),
                        blocks_between_nodes(&node_of, Some(&chosen(&place).unwrap())),
                    )
                } else {
                    let graph = bruck_graph(n);
                    (
                        bruck_blocks_between_nodes(&node_of, &bruck_constructed(&place, &graph)),
                        bruck_blocks_between_nodes(&node_of, &bruck_chosen(&place)),
                    )
                };
                assert!(b <= a, "{node_of:?}: {b} > {a}");
                start += a;
                searched += b;
            }
            println!("{n} ranks: {start} blocks between nodes constructed, {searched} searched");
            assert!(searched < start, "{n} ranks");
        }
    }
}
