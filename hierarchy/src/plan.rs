//! One rank's plan as exported by the launcher in `TOPO_RUN_PLAN` (DESIGN §5), and its
//! versioned text encoding.
//!
//! ```text
//! v4;rank=0;size=108;node=node01;local=0/36;peers=0-35;shm=topo-run.42.0.node01;
//! digest=<32 hex>;nodeplan=<16 hex>;settings=key:value,...;
//! groups=numa@0-17/node@0,18/switch1@0,36/world@0,72;
//! domains=numa:0,node:0,switch1:0,world:0;top=world;check=<16 hex>
//! ```
//! (one line, no spaces). Strings are percent-encoded outside `[A-Za-z0-9._/-]`. `check` is
//! FNV-1a-64 over everything before `;check=`, so truncation or an edit is caught.

use std::fmt::Write;

use crate::build::Hierarchy;
use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::job::Job;
use crate::level::LevelName;
use crate::ranges;

/// The environment variable that carries a rank's plan.
pub const PLAN_ENV: &str = "TOPO_RUN_PLAN";

/// The encoding version this crate writes and reads.
pub const PLAN_VERSION: u32 = 4;

/// The most ranks a decoded plan may list in all its groups together.
pub const MAX_PLAN_MEMBERS: usize = 1 << 24;

/// One group of a rank's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanGroup {
    /// Its level.
    pub level: LevelName,
    /// Members, ascending; `members[0]` leads.
    pub members: Vec<u32>,
}

impl From<&crate::build::Group> for PlanGroup {
    fn from(g: &crate::build::Group) -> Self {
        PlanGroup {
            level: g.level,
            members: g.members.clone(),
        }
    }
}

/// Everything one rank needs to run the hierarchical collectives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankPlan {
    /// This rank.
    pub rank: u32,
    /// Number of ranks in the job.
    pub size: u32,
    /// The node this rank runs on.
    pub node: String,
    /// Position of this rank among the ranks of its node.
    pub local_rank: u32,
    /// Number of ranks on this node.
    pub local_size: u32,
    /// The ranks on this node, ascending (`peers[local_rank] == rank`). The runtime
    /// indexes the node's shared-memory queues by position in this list.
    pub peers: Vec<u32>,
    /// Name of the node's shared-memory segment (unique per job, step and node).
    pub shm_name: String,
    /// Digest of the whole job's inputs.
    pub digest: Digest,
    /// Digest of this node's intra-node groups (every rank's, not only this rank's), so
    /// that the node's ranks can check at init that they were planned alike: the job digest
    /// leaves localities out, which each node's tasks work out on their own.
    pub node_plan: u64,
    /// Runtime settings (algorithms, queue sizes, ...), as key/value pairs.
    pub settings: Vec<(String, String)>,
    /// The groups this rank belongs to, bottom-up.
    pub groups: Vec<PlanGroup>,
    /// This rank's domain at every level of the job, bottom-up
    /// ([`Hierarchy::domains_of`]): what a communicator's members exchange to work out
    /// its hierarchy ([`crate::restrict`]).
    pub domains: Vec<(LevelName, u32)>,
    /// The level of the job's top group (the last group of rank 0), `None` when the job has
    /// no group at all. A rank whose last group is at this level is in the top group; the
    /// runtime roots the top group's step at the collective's root when it is a member.
    pub top: Option<LevelName>,
}

impl Hierarchy {
    /// The groups of `rank`, bottom-up, as plan groups.
    pub fn plan_groups(&self, rank: u32) -> Vec<PlanGroup> {
        self.groups_of(rank).map(PlanGroup::from).collect()
    }

    /// The plan the launcher exports to `rank`. `job` must be the job this hierarchy was
    /// built from; `shm_name` names the node's segment.
    pub fn rank_plan(
        &self,
        job: &Job,
        rank: u32,
        shm_name: &str,
        digest: Digest,
        settings: Vec<(String, String)>,
    ) -> RankPlan {
        let node = job.node_of(rank);
        RankPlan {
            rank,
            size: self.size(),
            node: job.node_name(node).to_string(),
            local_rank: self.local_rank(rank, node),
            local_size: self.node_ranks()[node as usize].len() as u32,
            peers: self.node_ranks()[node as usize].clone(),
            shm_name: shm_name.to_string(),
            digest,
            node_plan: self.node_plan(node),
            settings,
            groups: self.plan_groups(rank),
            domains: self
                .levels()
                .iter()
                .copied()
                .zip(self.domains_of(rank))
                .collect(),
            top: self.groups_of(0).last().map(|g| g.level),
        }
    }
}

