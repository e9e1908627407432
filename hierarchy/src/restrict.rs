//! A communicator's hierarchy: the job's hierarchy restricted to the communicator's
//! members, in the communicator's own ranks.
//!
//! Every rank knows its *domain* at each level of the job ([`Hierarchy::domains_of`]): the
//! lowest world rank that shares that level's cache, NUMA node, socket, node or switch
//! with it (itself, where it shares the level with nobody). The members of a communicator
//! exchange their domains, and each works out the same groups from them
//! ([`restrict`]):
//! - at every level, a group holds the members (or their representatives from the level
//!   below) that share that level's domain;
//! - the leader is the member with the lowest rank *in the communicator*, and represents
//!   its group at the next level;
//! - levels where every group has one member drop out.
//!
//! Any rank order works: congruent to world, similar (the same ranks in another order) or
//! any subset. Restricted to world in world's order, the groups are world's own.

use crate::build::{Group, Hierarchy, RankIndex, merge_levels, partition};
use crate::error::{Error, Result};
use crate::level::LevelName;
use crate::plan::PlanGroup;

impl Hierarchy {
    /// `rank`'s domain at each level of [`Hierarchy::levels`], bottom-up: the lowest world
    /// rank that shares the level's domain with it, or its representative from the level
    /// below where that one shares the level with nobody.
    pub fn domains_of(&self, rank: u32) -> Vec<u32> {
        let mut rep = rank;
        self.levels()
            .iter()
            .map(|&level| {
                if let Some(g) = self.groups_of(rep).find(|g| g.level == level) {
                    rep = g.leader();
                }
                rep
            })
            .collect()
    }
}

/// The levels of several plans of one job, united bottom-up, each plan's order kept.
///
/// The launcher plans each node from its own CPU bindings alone, so plans of ranks on
/// different nodes can list different intra-node levels (a level drops out of a node where
/// every group has one member: on a node with two ranks per core, `core` is a level; on a
/// node with one, it is not). Levels above the node are the same in every plan of a job.
pub fn union_of_levels<'a>(plans: impl IntoIterator<Item = &'a [LevelName]>) -> Vec<LevelName> {
    let mut all = Vec::new();
    for levels in plans {
        merge_levels(&mut all, levels);
    }
    all
}

/// A rank's domains at `levels` (a union of plans' levels, [`union_of_levels`]) from its
/// plan's own `(level, domain)` pairs (bottom-up, a subsequence of `levels`): at a level its
/// plan lacks, its domain at its closest own level below (its world rank `rank` where it
/// has none), as [`Hierarchy::domains_of`] carries a representative past a level where the
/// rank shares nothing.
pub fn domains_at(own: &[(LevelName, u32)], rank: u32, levels: &[LevelName]) -> Vec<u32> {
    let mut carry = rank;
    levels
        .iter()
        .map(|l| {
            if let Some(&(_, d)) = own.iter().find(|(x, _)| x == l) {
                carry = d;
            }
            carry
        })
        .collect()
}

/// The hierarchy of a communicator, in its ranks (`0..size`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restricted {
    size: u32,
    levels: Vec<LevelName>,
    groups: Vec<Group>,
    index: RankIndex,
}

/// The hierarchy of a communicator whose rank `i` has the domains `domains[i]` at the
/// job's `levels` (bottom-up, as [`Hierarchy::levels`] and [`Hierarchy::domains_of`] give
/// them). Every member calls it with the same arguments and gets the same groups.
///
/// Fails if a member's domains do not match the levels, or if the domains do not nest (two
/// members that share a level's domain but not a finer one's are fine; members that share
/// a finer domain and not a coarser one are not, since that cannot come from one job).
pub fn restrict(levels: &[LevelName], domains: &[Vec<u32>]) -> Result<Restricted> {
    let size = u32::try_from(domains.len())
        .map_err(|_| Error::plan("a communicator of more than 2^32 ranks"))?;
    if let Some(i) = domains.iter().position(|d| d.len() != levels.len()) {
        return Err(Error::plan(format!(
            "communicator rank {i} has {} domains for the job's {} levels",
            domains[i].len(),
            levels.len()
        )));
    }
    let mut groups = Vec::new();
    let mut kept = Vec::new();
    let mut participants: Vec<u32> = (0..size).collect();
    for (l, &level) in levels.iter().enumerate() {
        let start = groups.len();
        participants = partition(
            &participants,
            level,
            |p| Some(domains[p as usize][l]),
            &mut groups,
        );
        if groups.len() > start {
            kept.push(level);
        }
    }
    if participants.len() > 1 {
        // Every rank of a job shares its top level's domain; members that do not cannot
        // come from one job's plans.
        return Err(Error::plan(format!(
            "the communicator's domains leave {} ranks apart at the job's top level",
            participants.len()
        )));
    }
    let index = RankIndex::new(size, &groups);
    Ok(Restricted {
        size,
        levels: kept,
        groups,
        index,
    })
}

