//! Rabenseifner's Allreduce in the hierarchy's order: a reduce-scatter by recursive
//! halving, then an allgather by recursive doubling back, over positions chosen so that
//! the heavy exchanges stay inside a node.
//!
//! Over `q = 2^L` slots, the halving step of mask `m` (from `q / 2` down to 1) exchanges
//! `m / q` of the message between slots `t` and `t ^ m`, and the doubling steps go back up
//! in the other order: the steps of the high bits carry the most. Ranks in switch-major,
//! node-major order take the slots `bitrev(0), bitrev(1), ...` (as the remapped recursive
//! doubling Allgather does, [`super`]), so a node of `2^j` ranks at an aligned run keeps
//! the `j` heaviest steps inside it and only `1 / 2^j` of the message per rank crosses the
//! network each way: every rank of the node sends its share, in parallel (MPICH's
//! multi-leader idea, with no extra step). Block placement of flat Rabenseifner is the
//! worst case, where the first step sends half the message of every rank between nodes.
//!
//! A job that is not a power of two folds first: `rem = n - q` ranks each send their
//! whole contribution to a partner and sit out until they get the result back. The pairs
//! are consecutive ranks of one node wherever the nodes have enough of them (a node of an
//! odd size leaves one rank that pairs with another node's), so the fold stays inside the
//! nodes; the others keep node-major order for their slots.

use super::partition::Placement;
use super::{bitrev, major};

/// The fold of a job that is not a power of two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// This rank takes part from the start.
    None,
    /// This rank sends its contribution to this rank and gets the result from it.
    Out(u32),
    /// This rank combines this rank's contribution into its own first and sends it the
    /// result at the end.
    In(u32),
}

/// One rank's part of the exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HalvingPeers {
    /// The fold.
    pub fold: Fold,
    /// This rank's slot among the `2^L` that exchange (0 for a rank folded out).
    pub slot: u32,
    /// The number of slots, `2^L`.
    pub slots: u32,
    /// The partner of each halving step, the rank at slot `slot ^ m` for `m = 2^(L-1)`,
    /// ..., 2, 1 (empty for a rank folded out); the doubling steps take them in reverse.
    pub partners: Vec<u32>,
}

/// One halving step of a rank: with `partner`, it keeps the `half` slots from `keep` and
/// gives the `half` from `give` (of the `2 * half` it held, `keep` on its slot's side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HalvingStep {
    /// The rank it exchanges with.
    pub partner: u32,
    /// The first slot it keeps.
    pub keep: usize,
    /// The first slot it gives.
    pub give: usize,
    /// How many slots it keeps, and gives.
    pub half: usize,
}

impl HalvingPeers {
    /// The halving steps in order, from the whole of the slots down to this rank's own.
    pub fn steps(&self) -> impl Iterator<Item = HalvingStep> + '_ {
        let slot = self.slot as usize;
        let mut held = (0, self.slots as usize);
        self.partners.iter().map(move |&partner| {
            let (first, count) = held;
            let half = count / 2;
            let (keep, give) = if slot & half == 0 {
                (first, first + half)
            } else {
                (first + half, first)
            };
            held = (keep, half);
            HalvingStep {
                partner,
                keep,
                give,
                half,
            }
        })
    }
}

/// Every rank's fold and slot (0 for a rank folded out), and the rank at every slot, in
/// the order of the module's description.
#[derive(Debug, Clone)]
pub struct HalvingOrder {
    part: Vec<(Fold, u32)>,
    rank_at: Vec<u32>,
}

impl HalvingOrder {
    /// The order for the ranks of `place`.
    pub fn new(place: &Placement) -> HalvingOrder {
        let n = place.node_of().len();
        let mut order: Vec<u32> = vec![0; n];
        for (r, &i) in major(place).iter().enumerate() {
            order[i as usize] = r as u32;
        }
        let q = if n == 0 { 0 } else { 1usize << n.ilog2() };
        let rem = n - q;
        let bits = q.trailing_zeros();
        // The fold's pairs: consecutive ranks of one node first, then the odd ones out of
        // nodes of an odd size, pairwise.
        let (mut pairs, mut odd) = (Vec::new(), Vec::new());
        for node in
            order.chunk_by(|&a, &b| place.node_of()[a as usize] == place.node_of()[b as usize])
        {
            for two in node.chunks(2) {
                match *two {
                    [a, b] => pairs.push((a, b)),
                    [a] => odd.push(a),
                    _ => {}
                }
            }
        }
        pairs.extend(odd.chunks_exact(2).map(|two| (two[0], two[1])));
        let mut part = vec![(Fold::None, 0); n];
        for &(out, into) in &pairs[..rem] {
            part[out as usize].0 = Fold::Out(into);
            part[into as usize].0 = Fold::In(out);
        }
        let mut rank_at = vec![0; q];
        let mut survivor = 0u32;
        for &r in &order {
            if matches!(part[r as usize].0, Fold::Out(_)) {
                continue;
            }
            let slot = bitrev(survivor, bits);
            part[r as usize].1 = slot;
            rank_at[slot as usize] = r;
            survivor += 1;
        }
        HalvingOrder { part, rank_at }
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.part.len()
    }

