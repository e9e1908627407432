//! One rank's view of the hierarchy, taken from its plan, and the [`Fabric`] that gives
//! each level its transport.

use topo_hierarchy::settings::Collective;
use topo_hierarchy::{LevelName, RankPlan, Settings};

use crate::transport::Transport;

/// A group this rank belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Level {
    /// The level's name.
    pub name: LevelName,
    /// Members (world ranks), ascending; `members[0]` leads.
    pub members: Vec<u32>,
    /// This rank's position in `members`.
    pub me: usize,
    /// Whether every member is on this rank's node (shared memory) or not (MPI).
    pub intra: bool,
}

impl Level {
    /// The position of world rank `rank` in `members` (0 if it is not a member). A group
    /// that holds ranks 0.. in order (every one-group job) finds it without a search.
    #[inline]
    pub fn position(&self, rank: u32) -> usize {
        match self.members.get(rank as usize) {
            Some(&r) if r == rank => rank as usize,
            _ => self.members.binary_search(&rank).unwrap_or(0),
        }
    }
}

/// What a rank knows of the hierarchy: its groups bottom-up and the job's top level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// This rank.
    pub rank: u32,
    /// Job size.
    pub size: u32,
    /// Its groups, bottom-up.
    pub levels: Vec<Level>,
    /// Level of the job's top group.
    pub top: Option<LevelName>,
    /// Whether large messages move through the levels in pipelined chunks: true when
    /// some rank of the job has more than one level. Every rank must agree, so
    /// [`View::from_plan`]'s local guess is replaced by a job-wide agreement at init.
    pub pipeline: bool,
}

impl View {
    /// The view described by a plan.
    pub fn from_plan(plan: &RankPlan) -> Self {
        let levels: Vec<Level> = plan
            .groups
            .iter()
            .map(|g| Level {
                name: g.level,
                me: g.members.partition_point(|&m| m < plan.rank),
                intra: g
                    .members
                    .iter()
                    .all(|m| plan.peers.binary_search(m).is_ok()),
                members: g.members.clone(),
            })
            .collect();
        View {
            rank: plan.rank,
            size: plan.size,
            pipeline: levels.len() > 1,
            levels,
            top: plan.top,
        }
    }

    /// Position of the group root of `levels[i]` for a collective rooted at `root`: the
    /// root itself if it is a member of the top group, else the leader.
    pub fn group_root(&self, i: usize, root: u32) -> usize {
        let l = &self.levels[i];
        match l.members.binary_search(&root) {
            Ok(p) if self.is_top(i) => p,
            _ => 0,
        }
    }

    /// The pipeline chunk of `collective` for a message of `total` bytes, rounded down to
    /// whole `elem`-byte elements (at least one element). Without pipelining there is
    /// nothing to overlap, so the whole message goes at once.
    pub fn chunk_bytes(
        &self,
        s: &Settings,
        collective: Collective,
        total: usize,
        elem: usize,
    ) -> usize {
        let c = if self.pipeline {
            s.chunk_for(collective, total) as usize
        } else {
            usize::MAX / 2
        };
        (c - c % elem).max(elem)
    }

    /// The one group of a job whose ranks all share it and nothing else (one node, or one
    /// rank per node under one switch), when messages are not pipelined: every
    /// collective is then that group's algorithm alone, with no chunks and no detour
    /// (every root is a member).
    pub fn only_level(&self) -> Option<&Level> {
        match self.levels.as_slice() {
            [l] if !self.pipeline && self.is_top(0) => Some(l),
            _ => None,
        }
    }

    /// Whether `levels[i]` is the job's top group.
    pub fn is_top(&self, i: usize) -> bool {
        i + 1 == self.levels.len() && Some(self.levels[i].name) == self.top
    }

    /// Whether `rank` is a member of the job's top group, as far as this rank can tell:
    /// exact when asked about itself and when this rank is in the top group (rank 0 is).
    /// A root outside the top group reaches it through rank 0 (the coll/tcl detour); both
    /// ends of that detour answer this question the same way.
    pub fn top_has(&self, rank: u32) -> bool {
        match self.levels.last() {
            Some(l) if self.is_top(self.levels.len() - 1) => l.members.binary_search(&rank).is_ok(),
            _ => false,
        }
    }
}

/// Gives each level, and each direct peer, the transport that reaches it.
pub trait Fabric {
    /// The transport for `levels[i]`.
    fn level(&mut self, i: usize) -> &mut dyn Transport;
    /// The transport that reaches `peer` directly.
    fn direct(&mut self, peer: u32) -> &mut dyn Transport;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(levels: usize, pipeline: bool, top: bool) -> View {
        let names = [LevelName::Node, LevelName::World];
        View {
            rank: 0,
            size: 4,
            levels: (0..levels)
                .map(|i| Level {
                    name: names[i],
                    members: vec![0, 1, 2, 3],
                    me: 0,
                    intra: i == 0,
                })
                .collect(),
            top: top.then_some(names[levels.max(1) - 1]),
            pipeline,
        }
    }

    #[test]
    fn only_a_single_top_level_without_pipelining_is_the_only_level() {
        assert!(view(1, false, true).only_level().is_some());
        assert!(view(1, true, true).only_level().is_none());
        assert!(view(1, false, false).only_level().is_none());
        assert!(view(2, false, true).only_level().is_none());
        assert!(view(0, false, false).only_level().is_none());
    }

    #[test]
    fn a_position_is_found_with_or_without_the_shortcut() {
        let level = |members: Vec<u32>| Level {
            name: LevelName::Node,
            members,
            me: 0,
            intra: true,
        };
        let dense = level(vec![0, 1, 2, 3]);
        assert_eq!(
            (0..4).map(|r| dense.position(r)).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        let sparse = level(vec![2, 5, 9]);
        assert_eq!(sparse.position(2), 0);
        assert_eq!(sparse.position(5), 1);
        assert_eq!(sparse.position(9), 2);
        // Rank 1 would be `members[1]` by the shortcut's guess, but that is 5.
        assert_eq!(sparse.position(1), 0);
        assert_eq!(level(vec![1, 2]).position(2), 1);
    }
}
