//! What the job looks like to the tuner: its size, nodes, levels and the settings it
//! started from, the same on every rank.

use anyhow::{Context, bail};
use mpi::collective::{CommunicatorCollectives, SystemOperation};
use mpi::topology::{Communicator, SimpleCommunicator};
use topo_hierarchy::{LevelName, PLAN_ENV, RankPlan};

#[derive(Debug)]
pub(crate) struct Job {
    /// Levels with groups of two or more ranks, bottom-up: name, whether its groups are
    /// inside one node, the largest group.
    pub(crate) levels: Vec<(LevelName, bool, u32)>,
    /// Some rank has more than one level (messages are pipelined in chunks).
    pub(crate) pipelined: bool,
    /// The settings the run starts from (the plan's).
    pub(crate) base: Vec<(String, String)>,
    pub(crate) size: i32,
    /// Nodes in the job (the allreduce defaults depend on it).
    pub(crate) nodes: u32,
    pub(crate) node: String,
}

impl Job {
    /// The levels, comma-separated.
    pub(crate) fn level_names(&self) -> String {
        let names: Vec<String> = self.levels.iter().map(|l| l.0.to_string()).collect();
        names.join(",")
    }
}

/// Every level name a plan can hold, in the order of the hierarchy.
pub(crate) fn level_table() -> Vec<LevelName> {
    let mut t: Vec<LevelName> = topo_hierarchy::IntraLevel::ALL
        .into_iter()
        .map(LevelName::Intra)
        .collect();
    t.push(LevelName::Node);
    t.extend((1..=32).map(LevelName::Switch));
    t.push(LevelName::World);
    t
}

pub(crate) fn job(world: &SimpleCommunicator) -> anyhow::Result<Job> {
    let text = std::env::var(PLAN_ENV).with_context(|| {
        format!(
            "{PLAN_ENV} is not set: start the tuner with `srun --mpi=pmix topo-run tune`, so \
             that every rank has its plan"
        )
    })?;
    let plan = RankPlan::decode(&text).context("reading the rank's plan")?;
    let table = level_table();
    // Per level: the largest group, and whether some group of it spans nodes.
    let mut members = vec![0u32; table.len()];
    let mut spans = vec![0u32; table.len()];
    for g in &plan.groups {
        let Some(i) = table.iter().position(|l| *l == g.level) else {
            bail!("level {} is beyond what the tuner knows", g.level);
        };
        members[i] = members[i].max(g.members.len() as u32);
        let intra = g.members.iter().all(|m| plan.peers.contains(m));
        spans[i] = u32::from(!intra);
    }
    let (mut all_members, mut all_spans) = (vec![0u32; table.len()], vec![0u32; table.len()]);
    let max = SystemOperation::max();
    world.all_reduce_into(&members[..], &mut all_members[..], max);
    world.all_reduce_into(&spans[..], &mut all_spans[..], max);
    let groups = plan.groups.len() as u32;
    let mut most_groups = 0u32;
    world.all_reduce_into(&groups, &mut most_groups, max);
    let leader = u32::from(plan.peers.first().is_none_or(|&p| p == plan.rank));
    let mut nodes = 0u32;
    world.all_reduce_into(&leader, &mut nodes, SystemOperation::sum());
    let levels = (0..table.len())
        .filter(|&i| all_members[i] >= 2)
        .map(|i| (table[i], all_spans[i] == 0, all_members[i]))
        .collect();
    let base = plan
        .settings
        .iter()
        .filter(|(k, _)| k != "progress")
        .cloned()
        .collect();
    Ok(Job {
        levels,
        pipelined: most_groups > 1,
        base,
        size: world.size(),
        nodes,
        node: plan.node,
    })
}
