//! Job description files for `topo-run plan`: either an explicit `ranks:` list or a compact
//! `layout:` (node hostlist, hardware shape, ranks per node, mapping, binding).
//!
//! ```yaml
//! ranks:
//!   - {node: node01, locality: "SK0:L30:L20:L10:CR0:HT0:NM0"}
//!   - {node: node01}            # unbound
//! ```
//! ```yaml
//! layout:
//!   nodes: node[0001-8192]
//!   ranks_per_node: 128
//!   mapping: by-core            # by-core | by-hwthread | by-l3 | by-numa | by-socket
//!   bind: core                  # hwthread | core | l3 | numa | socket | none
//!   distribution: block         # block | cyclic
//!   hardware: {sockets: 2, numa_per_socket: 4, cores_per_numa: 16}
//! ```

use std::io::Read;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::hostlist;
use crate::indexlist::IndexList;
use crate::job::Job;
use crate::locality::LocalityString;
use crate::shape::MachineShape;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobFile {
    ranks: Option<Vec<RankEntry>>,
    layout: Option<Layout>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RankEntry {
    node: String,
    locality: Option<String>,
}

/// How ranks are spread over nodes (Slurm's `--distribution`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Distribution {
    /// Fill a node before the next.
    #[default]
    Block,
    /// Round-robin over nodes.
    Cyclic,
}

/// Which core (or thread) a node's i-th rank gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mapping {
    /// Rank i on core i.
    #[default]
    ByCore,
    /// Rank i on hardware thread i.
    ByHwthread,
    /// Round-robin over L3 caches, next free core in each.
    ByL3,
    /// Round-robin over NUMA nodes, next free core in each.
    ByNuma,
    /// Round-robin over sockets, next free core in each.
    BySocket,
}

/// What a rank is bound to (its locality covers that object).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Binding {
    /// One hardware thread.
    Hwthread,
    /// One core.
    Core,
    /// The L3 cache of its core.
    L3,
    /// The NUMA node of its core.
    Numa,
    /// The package of its core.
    Socket,
    /// Not bound.
    None,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Layout {
    nodes: String,
    ranks_per_node: u32,
    ntasks: Option<u32>,
    #[serde(default)]
    distribution: Distribution,
    #[serde(default)]
    mapping: Mapping,
    bind: Option<Binding>,
    hardware: MachineShape,
}

/// Reads a job description (YAML or JSON) into a [`Job`].
pub fn job_from_reader(mut reader: impl Read) -> Result<Job> {
    let mut text = String::new();
    reader
        .read_to_string(&mut text)
        .map_err(|e| Error::job(format!("cannot read: {e}")))?;
    job_from_str(&text)
}

/// Parses a job description (YAML or JSON) into a [`Job`].
pub fn job_from_str(text: &str) -> Result<Job> {
    let file: JobFile = crate::yaml::from_str(text).map_err(Error::job)?;
    match (file.ranks, file.layout) {
        (Some(ranks), None) => from_ranks(ranks),
        (None, Some(layout)) => from_layout(&layout),
        (Some(_), Some(_)) => Err(Error::job("give either `ranks:` or `layout:`, not both")),
        (None, None) => Err(Error::job("expected a `ranks:` list or a `layout:`")),
    }
}

fn from_ranks(ranks: Vec<RankEntry>) -> Result<Job> {
    if ranks.is_empty() {
        return Err(Error::job("the `ranks:` list is empty"));
    }
    let mut job = Job::new();
    let mut parsed: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    for (rank, entry) in ranks.into_iter().enumerate() {
        let node = job
            .intern_node(&entry.node)
            .map_err(|e| Error::job(format!("rank {rank}: {e}")))?;
        let loc = match entry.locality {
            None => None,
            Some(text) => Some(match parsed.get(&text) {
                Some(&id) => id,
                None => {
                    let loc = LocalityString::parse(&text)
                        .map_err(|e| Error::job(format!("rank {rank}: {e}")))?;
                    let id = job.intern_locality(loc);
                    parsed.insert(text, id);
                    id
                }
            }),
        };
        job.push_interned(node, loc)?;
    }
    Ok(job)
}

