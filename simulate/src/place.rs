//! Where each rank of a job is, and the link class between any two ranks: the lowest
//! level they share (a cache, a NUMA node, a socket, a node, a switch).

use topo_hierarchy::{Job, NetworkMap, ObjectKind};

use crate::model::LinkClass;

/// Every rank's node and hardware objects, and every node's switches.
#[derive(Debug)]
pub struct Places {
    /// Each rank's node.
    node: Vec<u32>,
    /// Each rank's L2, L3, NUMA node and socket (`u32::MAX`: unknown or several).
    hw: Vec<[u32; 4]>,
    /// Each node's switches, leaf first (empty without a map).
    path: Vec<Vec<u32>>,
}

const UNKNOWN: u32 = u32::MAX;

impl Places {
    /// The places of `job`'s ranks, with `map`'s switches.
    pub fn new(job: &Job, map: Option<&NetworkMap>) -> Places {
        let kinds = [
            ObjectKind::L2,
            ObjectKind::L3,
            ObjectKind::Numa,
            ObjectKind::Package,
        ];
        let node = (0..job.size()).map(|r| job.node_of(r)).collect();
        let hw = (0..job.size())
            .map(|r| {
                let loc = job.locality_of(r);
                kinds.map(|k| loc.and_then(|l| l.single(k)).unwrap_or(UNKNOWN))
            })
            .collect();
        let path = job
            .nodes()
            .iter()
            .map(|name| map.and_then(|m| m.path(name)).unwrap_or_default())
            .collect();
        Places { node, hw, path }
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.node.len()
    }

    /// The number of nodes.
    pub fn nodes(&self) -> usize {
        self.path.len()
    }

    /// Rank `r`'s node.
    pub fn node_of(&self, r: u32) -> u32 {
        self.node[r as usize]
    }

    /// The class of the link between ranks `a` and `b`.
    pub fn class(&self, a: u32, b: u32) -> LinkClass {
        let (na, nb) = (self.node[a as usize], self.node[b as usize]);
        if na != nb {
            let (pa, pb) = (&self.path[na as usize], &self.path[nb as usize]);
            return match (pa.first(), pb.first()) {
                (Some(x), Some(y)) if x == y => LinkClass::Leaf,
                _ if pa.iter().any(|s| pb.contains(s)) => LinkClass::Spine,
                _ => LinkClass::World,
            };
        }
        let (ha, hb) = (self.hw[a as usize], self.hw[b as usize]);
        let shared = |i: usize| ha[i] != UNKNOWN && ha[i] == hb[i];
        [
            LinkClass::L2,
            LinkClass::L3,
            LinkClass::Numa,
            LinkClass::Socket,
        ]
        .into_iter()
        .enumerate()
        .find(|&(i, _)| shared(i))
        .map_or(LinkClass::Node, |(_, c)| c)
    }
}