impl Hierarchy {
    /// The digest of node `node`'s intra-node groups, the same on every rank of the node
    /// that was planned from the same localities.
    pub fn node_plan(&self, node: crate::job::NodeId) -> u64 {
        let mut text = String::new();
        for &r in &self.node_ranks()[node as usize] {
            for g in self
                .groups_of(r)
                .filter(|g| matches!(g.level, LevelName::Intra(_)))
                .filter(|g| g.members[0] == r)
            {
                let _ = write!(text, "{}@{};", g.level, ranges::encode(&g.members));
            }
        }
        fnv1a(text.as_bytes())
    }
}

/// Orders levels bottom-up across kinds: intra-node, node, switches by height, world.
fn height(level: LevelName) -> u32 {
    match level {
        LevelName::Intra(_) => 0,
        LevelName::Node => 1,
        LevelName::Switch(h) => 1 + u32::from(h),
        LevelName::World => u32::MAX,
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn unescape(s: &str, field: &str) -> Result<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = s
                    .get(i + 1..i + 3)
                    .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
                let Some(hex) = hex else {
                    return Err(Error::plan(format!("field {field}: bad %-escape")));
                };
                out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                i += 3;
            }
            b if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/') => {
                out.push(b);
                i += 1;
            }
            b => {
                return Err(Error::plan(format!(
                    "field {field}: unexpected character {:?}",
                    b as char
                )));
            }
        }
    }
    String::from_utf8(out).map_err(|_| Error::plan(format!("field {field}: not UTF-8")))
}

impl RankPlan {
    /// For each rank of this node (in `peers` order), whether it is in this rank's lowest
    /// group inside the node: the ranks it shares its nearest cache or memory with, as the
    /// node reported them. When the node has no level below `node` (the machine reports
    /// one cache and memory for all its ranks, or nothing), every rank counts as near; a
    /// rank alone at every level below `node` is near only itself.
    pub fn near_peers(&self) -> Vec<bool> {
        if let Some(g) = self
            .groups
            .iter()
            .find(|g| matches!(g.level, LevelName::Intra(_)))
        {
            return self
                .peers
                .iter()
                .map(|p| g.members.binary_search(p).is_ok())
                .collect();
        }
        // No group of ours below `node`: either the node has no such level, or this rank
        // is alone at each (then `node` gathers the leaders of the level below, fewer than
        // the node's ranks).
        let levels_below_node = self
            .groups
            .iter()
            .find(|g| g.level == LevelName::Node)
            .is_some_and(|g| g.members.len() < self.peers.len());
        self.peers
            .iter()
            .map(|&p| !levels_below_node || p == self.rank)
            .collect()
    }