fn from_layout(l: &Layout) -> Result<Job> {
    let shape = l.hardware;
    shape.validate()?;
    let nodes = hostlist::expand(&l.nodes).map_err(|e| Error::job(format!("nodes: {e}")))?;
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = nodes.iter().find(|n| !seen.insert(n.as_str())) {
        return Err(Error::job(format!("nodes: {dup:?} is listed twice")));
    }
    let rpn = l.ranks_per_node;
    if rpn == 0 {
        return Err(Error::job("ranks_per_node must be at least 1"));
    }
    let capacity = u64::from(rpn) * nodes.len() as u64;
    let ntasks = match l.ntasks {
        None => capacity,
        Some(n) if n > 0 && u64::from(n) <= capacity => u64::from(n),
        Some(n) => {
            return Err(Error::job(format!(
                "ntasks {n} does not fit {} nodes x {rpn} ranks per node",
                nodes.len()
            )));
        }
    };
    if ntasks >= i32::MAX as u64 {
        return Err(Error::job("more ranks than MPI can number (2^31 - 1)"));
    }
    let bind = l.bind.unwrap_or(match l.mapping {
        Mapping::ByHwthread => Binding::Hwthread,
        _ => Binding::Core,
    });
    let mut job = Job::new();
    let local_locs: Vec<Option<u32>> = (0..rpn)
        .map(|i| {
            Ok(place(&shape, l.mapping, bind, i)?
                .map(|pus| job.intern_locality(shape.locality(&pus))))
        })
        .collect::<Result<_>>()?;
    let mut node_ids: Vec<Option<u32>> = vec![None; nodes.len()];
    let n = nodes.len() as u64;
    for r in 0..ntasks {
        let (node, local) = match l.distribution {
            Distribution::Block => (r / u64::from(rpn), r % u64::from(rpn)),
            Distribution::Cyclic => (r % n, r / n),
        };
        let id = match node_ids[node as usize] {
            Some(id) => id,
            None => {
                let id = job.intern_node(&nodes[node as usize])?;
                node_ids[node as usize] = Some(id);
                id
            }
        };
        job.push_interned(id, local_locs[local as usize])?;
    }
    Ok(job)
}

/// The PUs a node's `i`-th rank is bound to, or `None` when unbound.
fn place(
    shape: &MachineShape,
    mapping: Mapping,
    bind: Binding,
    i: u32,
) -> Result<Option<IndexList>> {
    let cores = shape.cores();
    let tpc = shape.threads_per_core;
    let too_many = |what: &str, n: u32| {
        Error::job(format!(
            "ranks_per_node exceeds what mapping {mapping:?} can place: {n} {what} per node; \
             use fewer ranks per node or map by-hwthread"
        ))
    };
    let round_robin = |domains: u32| -> Result<u32> {
        let per = cores / domains;
        let (d, k) = (i % domains, i / domains);
        if k >= per {
            return Err(too_many("cores", cores));
        }
        Ok(d * per + k)
    };
    let (core, pu) = match mapping {
        Mapping::ByCore if i < cores => (i, i * tpc),
        Mapping::ByCore => return Err(too_many("cores", cores)),
        Mapping::ByHwthread if i < shape.pus() => (i / tpc, i),
        Mapping::ByHwthread => return Err(too_many("hardware threads", shape.pus())),
        Mapping::ByL3 => {
            let c = round_robin(shape.l3s())?;
            (c, c * tpc)
        }
        Mapping::ByNuma => {
            let c = round_robin(shape.numas())?;
            (c, c * tpc)
        }
        Mapping::BySocket => {
            let c = round_robin(shape.sockets)?;
            (c, c * tpc)
        }
    };
    let span = |per: u32| shape.pus_of_cores(core / per * per, core / per * per + per - 1);
    Ok(match bind {
        Binding::None => None,
        Binding::Hwthread => Some(IndexList::from_range(pu, pu)),
        Binding::Core => Some(shape.pus_of_cores(core, core)),
        Binding::L3 => Some(span(shape.cores_per_socket() / shape.l3_per_socket)),
        Binding::Numa => Some(span(shape.cores_per_numa)),
        Binding::Socket => Some(span(shape.cores_per_socket())),
    })
}
