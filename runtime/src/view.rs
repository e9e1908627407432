//! One rank's view of the hierarchy, taken from its plan: its levels, groups and
//! settings (each level's transport comes from a [`Fabric`](crate::transport::Fabric)).

use topo_hierarchy::settings::Collective;
use topo_hierarchy::{LevelName, RankPlan, Settings};

/// A group this rank belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Level {
    /// The level's name.
    pub name: LevelName,
    /// Members (world ranks), ascending; `members[0]` leads. (The network level of
    /// [`View::over_network`] is the exception: its members are in the order they meet,
    /// the lowest first.)
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

    /// Whether this rank takes part in the network part of a collective: it leads every
    /// group it has inside the node and belongs to a group beyond it (a node leader of a
    /// job of several nodes, or the leader of each part of a node when the `node` level
    /// is filtered out).
    pub fn reaches_network(&self) -> bool {
        let intra = self.levels.iter().take_while(|l| l.intra).count();
        intra < self.levels.len() && self.levels[..intra].iter().all(|l| l.me == 0)
    }

    /// The leaf switch this rank's node is under, as a label (the lowest rank under it),
    /// when this rank belongs to a switch's group; else `None`.
    pub fn switch_label(&self) -> Option<u32> {
        self.levels
            .iter()
            .find(|l| matches!(l.name, LevelName::Switch(_)))
            .map(|l| l.members[0])
    }

    /// The order in which the ranks that reach the network meet in [`View::over_network`]:
    /// grouped by their switch label (`switch_of(rank)`: [`View::switch_label`] of the
    /// rank, or the rank itself without one), ascending within a switch, so that the first
    /// exchanges of a recursive doubling or dissemination stay under one leaf switch
    /// however Slurm numbered the nodes. Rank 0, the lowest under the lowest label, comes
    /// first.
    pub fn meeting_order(network: &[u32], switch_of: impl Fn(u32) -> Option<u32>) -> Vec<u32> {
        let mut order: Vec<(u32, u32)> = network
            .iter()
            .map(|&r| (switch_of(r).unwrap_or(r), r))
            .collect();
        order.sort_unstable();
        order.into_iter().map(|(_, r)| r).collect()
    }

    /// This view with every level that leaves the node replaced by one group of `network`:
    /// every rank of the job that [reaches the network](View::reaches_network), in their
    /// [meeting order](View::meeting_order), named as the job's top level. Allreduce and
    /// Barrier run their network part in that group: a recursive doubling or
    /// dissemination among the node leaders crosses the network `log2(nodes)` times (the
    /// first exchanges under one leaf switch), where climbing the leaf and spine groups
    /// and coming back down them crosses it about twice as often. A rank that does not
    /// reach the network keeps its view as it is.
    ///
    /// The group's members are not ascending, so the view serves collectives rooted at
    /// rank 0 (its first member) only.
    pub fn over_network(&self, network: &[u32]) -> View {
        if !self.reaches_network() || network.len() < 2 {
            return self.clone();
        }
        let Some(me) = network.iter().position(|&r| r == self.rank) else {
            return self.clone();
        };
        let intra = self.levels.iter().take_while(|l| l.intra).count();
        let name = self.top.unwrap_or(LevelName::World);
        let mut levels = self.levels[..intra].to_vec();
        levels.push(Level {
            name,
            members: network.to_vec(),
            me,
            intra: false,
        });
        View {
            rank: self.rank,
            size: self.size,
            levels,
            top: Some(name),
            pipeline: self.pipeline,
        }
    }

    /// Position of the group root of `levels[i]` for a collective rooted at `root`: the
    /// root itself if it is a member of the top group, else the leader.
    pub fn group_root(&self, i: usize, root: u32) -> usize {
        let l = &self.levels[i];
        if l.members.first() == Some(&root) {
            return 0;
        }
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
    fn the_network_levels_become_one_group_of_the_ranks_that_reach_it() {
        let level = |name, members: Vec<u32>, me, intra| Level {
            name,
            members,
            me,
            intra,
        };
        // Rank 8 leads node 8-15 and its leaf switch (nodes at 0, 8, 16, 24; leaves of two).
        let view = View {
            rank: 8,
            size: 32,
            levels: vec![
                level(LevelName::Node, vec![8, 12], 0, true),
                level(LevelName::Switch(1), vec![8, 0], 0, false),
            ],
            top: Some(LevelName::World),
            pipeline: true,
        };
        assert!(view.reaches_network());
        let network = [0, 8, 16, 24];
        let flat = view.over_network(&network);
        assert_eq!(flat.levels.len(), 2);
        assert_eq!(flat.levels[0], view.levels[0]);
        assert_eq!(
            flat.levels[1],
            level(LevelName::World, network.to_vec(), 1, false)
        );
        assert!(flat.is_top(1));
        assert!(flat.pipeline);
        // A rank that leads no node, and a one-node job, keep their view.
        let member = View {
            rank: 12,
            levels: vec![level(LevelName::Node, vec![8, 12], 1, true)],
            ..view.clone()
        };
        assert!(!member.reaches_network());
        assert_eq!(member.over_network(&network), member);
        let one_node = View {
            levels: vec![level(LevelName::Node, vec![8, 12], 0, true)],
            top: Some(LevelName::Node),
            ..view.clone()
        };
        assert!(!one_node.reaches_network());
        assert_eq!(one_node.over_network(&[8]), one_node);
    }

    #[test]
    fn ranks_meet_grouped_by_switch_and_rank_0_first() {
        // Nodes of 2 ranks, odd nodes under the leaf labelled 0, even ones under 2; rank 8
        // is under no switch of the map.
        let label = |r: u32| (r < 8).then_some(if (r / 2).is_multiple_of(2) { 0 } else { 2 });
        assert_eq!(
            View::meeting_order(&[0, 2, 4, 6, 8], label),
            [0, 4, 2, 6, 8]
        );
        assert_eq!(View::meeting_order(&[0, 2, 4], |_| None), [0, 2, 4]);
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
