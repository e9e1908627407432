//! Partitioning an Allgather's exchange graph into the job's switches and nodes
//! (TopoMPI's `π`).
//!
//! The graph's vertices are the exchange's positions `0..n`; an edge from `p` to `q` of
//! weight `w` says that the position-`p` rank sends `w` blocks to the position-`q` rank
//! (for one-byte blocks, summed over the steps). Placing ranks at positions gives every
//! position its rank's node and switch; the cost of a placement ([`Cost`]) is what it
//! sends between switches, then what it sends between nodes, compared in that order:
//! - the weight of every edge whose ends are on different switches (nodes), plus
//! - the first exchange ("exch."), which sends rank `q`'s block to the rank at position
//!   `q`: one block wherever position `q`'s switch (node) is not rank `q`'s.
//!
//! [`refine`] improves a placement by local search, Kernighan–Lin style: it swaps what
//! sits at two positions of different nodes whenever that lowers the cost, pass after
//! pass, until a whole pass finds nothing (or [`MAX_PASSES`]). Each swap is judged from the
//! two positions' edges alone (`O(log n)` each), and a pass tries every pair:
//! `O(n^2 log n)`, so it runs only up to [`REFINE_UP_TO`] ranks, once per context at its
//! first Allgather (at 512 ranks on 13 nodes it took 9 ms for recursive doubling and, at
//! 511, 35 ms for Bruck, in a release build here: hence the limit of 256, about a quarter
//! of that); larger jobs keep the constructed order it would start from. It is
//! deterministic, so every rank computes the same placement on its own.

/// The largest job whose placement [`refine`] searches.
pub const REFINE_UP_TO: usize = 256;

/// The most passes [`refine`] makes.
pub const MAX_PASSES: usize = 8;

/// Where the job's ranks are: each rank's node and, where known, each node's switch.
#[derive(Debug, Clone)]
pub struct Placement {
    node_of: Vec<u32>,
    /// Each rank's switch (all equal where unknown).
    switch_of: Vec<u32>,
}

impl Placement {
    /// Ranks on the nodes `node_of[r]`, switches unknown.
    pub fn nodes(node_of: &[u32]) -> Placement {
        Placement {
            node_of: node_of.to_vec(),
            switch_of: vec![0; node_of.len()],
        }
    }

    /// Ranks on the nodes `node_of[r]` under the switches `switch_of[r]` (ranks of one node
    /// under one switch: a node's switch is its first rank's).
    pub fn with_switches(node_of: &[u32], switch_of: &[u32]) -> Placement {
        let mut first = std::collections::HashMap::new();
        let switch_of = node_of
            .iter()
            .zip(switch_of)
            .map(|(&node, &sw)| *first.entry(node).or_insert(sw))
            .collect();
        Placement {
            node_of: node_of.to_vec(),
            switch_of,
        }
    }

    /// Each rank's node.
    pub fn node_of(&self) -> &[u32] {
        &self.node_of
    }

    /// Each rank's switch.
    pub fn switch_of(&self) -> &[u32] {
        &self.switch_of
    }

    /// The switch of each position when rank `r` sits at `pos[r]`.
    fn switches_at(&self, pos: &[u32]) -> Vec<u32> {
        labels(&self.switch_of, pos)
    }
}

/// What a placement sends between switches and between nodes, in blocks; placements
/// compare by the first, then the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Cost {
    /// Blocks between switches.
    pub switches: u64,
    /// Blocks between nodes (those between switches included).
    pub nodes: u64,
}

/// An exchange graph: for each position, every edge that touches it, as `(other end,
/// blocks)`, once per direction (a send from `p` to `q` is listed at `p` and at `q`).
#[derive(Debug)]
pub struct Graph {
    edges: Vec<Vec<(u32, u64)>>,
}

impl Graph {
    /// The graph of `n` positions with the sends `sends(p)` lists for each position `p`
    /// (`(receiver, blocks)`).
    pub fn new<I>(n: usize, sends: impl Fn(usize) -> I) -> Graph
    where
        I: IntoIterator<Item = (usize, u64)>,
    {
        let mut edges = vec![Vec::new(); n];
        for p in 0..n {
            for (q, w) in sends(p) {
                edges[p].push((q as u32, w));
                edges[q].push((p as u32, w));
            }
        }
        Graph { edges }
    }

    /// The number of positions.
    pub fn size(&self) -> usize {
        self.edges.len()
    }

