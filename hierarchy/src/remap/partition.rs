//! Partitioning an Allgather's exchange graph into the job's nodes (TopoMPI's `π`).
//!
//! The graph's vertices are the exchange's positions `0..n`; an edge from `p` to `q` of
//! weight `w` says that the position-`p` rank sends `w` blocks to the position-`q` rank
//! (for one-byte blocks, summed over the steps). Placing ranks at positions gives every
//! position the label of its rank's node; the cost of a placement is what it sends between
//! nodes:
//! - the weight of every edge whose ends have different labels, plus
//! - the first exchange ("exch."), which sends rank `q`'s block to the rank at position
//!   `q`: one block wherever position `q`'s label is not rank `q`'s node.
//!
//! [`refine`] improves a placement by local search, Kernighan–Lin style: it swaps the
//! labels of two positions whenever that lowers the cost, pass after pass, until a whole
//! pass finds nothing (or [`MAX_PASSES`]). Each swap is judged from the two positions'
//! edges alone (`O(log n)` each), and a pass tries every pair with different labels:
//! `O(n^2 log n)`, so it runs only up to [`REFINE_UP_TO`] ranks, once per context at its
//! first Allgather (at 512 ranks on 13 nodes it took 9 ms for recursive doubling and, at
//! 511, 35 ms for Bruck, in a release build here: hence the limit of 256, about a quarter
//! of that); larger jobs keep the constructed order it would start from. It is
//! deterministic, so every rank computes the same placement on its own.

/// The largest job whose placement [`refine`] searches.
pub const REFINE_UP_TO: usize = 256;

/// The most passes [`refine`] makes.
pub const MAX_PASSES: usize = 8;

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

    /// What `label_at` (the node label of each position) sends between nodes, first
    /// exchange included (`node_of[q]`: rank `q`'s node).
    pub fn cost(&self, node_of: &[u32], label_at: &[u32]) -> u64 {
        // Every send appears at both its ends: count it at its sender only.
        let mut total = 0;
        for (p, edges) in self.edges.iter().enumerate() {
            for &(q, w) in edges {
                if (q as usize) > p && label_at[p] != label_at[q as usize] {
                    total += w;
                }
            }
        }
        total
            + (0..self.size())
                .filter(|&q| node_of[q] != label_at[q])
                .count() as u64
    }

    /// How much swapping the labels of positions `a` and `b` changes the cost (negative:
    /// it saves).
    fn swap_gain(&self, node_of: &[u32], label_at: &[u32], a: usize, b: usize) -> i64 {
        let (x, y) = (label_at[a], label_at[b]);
        let mut delta = 0i64;
        // Position `a` goes from label x to y, `b` from y to x; an edge between them
        // crosses before and after.
        for (me, from, to, other) in [(a, x, y, b), (b, y, x, a)] {
            for &(q, w) in &self.edges[me] {
                let q = q as usize;
                if q == other {
                    continue;
                }
                let l = label_at[q];
                delta += w as i64 * (i64::from(to != l) - i64::from(from != l));
            }
            delta += i64::from(node_of[me] != to) - i64::from(node_of[me] != from);
        }
        delta
    }
}

/// The node label of each position when rank `r` sits at `pos[r]`.
pub fn labels(node_of: &[u32], pos: &[u32]) -> Vec<u32> {
    let mut label_at = vec![0u32; pos.len()];
    for (r, &p) in pos.iter().enumerate() {
        label_at[p as usize] = node_of[r];
    }
    label_at
}

/// The positions of a placement given by its labels: each node's ranks, in rank order,
/// take the positions that carry its label, in order (so the labels `node_of` give the
/// identity).
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

/// Improves the placement `pos` of the ranks of `node_of` on `graph` by swaps that lower
/// its cost (see the module's description); returns it unchanged above [`REFINE_UP_TO`]
/// ranks. The result never costs more than `pos`.
pub fn refine(graph: &Graph, node_of: &[u32], pos: Vec<u32>) -> Vec<u32> {
    let n = graph.size();
    if !(2..=REFINE_UP_TO).contains(&n) {
        return pos;
    }
    let mut label_at = labels(node_of, &pos);
    let mut improved = false;
    for _ in 0..MAX_PASSES {
        let mut swapped = false;
        for a in 0..n {
            for b in a + 1..n {
                if label_at[a] != label_at[b] && graph.swap_gain(node_of, &label_at, a, b) < 0 {
                    label_at.swap(a, b);
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
        positions_of(node_of, &label_at)
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
        let label_at = [2, 2, 1, 0, 1, 0, 0, 1];
        let before = g.cost(&node_of, &label_at);
        for a in 0..8 {
            for b in 0..8 {
                let mut after = label_at;
                after.swap(a, b);
                if label_at[a] != label_at[b] {
                    let gain = g.swap_gain(&node_of, &label_at, a, b);
                    assert_eq!(
                        before as i64 + gain,
                        g.cost(&node_of, &after) as i64,
                        "swap {a} {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn refining_groups_each_node_on_the_ring() {
        // Nodes dealt round-robin along a ring: every edge crosses. Grouped, 2 cross.
        let node_of = [0, 1, 0, 1, 0, 1];
        let g = ring(6);
        let plain: Vec<u32> = (0..6).collect();
        assert_eq!(g.cost(&node_of, &labels(&node_of, &plain)), 6);
        let pos = refine(&g, &node_of, plain);
        let label_at = labels(&node_of, &pos);
        // Two crossing edges, plus the first exchange of the ranks now sitting elsewhere.
        let crossing = (0..6)
            .filter(|&p| label_at[p] != label_at[(p + 1) % 6])
            .count();
        assert_eq!(crossing, 2);
        assert!(g.cost(&node_of, &label_at) < 6);
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