    /// Every rank once, in slot order, each rank that another folds into followed by
    /// that one (the order in which a reduce-scatter by recursive halving over this order
    /// lays out the ranks' blocks, so that every slot ends holding its own rank's block
    /// and its folded partner's, one after the other), and where each slot's blocks
    /// start in that order (`slots + 1` entries, the last the number of ranks).
    pub fn blocks(&self) -> (Vec<u32>, Vec<u32>) {
        let mut order = Vec::with_capacity(self.part.len());
        let mut starts = Vec::with_capacity(self.rank_at.len() + 1);
        for &r in &self.rank_at {
            starts.push(order.len() as u32);
            order.push(r);
            if let Fold::In(from) = self.part[r as usize].0 {
                order.push(from);
            }
        }
        starts.push(order.len() as u32);
        (order, starts)
    }

    /// Rank `rank`'s part; `None` if `rank` is outside the job.
    pub fn peers(&self, rank: u32) -> Option<HalvingPeers> {
        let slots = self.rank_at.len() as u32;
        let (fold, slot) = *self.part.get(rank as usize)?;
        if matches!(fold, Fold::Out(_)) {
            return Some(HalvingPeers {
                fold,
                slot,
                slots,
                partners: Vec::new(),
            });
        }
        let partners = std::iter::successors(Some(slots / 2), |m| Some(m / 2))
            .take_while(|&m| m > 0)
            .map(|m| self.rank_at[(slot ^ m) as usize])
            .collect();
        Some(HalvingPeers {
            fold,
            slot,
            slots,
            partners,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remap::tests::{block, cyclic};

    /// Bytes per rank that cross between nodes for a message of `q` units, halving and
    /// doubling both (fold excluded).
    fn between_nodes(node_of: &[u32]) -> u64 {
        let o = HalvingOrder::new(&Placement::nodes(node_of));
        let mut sum = 0;
        for r in 0..node_of.len() as u32 {
            let p = o.peers(r).unwrap();
            let mut part = u64::from(p.slots);
            for &q in &p.partners {
                part /= 2;
                if node_of[q as usize] != node_of[r as usize] {
                    sum += 2 * part;
                }
            }
        }
        sum
    }

    #[test]
    fn partners_are_mutual_and_every_rank_has_a_part() {
        for node_of in [
            block(4, 8),
            cyclic(4, 8),
            block(3, 5),
            vec![2, 0, 0, 1, 2, 2, 1],
            vec![0],
            vec![0, 1],
        ] {
            let o = HalvingOrder::new(&Placement::nodes(&node_of));
            let n = node_of.len() as u32;
            let q = 1u32 << n.ilog2();
            let mut slots = Vec::new();
            for r in 0..n {
                let p = o.peers(r).unwrap();
                assert_eq!(p.slots, q);
                match p.fold {
                    Fold::Out(into) => {
                        assert_eq!(o.peers(into).unwrap().fold, Fold::In(r));
                        assert!(p.partners.is_empty());
                        continue;
                    }
                    Fold::In(from) => assert_eq!(o.peers(from).unwrap().fold, Fold::Out(r)),
                    Fold::None => {}
                }
                slots.push(p.slot);
                assert_eq!(p.partners.len(), q.trailing_zeros() as usize);
                for (k, &x) in p.partners.iter().enumerate() {
                    assert_eq!(o.peers(x).unwrap().partners[k], r, "{node_of:?}");
                }
            }
            slots.sort_unstable();
            assert_eq!(slots, (0..q).collect::<Vec<_>>());
            assert!(o.peers(n).is_none());
        }
    }

    #[test]
    fn the_blocks_follow_the_slots_with_each_fold_beside_its_partner() {
        for node_of in [
            block(4, 8),
            cyclic(4, 8),
            block(3, 5),
            cyclic(3, 5),
            vec![2, 0, 0, 1, 2, 2, 1],
            vec![0],
            vec![0, 1],
        ] {
            let o = HalvingOrder::new(&Placement::nodes(&node_of));
            let (blocks, starts) = o.blocks();
            assert_eq!(starts.len(), o.rank_at.len() + 1);
            let mut sorted = blocks.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..node_of.len() as u32).collect::<Vec<_>>());
            // Walking the slots in order meets their ranks in the blocks' order.
            let mut at = 0;
            for slot in 0..o.rank_at.len() as u32 {
                assert_eq!(starts[slot as usize] as usize, at);
                let r = blocks[at];
                let p = o.peers(r).unwrap();
                assert_eq!(p.slot, slot, "{node_of:?}");
                at += 1;
                if let Fold::In(from) = p.fold {
                    assert_eq!(blocks[at], from);
                    at += 1;
                }
            }
            assert_eq!(at, blocks.len());
            assert_eq!(*starts.last().unwrap() as usize, at);
        }
    }

    #[test]
    fn the_heavy_steps_stay_inside_the_nodes() {
        // 4 nodes x 8: of a message of 32 units, a rank sends 16 + 8 + 4 inside its node
        // and 2 + 1 out of it, each way; block and cyclic placement alike.
        for node_of in [block(4, 8), cyclic(4, 8)] {
            assert_eq!(between_nodes(&node_of), 32 * 2 * 3);
        }
        // The fold pairs ranks of one node where it can: 3 x 6 folds 2 pairs, 3 x 5 folds
        // 7, of which one node's pairs give 6.
        for (node_of, crossing) in [(block(3, 6), 0), (block(3, 5), 1), (cyclic(3, 5), 1)] {
            let o = HalvingOrder::new(&Placement::nodes(&node_of));
            let folds = (0..node_of.len() as u32).filter_map(|r| match o.peers(r).unwrap().fold {
                Fold::Out(into) => Some(node_of[r as usize] != node_of[into as usize]),
                _ => None,
            });
            assert_eq!(folds.filter(|&c| c).count(), crossing, "{node_of:?}");
        }
    }
}