    /// What the ranks of `place` at `pos` send between switches and nodes, first exchange
    /// included.
    pub fn cost(&self, place: &Placement, pos: &[u32]) -> Cost {
        let (node_at, switch_at) = (labels(&place.node_of, pos), place.switches_at(pos));
        let mut cost = Cost::default();
        let mut add = |w: u64, p: usize, node_q: u32, switch_q: u32| {
            if node_at[p] != node_q {
                cost.nodes += w;
                if switch_at[p] != switch_q {
                    cost.switches += w;
                }
            }
        };
        // Every send appears at both its ends: count it at the lower position only.
        for (p, edges) in self.edges.iter().enumerate() {
            for &(q, w) in edges {
                let q = q as usize;
                if q > p {
                    add(w, p, node_at[q], switch_at[q]);
                }
            }
        }
        // The first exchange: rank q's block to position q.
        for q in 0..self.size() {
            add(1, q, place.node_of[q], place.switch_of[q]);
        }
        cost
    }

    /// How much swapping what sits at positions `a` and `b` changes the cost, as
    /// `(between switches, between nodes)`; negative saves.
    fn swap_gain(&self, place: &Placement, at: &Labels, a: usize, b: usize) -> (i64, i64) {
        let ((xn, xs), (yn, ys)) = ((at.node[a], at.switch[a]), (at.node[b], at.switch[b]));
        let (mut sw, mut nd) = (0i64, 0i64);
        // An edge of weight `w` from a position that goes from `was` to `now` (node, switch)
        // to one that stays at `there`.
        let mut count = |w: i64, was: (u32, u32), now: (u32, u32), there: (u32, u32)| {
            let cross = |(n, s): (u32, u32)| {
                (
                    i64::from(n != there.0),
                    i64::from(n != there.0 && s != there.1),
                )
            };
            let (before, after) = (cross(was), cross(now));
            nd += w * (after.0 - before.0);
            sw += w * (after.1 - before.1);
        };
        // Position `a` goes from (xn, xs) to (yn, ys), `b` the other way; an edge between
        // them crosses as much before as after.
        for (me, from, to, other) in [(a, (xn, xs), (yn, ys), b), (b, (yn, ys), (xn, xs), a)] {
            for &(q, w) in &self.edges[me] {
                let q = q as usize;
                if q != other {
                    count(w as i64, from, to, (at.node[q], at.switch[q]));
                }
            }
            count(1, from, to, (place.node_of[me], place.switch_of[me]));
        }
        (sw, nd)
    }
}

/// The node and switch of each position, as [`refine`] moves them.
struct Labels {
    node: Vec<u32>,
    switch: Vec<u32>,
}

/// The label of each position when rank `r`, labelled `label_of[r]`, sits at `pos[r]`.
pub fn labels(label_of: &[u32], pos: &[u32]) -> Vec<u32> {
    let mut label_at = vec![0u32; pos.len()];
    for (r, &p) in pos.iter().enumerate() {
        label_at[p as usize] = label_of[r];
    }
    label_at
}

/// The positions of a placement given by its node labels: each node's ranks, in rank
/// order, take the positions that carry its label, in order (so the labels `node_of` give
/// the identity).
pub fn positions_of(node_of: &[u32], label_at: &[u32]) -> Vec<u32> {
    let mut free: std::collections::HashMap<u32, std::collections::VecDeque<u32>> =
        std::collections::HashMap::new();
    for (p, &l) in label_at.iter().enumerate() {
        free.entry(l).or_default().push_back(p as u32);
    }
    node_of
        .iter()
        .map(|l| {
            free.get_mut(l)
                .and_then(|q| q.pop_front())
                .expect("as many positions per label as ranks per node")
        })
        .collect()
}

