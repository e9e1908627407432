//! Group building (DESIGN §4, after Kurnosov's coll/tcl): partition the participants level by
//! level, record groups of two or more, let each group's lowest rank lead it upwards.

use crate::error::{Error, Result};
use crate::intranode::node_levels;
use crate::job::{Job, NodeId};
use crate::level::{LevelFilter, LevelName};
use crate::netmap::NetworkMap;

/// One group of the hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The level it belongs to.
    pub level: LevelName,
    /// What the members share: the hardware object index (intra-node levels), the node id
    /// (`node`), the switch id (`switchN`) or 0 (`world`).
    pub unit: u32,
    /// Member ranks, ascending; `members[0]` is the leader.
    pub members: Vec<u32>,
}

impl Group {
    /// The group's leader (its lowest rank).
    pub fn leader(&self) -> u32 {
        self.members[0]
    }
}

/// The whole job's hierarchy: every group at every level, and for every rank the groups it
/// belongs to, bottom-up.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    size: u32,
    levels: Vec<LevelName>,
    groups: Vec<Group>,
    index: RankIndex,
    node_ranks: Vec<Vec<u32>>,
    node_levels: Vec<Vec<LevelName>>,
    switch_names: Vec<String>,
}

/// Splits `participants` (ascending) by `key`; records groups of 2+ and returns the next
/// participants (group leaders and singletons), ascending.
pub(crate) fn partition(
    participants: &[u32],
    level: LevelName,
    key: impl Fn(u32) -> Option<u32>,
    groups_out: &mut Vec<Group>,
) -> Vec<u32> {
    let mut slot: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    let mut buckets: Vec<(u32, Vec<u32>)> = Vec::new();
    let mut next = Vec::new();
    for &p in participants {
        match key(p) {
            None => next.push(p),
            Some(k) => {
                let i = *slot.entry(k).or_insert_with(|| {
                    buckets.push((k, Vec::new()));
                    buckets.len() - 1
                });
                buckets[i].1.push(p);
            }
        }
    }
    for (unit, members) in buckets {
        next.push(members[0]);
        if members.len() >= 2 {
            groups_out.push(Group {
                level,
                unit,
                members,
            });
        }
    }
    next.sort_unstable();
    next
}

/// Builds the hierarchy of `job` under `map` (if any), keeping the levels `filter` allows.
///
/// Fails if a node of the job is missing from the map.
pub fn build(job: &Job, map: Option<&NetworkMap>, filter: &LevelFilter) -> Result<Hierarchy> {
    let node_ranks = job.ranks_by_node();
    let mut groups: Vec<Group> = Vec::new();
    let mut levels: Vec<LevelName> = Vec::new();
    let mut node_levels_out = Vec::with_capacity(node_ranks.len());

    // Switch paths first, so that a missing node fails before any work.
    let paths: Vec<Vec<u32>> = match map {
        None => Vec::new(),
        Some(map) => {
            let mut paths = Vec::with_capacity(job.node_count());
            let mut missing = job.nodes().iter().filter(|n| map.leaf_of(n).is_none());
            if let Some(first) = missing.next() {
                return Err(Error::NodeNotInMap {
                    node: first.clone(),
                    others: missing.count(),
                });
            }
            for n in job.nodes() {
                paths.push(map.path(n).unwrap_or_default());
            }
            paths
        }
    };

    // Intra-node levels, node by node.
    let mut participants: Vec<u32> = Vec::with_capacity(job.size() as usize);
    for ranks in &node_ranks {
        let kept = node_levels(job, ranks, filter);
        let mut local: Vec<u32> = (0..ranks.len() as u32).collect();
        let mut names = Vec::with_capacity(kept.len());
        for part in &kept {
            let level = LevelName::Intra(part.level);
            let start = groups.len();
            local = partition(
                &local,
                level,
                |p| Some(part.labels[p as usize]),
                &mut groups,
            );
            for g in &mut groups[start..] {
                g.unit = part.units[g.unit as usize];
                for m in &mut g.members {
                    *m = ranks[*m as usize];
                }
            }
            names.push(level);
        }
        merge_levels(&mut levels, &names);
        node_levels_out.push(names);
        participants.extend(local.into_iter().map(|p| ranks[p as usize]));
    }
    participants.sort_unstable();

    let mut run = |level: LevelName, participants: &[u32], key: &dyn Fn(u32) -> Option<u32>| {
        let start = groups.len();
        let next = partition(participants, level, key, &mut groups);
        if groups.len() > start {
            levels.push(level);
        }
        next
    };
    if filter.keeps(LevelName::Node) {
        participants = run(LevelName::Node, &participants, &|r| Some(job.node_of(r)));
    }
    let height = paths.iter().map(Vec::len).max().unwrap_or(0);
    for h in 1..=height {
        let level = LevelName::Switch(h as u16);
        if filter.keeps(level) {
            participants = run(level, &participants, &|r| {
                paths[job.node_of(r) as usize].get(h - 1).copied()
            });
        }
    }
    if participants.len() > 1 {
        participants = run(LevelName::World, &participants, &|_| Some(0));
    }
    debug_assert!(participants.len() <= 1 || job.size() == 0);

    // Per-rank index, bottom-up: groups were created bottom-up for every rank.
    let size = job.size();
    let index = RankIndex::new(size, &groups);
    let switch_names = map
        .map(|m| {
            (0..m.switch_count() as u32)
                .map(|s| m.switch_name(s).to_string())
                .collect()
        })
        .unwrap_or_default();
    Ok(Hierarchy {
        size,
        levels,
        groups,
        index,
        node_ranks,
        node_levels: node_levels_out,
        switch_names,
    })
}

