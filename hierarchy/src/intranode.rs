//! Choosing the intra-node levels of one node (DESIGN §4): usability, dropping, ordering and
//! naming of the candidates `core`, `l1`, `l2`, `l3`, `numa`, `socket`.

use std::collections::HashMap;

use crate::job::Job;
use crate::level::{IntraLevel, LevelFilter, LevelName};

/// One kept intra-node level of a node: which group every rank of the node falls in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IntraPartition {
    pub(crate) level: IntraLevel,
    /// Group label (0..groups) of each rank of the node, by position in the node's rank list.
    pub(crate) labels: Vec<u32>,
    /// The hardware object index behind each label (for display).
    pub(crate) units: Vec<u32>,
}

impl IntraPartition {
    fn groups(&self) -> usize {
        self.units.len()
    }

    /// Whether every group of `self` lies inside one group of `coarser`.
    fn nests_in(&self, coarser: &IntraPartition) -> bool {
        let mut map = vec![u32::MAX; self.groups()];
        self.labels
            .iter()
            .zip(&coarser.labels)
            .all(|(&fine, &coarse)| {
                let slot = &mut map[fine as usize];
                if *slot == u32::MAX {
                    *slot = coarse;
                }
                *slot == coarse
            })
    }
}

/// Relabels object ids to 0.. in order of first appearance, so that equal partitions have
/// equal labels.
fn canonical(level: IntraLevel, objects: &[u32]) -> IntraPartition {
    let mut units: Vec<u32> = Vec::new();
    let mut label_of: HashMap<u32, u32> = HashMap::new();
    let labels = objects
        .iter()
        .map(|&o| {
            *label_of.entry(o).or_insert_with(|| {
                units.push(o);
                units.len() as u32 - 1
            })
        })
        .collect();
    IntraPartition {
        level,
        labels,
        units,
    }
}

/// The kept intra-node levels of the node whose ranks are `ranks`, finest first.
pub(crate) fn node_levels(job: &Job, ranks: &[u32], filter: &LevelFilter) -> Vec<IntraPartition> {
    let n = ranks.len();
    if n < 2 {
        return Vec::new();
    }
    let Some(locs) = ranks
        .iter()
        .map(|&r| job.locality_of(r))
        .collect::<Option<Vec<_>>>()
    else {
        return Vec::new(); // an unbound rank: no intra-node levels on this node
    };
    let node_on = filter.keeps(LevelName::Node);
    let mut candidates: Vec<IntraPartition> = Vec::new();
    for level in IntraLevel::ALL {
        if !filter.keeps(LevelName::Intra(level)) {
            continue;
        }
        let Some(objects) = locs
            .iter()
            .map(|l| l.single(level.object()))
            .collect::<Option<Vec<u32>>>()
        else {
            continue; // missing or multi-index token: unusable on this node
        };
        let p = canonical(level, &objects);
        if p.groups() == n || (p.groups() == 1 && node_on) {
            continue; // adds nothing over single ranks, or is the node level itself
        }
        match candidates.iter_mut().find(|c| c.labels == p.labels) {
            Some(same) if level.name_preference() < same.level.name_preference() => *same = p,
            Some(_) => {}
            None => candidates.push(p),
        }
    }
    candidates.sort_by_key(|c| (std::cmp::Reverse(c.groups()), c.level));
    let mut kept: Vec<IntraPartition> = Vec::new();
    for c in candidates {
        if kept.last().is_none_or(|finer| finer.nests_in(&c)) {
            kept.push(c);
        }
    }
    kept
}