/// Improves the placement `pos` of the ranks of `place` on `graph` by swaps that lower
/// its cost (see the module's description; blocks between switches first, then between
/// nodes); returns it unchanged above [`REFINE_UP_TO`] ranks. The result never costs more
/// than `pos`.
pub fn refine(graph: &Graph, place: &Placement, pos: Vec<u32>) -> Vec<u32> {
    let n = graph.size();
    if !(2..=REFINE_UP_TO).contains(&n) {
        return pos;
    }
    let mut at = Labels {
        node: labels(&place.node_of, &pos),
        switch: place.switches_at(&pos),
    };
    let mut improved = false;
    for _ in 0..MAX_PASSES {
        let mut swapped = false;
        for a in 0..n {
            for b in a + 1..n {
                if at.node[a] != at.node[b] && graph.swap_gain(place, &at, a, b) < (0, 0) {
                    at.node.swap(a, b);
                    at.switch.swap(a, b);
                    swapped = true;
                }
            }
        }
        improved |= swapped;
        if !swapped {
            break;
        }
    }
    if improved {
        positions_of(&place.node_of, &at.node)
    } else {
        pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring of `n` positions, one block from each to the next.
    fn ring(n: usize) -> Graph {
        Graph::new(n, |p| [((p + 1) % n, 1)])
    }

    #[test]
    fn the_gain_of_a_swap_is_the_change_in_cost() {
        let g = Graph::new(8, |p| (0..3).map(move |k| (p ^ (1 << k), 1u64 << k)));
        let node_of = [0, 1, 2, 0, 1, 2, 0, 1];
        let place = Placement::with_switches(&node_of, &[5, 6, 6, 5, 6, 6, 5, 6]);
        let pos = [7, 2, 0, 3, 6, 1, 4, 5];
        let at = Labels {
            node: labels(place.node_of(), &pos),
            switch: place.switches_at(&pos),
        };
        let before = g.cost(&place, &pos);
        for a in 0..8 {
            for b in 0..8 {
                if at.node[a] == at.node[b] {
                    continue;
                }
                let mut node = at.node.clone();
                node.swap(a, b);
                let after = g.cost(&place, &positions_of(place.node_of(), &node));
                let (sw, nd) = g.swap_gain(&place, &at, a, b);
                assert_eq!(
                    before.switches as i64 + sw,
                    after.switches as i64,
                    "swap {a} {b}"
                );
                assert_eq!(before.nodes as i64 + nd, after.nodes as i64, "swap {a} {b}");
            }
        }
    }

    #[test]
    fn refining_groups_each_node_on_the_ring() {
        // Nodes dealt round-robin along a ring: every edge crosses. Grouped, 2 cross.
        let node_of = [0, 1, 0, 1, 0, 1];
        let place = Placement::nodes(&node_of);
        let g = ring(6);
        let plain: Vec<u32> = (0..6).collect();
        assert_eq!(g.cost(&place, &plain).nodes, 6);
        let pos = refine(&g, &place, plain);
        let label_at = labels(&node_of, &pos);
        let crossing = (0..6)
            .filter(|&p| label_at[p] != label_at[(p + 1) % 6])
            .count();
        assert_eq!(crossing, 2);
        assert!(g.cost(&place, &pos).nodes < 6);
    }

    /// Every permutation of `0..n`.
    fn permutations(n: u32) -> Vec<Vec<u32>> {
        if n == 0 {
            return vec![Vec::new()];
        }
        let mut out = Vec::new();
        for p in permutations(n - 1) {
            for i in 0..=p.len() {
                let mut q = p.clone();
                q.insert(i, n - 1);
                out.push(q);
            }
        }
        out
    }

    #[test]
    fn refining_puts_switches_first_and_reaches_the_best_placement_here() {
        // 4 nodes of 2 ranks, nodes 0 and 1 under one switch, 2 and 3 under another; each
        // node's ranks apart and the switches interleaved. On recursive doubling's graph
        // (where this order is already the best: its lightest step crosses switches) and
        // on a ring (where it is the worst), the search reaches the best of all 8!
        // placements.
        let node_of = [0, 2, 1, 3, 0, 2, 1, 3];
        let switch_of = [0, 1, 0, 1, 0, 1, 0, 1];
        let place = Placement::with_switches(&node_of, &switch_of);
        let all = permutations(8);
        for g in [
            Graph::new(8, |p| (0..3).map(move |k| (p ^ (1 << k), 1u64 << k))),
            ring(8),
        ] {
            let plain: Vec<u32> = (0..8).collect();
            let best = all.iter().map(|pos| g.cost(&place, pos)).min().unwrap();
            let searched = g.cost(&place, &refine(&g, &place, plain.clone()));
            assert!(searched <= g.cost(&place, &plain));
            assert_eq!(searched, best);
        }
    }

    #[test]
    fn positions_of_the_ranks_own_labels_are_the_identity() {
        let node_of = [3, 1, 3, 0, 1];
        assert_eq!(positions_of(&node_of, &node_of), [0, 1, 2, 3, 4]);
        let pos = positions_of(&node_of, &[1, 1, 0, 3, 3]);
        assert_eq!(pos, [3, 0, 4, 2, 1]);
        assert_eq!(labels(&node_of, &pos), [1, 1, 0, 3, 3]);
    }
}