/// For every rank, the indices of the groups it belongs to, in the order of the groups:
/// `ids[start[r]..start[r + 1]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RankIndex {
    start: Vec<u32>,
    ids: Vec<u32>,
}

impl RankIndex {
    /// The index of `groups` over ranks `0..size`.
    pub(crate) fn new(size: u32, groups: &[Group]) -> RankIndex {
        let (start, ids) = index_by_rank(size, groups);
        RankIndex { start, ids }
    }

    /// The indices of the groups `rank` belongs to.
    pub(crate) fn of(&self, rank: u32) -> &[u32] {
        let (a, b) = (
            self.start[rank as usize] as usize,
            self.start[rank as usize + 1] as usize,
        );
        &self.ids[a..b]
    }
}

fn index_by_rank(size: u32, groups: &[Group]) -> (Vec<u32>, Vec<u32>) {
    let mut rank_start = vec![0u32; size as usize + 1];
    for g in groups {
        for &m in &g.members {
            rank_start[m as usize + 1] += 1;
        }
    }
    for i in 0..size as usize {
        rank_start[i + 1] += rank_start[i];
    }
    let mut fill = rank_start.clone();
    let mut rank_groups = vec![0u32; rank_start[size as usize] as usize];
    for (gi, g) in groups.iter().enumerate() {
        for &m in &g.members {
            rank_groups[fill[m as usize] as usize] = gi as u32;
            fill[m as usize] += 1;
        }
    }
    (rank_start, rank_groups)
}

/// Adds one node's level sequence to the job-wide list, keeping each node's order. A level
/// new to the list goes after this node's previous level and before the first level that is
/// coarser in hardware order.
pub(crate) fn merge_levels(all: &mut Vec<LevelName>, node: &[LevelName]) {
    let mut at = 0;
    for l in node {
        match all.iter().position(|x| x == l) {
            Some(i) => at = at.max(i + 1),
            None => {
                let pos = (at..all.len()).find(|&i| all[i] > *l).unwrap_or(all.len());
                all.insert(pos, *l);
                at = pos + 1;
            }
        }
    }
}

impl Hierarchy {
    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The levels that hold at least one group, bottom-up.
    pub fn levels(&self) -> &[LevelName] {
        &self.levels
    }

    /// Every group, intra-node ones first (node by node), then level by level.
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// The indices (into [`Hierarchy::groups`]) of the groups `rank` belongs to, bottom-up.
    pub fn group_ids_of(&self, rank: u32) -> &[u32] {
        self.index.of(rank)
    }

    /// The groups `rank` belongs to, bottom-up.
    pub fn groups_of(&self, rank: u32) -> impl Iterator<Item = &Group> + '_ {
        self.group_ids_of(rank)
            .iter()
            .map(|&g| &self.groups[g as usize])
    }

    /// The ranks of each node (node ids as in the [`Job`]), ascending.
    pub fn node_ranks(&self) -> &[Vec<u32>] {
        &self.node_ranks
    }

    /// The position of `rank` among the ranks of its node `node`.
    pub fn local_rank(&self, rank: u32, node: NodeId) -> u32 {
        self.node_ranks[node as usize].partition_point(|&r| r < rank) as u32
    }

    /// The intra-node levels kept on each node, finest first.
    pub fn node_levels(&self) -> &[Vec<LevelName>] {
        &self.node_levels
    }

    /// The name of a switch of the network map the hierarchy was built with.
    pub fn switch_name(&self, id: u32) -> &str {
        self.switch_names
            .get(id as usize)
            .map_or("?", String::as_str)
    }
}