    /// The plan as one line of text for the environment.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "v{PLAN_VERSION};rank={};size={};node={};local={}/{};peers={};shm={};digest={};nodeplan={:016x};settings=",
            self.rank,
            self.size,
            escape(&self.node),
            self.local_rank,
            self.local_size,
            ranges::encode(&self.peers),
            escape(&self.shm_name),
            self.digest,
            self.node_plan
        );
        for (i, (k, v)) in self.settings.iter().enumerate() {
            let _ = write!(
                s,
                "{}{}:{}",
                if i > 0 { "," } else { "" },
                escape(k),
                escape(v)
            );
        }
        s.push_str(";groups=");
        for (i, g) in self.groups.iter().enumerate() {
            let _ = write!(
                s,
                "{}{}@{}",
                if i > 0 { "/" } else { "" },
                g.level,
                ranges::encode(&g.members)
            );
        }
        s.push_str(";domains=");
        for (i, (level, d)) in self.domains.iter().enumerate() {
            let _ = write!(s, "{}{level}:{d}", if i > 0 { "," } else { "" });
        }
        s.push_str(";top=");
        if let Some(top) = self.top {
            let _ = write!(s, "{top}");
        }
        let check = fnv1a(s.as_bytes());
        let _ = write!(s, ";check={check:016x}");
        s
    }

    /// Reads a plan written by [`RankPlan::encode`], rejecting anything malformed,
    /// inconsistent or of another version.
    pub fn decode(text: &str) -> Result<Self> {
        let text = text.trim_end_matches(['\n', '\r']);
        let Some(version) = text.split(';').next().and_then(|v| v.strip_prefix('v')) else {
            return Err(Error::plan(format!(
                "it does not start with a version (v{PLAN_VERSION};...)"
            )));
        };
        if version != PLAN_VERSION.to_string() {
            return Err(Error::plan(format!(
                "version {version:?}, but this topo-run reads version {PLAN_VERSION}; \
                 the launcher and the runtime come from different topo-run releases"
            )));
        }
        let Some((body, check)) = text.rsplit_once(";check=") else {
            return Err(Error::plan("the check field is missing (truncated?)"));
        };
        if u64::from_str_radix(check, 16).ok() != Some(fnv1a(body.as_bytes())) || check.len() != 16
        {
            return Err(Error::plan(
                "checksum mismatch: the variable was truncated or modified after topo-run wrote it",
            ));
        }
        let mut fields: [Option<&str>; 12] = [None; 12];
        const NAMES: [&str; 12] = [
            "rank", "size", "node", "local", "shm", "digest", "settings", "groups", "peers", "top",
            "nodeplan", "domains",
        ];
        for field in body.split(';').skip(1) {
            let (k, v) = field
                .split_once('=')
                .ok_or_else(|| Error::plan(format!("field {field:?} has no '='")))?;
            let i = NAMES
                .iter()
                .position(|n| *n == k)
                .ok_or_else(|| Error::plan(format!("unknown field {k:?}")))?;
            if fields[i].replace(v).is_some() {
                return Err(Error::plan(format!("field {k:?} appears twice")));
            }
        }
        let get = |i: usize| {
            fields[i].ok_or_else(|| Error::plan(format!("missing field {:?}", NAMES[i])))
        };
        let num = |i: usize, s: &str| -> Result<u32> {
            s.parse::<u32>()
                .ok()
                .filter(|_| s.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| Error::plan(format!("field {}: {s:?} is not a number", NAMES[i])))
        };
        let rank = num(0, get(0)?)?;
        let size = num(1, get(1)?)?;
        let node = unescape(get(2)?, "node")?;
        let (lr, ls) = get(3)?
            .split_once('/')
            .ok_or_else(|| Error::plan("field local: expected LOCAL_RANK/LOCAL_SIZE"))?;
        let (local_rank, local_size) = (num(3, lr)?, num(3, ls)?);
        let shm_name = unescape(get(4)?, "shm")?;
        let digest = get(5)?.parse().map_err(Error::plan)?;
        let raw_node_plan = get(10)?;
        let node_plan = u64::from_str_radix(raw_node_plan, 16)
            .ok()
            .filter(|_| {
                raw_node_plan.len() == 16 && raw_node_plan.bytes().all(|b| b.is_ascii_hexdigit())
            })
            .ok_or_else(|| {
                Error::plan(format!(
                    "field nodeplan: {raw_node_plan:?} is not 16 hex digits"
                ))
            })?;
        let mut settings = Vec::new();
        let raw_settings = get(6)?;
        if !raw_settings.is_empty() {
            for kv in raw_settings.split(',') {
                let (k, v) = kv
                    .split_once(':')
                    .ok_or_else(|| Error::plan(format!("setting {kv:?} has no ':'")))?;
                settings.push((unescape(k, "settings")?, unescape(v, "settings")?));
            }
        }
        let mut budget = MAX_PLAN_MEMBERS;
        let peers = ranges::decode(get(8)?, budget)
            .map_err(|e| Error::plan(format!("field peers: {e}")))?;
        budget -= peers.len();
        let mut groups = Vec::new();
        let raw_groups = get(7)?;
        if !raw_groups.is_empty() {
            for g in raw_groups.split('/') {
                let (level, members) = g
                    .split_once('@')
                    .ok_or_else(|| Error::plan(format!("group {g:?} has no '@'")))?;
                let level: LevelName = level.parse().map_err(Error::plan)?;
                let members = ranges::decode(members, budget)
                    .map_err(|e| Error::plan(format!("group {level}: {e}")))?;
                budget -= members.len();
                groups.push(PlanGroup { level, members });
            }
        }
        let mut domains = Vec::new();
        let raw_domains = get(11)?;
        if !raw_domains.is_empty() {
            for d in raw_domains.split(',') {
                let (level, rank) = d
                    .split_once(':')
                    .ok_or_else(|| Error::plan(format!("domain {d:?} has no ':'")))?;
                let level: LevelName = level.parse().map_err(Error::plan)?;
                domains.push((level, num(11, rank)?));
            }
        }
        let top = match get(9)? {
            "" => None,
            t => Some(t.parse().map_err(Error::plan)?),
        };
        let plan = RankPlan {
            rank,
            size,
            node,
            local_rank,
            local_size,
            peers,
            shm_name,
            digest,
            node_plan,
            settings,
            groups,
            domains,
            top,
        };
        plan.validate()?;
        Ok(plan)
    }

    /// Checks the invariants every plan built by topo-run satisfies.
    pub fn validate(&self) -> Result<()> {
        let fail = |m: String| Err(Error::plan(m));
        if self.size == 0 || self.rank >= self.size {
            return fail(format!(
                "rank {} is not below size {}",
                self.rank, self.size
            ));
        }
        if self.local_size == 0 || self.local_rank >= self.local_size || self.local_size > self.size
        {
            return fail(format!(
                "local rank {}/{} does not fit a job of {}",
                self.local_rank, self.local_size, self.size
            ));
        }
        if self.peers.len() != self.local_size as usize
            || self.peers.get(self.local_rank as usize) != Some(&self.rank)
            || self.peers.windows(2).any(|w| w[0] >= w[1])
            || self.peers.last().is_some_and(|&r| r >= self.size)
        {
            return fail(format!(
                "the node's rank list does not hold rank {} at local rank {} of {}",
                self.rank, self.local_rank, self.local_size
            ));
        }
        crate::job::validate_node_name(&self.node).or_else(|e| fail(e.to_string()))?;
        let mut prev: Option<&PlanGroup> = None;
        for g in &self.groups {
            let m = &g.members;
            if m.len() < 2 {
                return fail(format!("group {} has fewer than two members", g.level));
            }
            if m.windows(2).any(|w| w[0] >= w[1]) || m[m.len() - 1] >= self.size {
                return fail(format!(
                    "group {} members are not ascending ranks below size",
                    g.level
                ));
            }
            if m.binary_search(&self.rank).is_err() {
                return fail(format!(
                    "rank {} is not a member of its {} group",
                    self.rank, g.level
                ));
            }
            if let Some(p) = prev {
                if height(g.level) < height(p.level) || g.level == p.level {
                    return fail(format!(
                        "level {} follows {}: not bottom-up",
                        g.level, p.level
                    ));
                }
                if p.members[0] != self.rank {
                    return fail(format!(
                        "rank {} is in a {} group but does not lead its {} group",
                        self.rank, g.level, p.level
                    ));
                }
            }
            prev = Some(g);
        }
        // Domains: bottom-up, each the lowest rank that shares the level with this one (so
        // at most this rank, and no higher than the level below's), and the leader of this
        // rank's group where it has one at the level.
        let mut below = self.rank;
        for (i, &(level, d)) in self.domains.iter().enumerate() {
            if i > 0
                && (height(level) < height(self.domains[i - 1].0)
                    || self.domains[..i].iter().any(|(l, _)| *l == level))
            {
                return fail(format!(
                    "domain level {level} follows {}: not bottom-up",
                    self.domains[i - 1].0
                ));
            }
            if d > below {
                return fail(format!(
                    "the {level} domain {d} is above rank {} or the level below's",
                    self.rank
                ));
            }
            below = d;
        }
        for g in &self.groups {
            let d = self.domains.iter().find(|(l, _)| *l == g.level);
            if d.map(|&(_, d)| d) != Some(g.members[0]) {
                return fail(format!(
                    "the {} domain does not name the {} group's leader {}",
                    g.level, g.level, g.members[0]
                ));
            }
        }
        if let (Some(last), Some(top)) = (prev, self.top) {
            if height(last.level) > height(top) {
                return fail(format!(
                    "group {} lies above the job's top level {top}",
                    last.level
                ));
            }
        } else if prev.is_some() {
            return fail("the plan has groups but no top level".into());
        }
        Ok(())
    }
}
