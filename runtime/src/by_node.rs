//! A context's ranks by node: which node each rank is on and its place among that node's
//! ranks, for the collectives that spread their network traffic over a node's ranks (the
//! Alltoall's spread form and the order of its direct exchange). A context keeps every
//! rank's node label from its setup ([`ByNode::new`] on them), so that starting such a
//! collective waits for nobody.

/// The ranks of a context by node. Nodes are numbered in the order of their lowest rank;
/// each node's ranks are ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByNode {
    /// The node of each rank.
    node: Vec<u32>,
    /// Each rank's place among its node's ranks.
    local: Vec<u32>,
    /// Each node's ranks, ascending.
    ranks: Vec<Vec<u32>>,
}

impl ByNode {
    /// The ranks on the nodes `label[r]` (any number naming a node: the same for the ranks
    /// of one node, different for different nodes).
    pub fn new(label: &[u32]) -> ByNode {
        let mut index = std::collections::HashMap::new();
        let mut ranks: Vec<Vec<u32>> = Vec::new();
        let (mut node, mut local) = (Vec::with_capacity(label.len()), Vec::new());
        local.reserve(label.len());
        for (r, l) in label.iter().enumerate() {
            let k = *index.entry(l).or_insert_with(|| {
                ranks.push(Vec::new());
                ranks.len() - 1
            });
            node.push(k as u32);
            local.push(ranks[k].len() as u32);
            ranks[k].push(r as u32);
        }
        ByNode { node, local, ranks }
    }

    /// How many nodes.
    pub fn nodes(&self) -> usize {
        self.ranks.len()
    }

    /// How many ranks.
    pub fn size(&self) -> usize {
        self.node.len()
    }

    /// The node of rank `r`.
    pub fn node_of(&self, r: u32) -> usize {
        self.node[r as usize] as usize
    }

    /// Rank `r`'s place among its node's ranks.
    pub fn local_of(&self, r: u32) -> usize {
        self.local[r as usize] as usize
    }

    /// Node `n`'s ranks, ascending.
    pub fn ranks(&self, n: usize) -> &[u32] {
        &self.ranks[n]
    }

    /// The ranks of `nodes`, node after node, each node's in rank order.
    pub fn ranks_of(&self, nodes: &[usize]) -> Vec<u32> {
        nodes
            .iter()
            .flat_map(|&n| self.ranks(n).iter().copied())
            .collect()
    }

    /// How many ranks `nodes` have between them.
    pub fn count(&self, nodes: &[usize]) -> usize {
        nodes.iter().map(|&n| self.ranks(n).len()).sum()
    }

    /// The ranks with the nodes interleaved: the first rank of every node, then the second
    /// of every node, and so on (nodes with fewer ranks drop out of the later turns).
    /// Consecutive ranks of this order sit on different nodes, as cyclic placement puts
    /// them, so a rank that sends to the ranks after it in this order meets a different
    /// node at each step, and the ranks of one node, starting from different places, meet
    /// different nodes at once.
    pub fn interleaved(&self) -> Vec<u32> {
        let most = self.ranks.iter().map(Vec::len).max().unwrap_or(0);
        (0..most)
            .flat_map(|i| self.ranks.iter().filter_map(move |rs| rs.get(i).copied()))
            .collect()
    }

    /// The place (local index) on node `a` of the rank that sends node `a`'s blocks to
    /// node `b` in the spread Alltoall, and the place on node `b` of the rank that receives
    /// them: the node pairs are dealt out over each node's ranks by their distance, `(b -
    /// a) mod nodes` (distance 1 to the first rank, 2 to the second, ...), so that each
    /// rank of a node carries about `nodes / ranks` of its node's pairs, and node `b`
    /// deals out the nodes it hears from by the same distance: the rank at place `i`
    /// sends to the nodes `d` ahead and receives from the nodes `d` back, for `d = i + 1,
    /// i + 1 + ranks, ...`.
    pub fn spread_pair(&self, a: usize, b: usize) -> (usize, usize) {
        let n = self.nodes();
        let d = (b + n - a) % n;
        ((d - 1) % self.ranks[a].len(), (d - 1) % self.ranks[b].len())
    }

    /// The nodes to which the rank at place `i` of node `a` sends node `a`'s blocks in the
    /// spread Alltoall ([`ByNode::spread_pair`]), nearest first.
    pub fn spread_targets(&self, a: usize, i: usize) -> Vec<usize> {
        let (n, l) = (self.nodes(), self.ranks[a].len());
        (i + 1..n).step_by(l).map(|d| (a + d) % n).collect()
    }

    /// The nodes whose blocks for node `b` the rank at place `i` of node `b` receives in
    /// the spread Alltoall ([`ByNode::spread_pair`]), nearest first.
    pub fn spread_sources(&self, b: usize, i: usize) -> Vec<usize> {
        let (n, l) = (self.nodes(), self.ranks[b].len());
        (i + 1..n).step_by(l).map(|d| (b + n - d) % n).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_in_the_order_of_their_lowest_rank() {
        let b = ByNode::new(&[7, 3, 7, 9, 3, 7]);
        assert_eq!(b.nodes(), 3);
        assert_eq!(b.ranks(0), &[0, 2, 5]);
        assert_eq!(b.ranks(1), &[1, 4]);
        assert_eq!(b.ranks(2), &[3]);
        assert_eq!((b.node_of(4), b.local_of(4)), (1, 1));
        assert_eq!(b.interleaved(), vec![0, 1, 3, 2, 4, 5]);
    }

    #[test]
    fn every_pair_of_nodes_has_one_sender_and_one_receiver_that_agree() {
        for label in [
            vec![0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2],
            vec![0, 1, 2, 3, 4, 0, 1, 2, 3, 4],
            vec![5, 5, 5, 6, 7, 7, 8, 8, 8, 8, 8, 9],
            (0..40).map(|r| r / 3).collect(),
        ] {
            let b = ByNode::new(&label);
            let n = b.nodes();
            for a in 0..n {
                for c in (0..n).filter(|&c| c != a) {
                    let (s, r) = b.spread_pair(a, c);
                    let senders: Vec<usize> = (0..b.ranks(a).len())
                        .filter(|&i| b.spread_targets(a, i).contains(&c))
                        .collect();
                    let receivers: Vec<usize> = (0..b.ranks(c).len())
                        .filter(|&i| b.spread_sources(c, i).contains(&a))
                        .collect();
                    assert_eq!(senders, vec![s], "{label:?}: {a} -> {c}");
                    assert_eq!(receivers, vec![r], "{label:?}: {a} -> {c}");
                }
                for i in 0..b.ranks(a).len() {
                    assert!(!b.spread_targets(a, i).contains(&a));
                    assert!(!b.spread_sources(a, i).contains(&a));
                }
            }
        }
    }
}