impl Restricted {
    /// Number of ranks of the communicator.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The levels that hold at least one group, bottom-up.
    pub fn levels(&self) -> &[LevelName] {
        &self.levels
    }

    /// Every group, level by level, bottom-up.
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// The groups `rank` (a communicator rank) belongs to, bottom-up.
    pub fn groups_of(&self, rank: u32) -> impl Iterator<Item = &Group> + '_ {
        self.index
            .of(rank)
            .iter()
            .map(|&g| &self.groups[g as usize])
    }

    /// The groups of `rank`, bottom-up, as plan groups (in communicator ranks).
    pub fn plan_groups(&self, rank: u32) -> Vec<PlanGroup> {
        self.groups_of(rank).map(PlanGroup::from).collect()
    }

    /// The level of the communicator's top group, `None` when it has no group (one rank).
    pub fn top(&self) -> Option<LevelName> {
        self.groups.last().map(|g| g.level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LevelFilter, NetworkMap, build, job_from_str};

    /// 2 nodes x 2 NUMA nodes x 2 cores, one rank per core, block: world rank r is on node
    /// r / 4, NUMA node (r / 2) % 2.
    fn hierarchy() -> Hierarchy {
        let job = job_from_str(
            "layout: {nodes: 'n[1-2]', ranks_per_node: 4, mapping: by-core,
               hardware: {sockets: 1, numa_per_socket: 2, cores_per_numa: 2}}",
        )
        .unwrap();
        let filter = LevelFilter::parse("numa,node").unwrap();
        build(&job, None::<&NetworkMap>, &filter).unwrap()
    }

    fn of(h: &Hierarchy, world: &[u32]) -> Restricted {
        let d: Vec<_> = world.iter().map(|&r| h.domains_of(r)).collect();
        restrict(h.levels(), &d).unwrap()
    }

    fn members(r: &Restricted, level: &str) -> Vec<Vec<u32>> {
        let level: LevelName = level.parse().unwrap();
        let g = r.groups().iter().filter(|g| g.level == level);
        g.map(|g| g.members.clone()).collect()
    }

    #[test]
    fn world_in_order_is_worlds_hierarchy() {
        let h = hierarchy();
        assert_eq!(h.domains_of(5), [4, 4, 0]);
        let r = of(&h, &(0..8).collect::<Vec<_>>());
        for rank in 0..8 {
            assert_eq!(r.plan_groups(rank), h.plan_groups(rank));
        }
        assert_eq!(r.levels(), h.levels());
    }

    #[test]
    fn a_reversed_split_leads_from_its_own_lowest_rank() {
        // Communicator rank i is world rank 7 - i.
        let r = of(&hierarchy(), &[7, 6, 5, 4, 3, 2, 1, 0]);
        assert_eq!(
            members(&r, "numa"),
            [vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]
        );
        assert_eq!(members(&r, "node"), [vec![0, 2], vec![4, 6]]);
        assert_eq!(members(&r, "world"), [vec![0, 4]]);
    }

    #[test]
    fn one_rank_per_node_keeps_only_the_network() {
        // A column: world ranks 1 and 5, one per node.
        let r = of(&hierarchy(), &[5, 1]);
        assert_eq!(r.levels(), ["world".parse::<LevelName>().unwrap()]);
        assert_eq!(members(&r, "world"), [vec![0, 1]]);
        // A node communicator: no network level.
        let r = of(&hierarchy(), &[6, 4, 7]);
        assert_eq!(members(&r, "numa"), [vec![0, 2]]);
        assert_eq!(members(&r, "node"), [vec![0, 1]]);
        assert_eq!(r.top(), Some("node".parse().unwrap()));
    }

    #[test]
    fn one_rank_has_no_group() {
        let r = of(&hierarchy(), &[3]);
        assert!(r.groups().is_empty() && r.levels().is_empty() && r.top().is_none());
        assert!(r.plan_groups(0).is_empty());
    }

    #[test]
    fn domains_that_cannot_come_from_one_job_are_refused() {
        let h = hierarchy();
        let short = vec![h.domains_of(0), vec![0]];
        assert!(restrict(h.levels(), &short).is_err());
        let apart = vec![vec![0, 0, 0], vec![1, 1, 1]];
        let e = restrict(h.levels(), &apart).unwrap_err().to_string();
        assert!(e.contains("apart"), "{e}");
    }
}
