//! The inputs of one job: for every rank, in rank order, its node and its locality.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::locality::LocalityString;

/// Index of a node in a [`Job`], in order of first appearance.
pub type NodeId = u32;

/// The most ranks a job may have (16,777,216: twice the largest machines' core counts);
/// planning takes about 45 bytes per rank.
pub const MAX_RANKS: u32 = 1 << 24;
/// The most nodes a job may have (1,048,576).
pub const MAX_NODES: u32 = 1 << 20;

/// Where every rank of a job runs. Nodes and locality strings are interned, so a million
/// ranks on identical nodes cost a few bytes each.
#[derive(Debug, Clone, Default)]
pub struct Job {
    nodes: Vec<String>,
    node_index: HashMap<String, NodeId>,
    localities: Vec<LocalityString>,
    locality_index: HashMap<LocalityString, u32>,
    rank_node: Vec<NodeId>,
    /// Index into `localities`, or `UNBOUND`.
    rank_locality: Vec<u32>,
}

const UNBOUND: u32 = u32::MAX;

impl Job {
    /// An empty job.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a node name (or finds it) and returns its id.
    pub fn intern_node(&mut self, name: &str) -> Result<NodeId> {
        if let Some(&id) = self.node_index.get(name) {
            return Ok(id);
        }
        validate_node_name(name)?;
        if self.nodes.len() >= MAX_NODES as usize {
            return Err(Error::job(format!(
                "more than {MAX_NODES} nodes, the most topo-run plans for"
            )));
        }
        let id = self.nodes.len() as NodeId;
        self.nodes.push(name.to_string());
        self.node_index.insert(name.to_string(), id);
        Ok(id)
    }

    /// Registers a locality (or finds it) and returns its id.
    pub fn intern_locality(&mut self, loc: LocalityString) -> u32 {
        if let Some(&id) = self.locality_index.get(&loc) {
            return id;
        }
        let id = self.localities.len() as u32;
        self.localities.push(loc.clone());
        self.locality_index.insert(loc, id);
        id
    }

    /// Appends the next rank, with interned node and locality ids (`None` = unbound).
    pub fn push_interned(&mut self, node: NodeId, locality: Option<u32>) -> Result<u32> {
        if node as usize >= self.nodes.len()
            || locality.is_some_and(|l| l as usize >= self.localities.len())
        {
            return Err(Error::job(
                "internal: rank refers to an unknown node or locality",
            ));
        }
        let rank = u32::try_from(self.rank_node.len())
            .ok()
            .filter(|&r| r < MAX_RANKS)
            .ok_or_else(|| {
                Error::job(format!(
                    "more than {MAX_RANKS} ranks, the most topo-run plans for"
                ))
            })?;
        self.rank_node.push(node);
        self.rank_locality.push(locality.unwrap_or(UNBOUND));
        Ok(rank)
    }

    /// Appends the next rank.
    pub fn push_rank(&mut self, node: &str, locality: Option<LocalityString>) -> Result<u32> {
        let node = self.intern_node(node)?;
        let loc = locality.map(|l| self.intern_locality(l));
        self.push_interned(node, loc)
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.rank_node.len() as u32
    }

    /// Number of distinct nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Node names, in order of first appearance.
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// The node of a rank.
    pub fn node_of(&self, rank: u32) -> NodeId {
        self.rank_node[rank as usize]
    }

    /// The name of a node.
    pub fn node_name(&self, node: NodeId) -> &str {
        &self.nodes[node as usize]
    }

    /// The locality of a rank, or `None` if it is unbound.
    pub fn locality_of(&self, rank: u32) -> Option<&LocalityString> {
        match self.rank_locality[rank as usize] {
            UNBOUND => None,
            l => Some(&self.localities[l as usize]),
        }
    }

    /// The interned locality id of a rank (equal ids mean equal strings).
    pub fn locality_id(&self, rank: u32) -> Option<u32> {
        Some(self.rank_locality[rank as usize]).filter(|&l| l != UNBOUND)
    }

    /// The ranks of every node, ascending.
    pub fn ranks_by_node(&self) -> Vec<Vec<u32>> {
        let mut by_node = vec![Vec::new(); self.nodes.len()];
        for (rank, &node) in self.rank_node.iter().enumerate() {
            by_node[node as usize].push(rank as u32);
        }
        by_node
    }
}

/// Node names end up in messages, in the exported plan and in shared-memory names.
pub(crate) fn validate_node_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(Error::job(format!(
            "invalid node name {name:?}: a node name is 1 to 255 characters of letters, digits, \
             '-', '_' and '.'"
        )))
    }
}
