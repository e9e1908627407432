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

use std::io::{BufRead, BufReader, Read};

use serde::Deserialize;
use serde::de::{self, SeqAccess, Visitor};

use crate::error::{Error, Result};
use crate::hostlist;
use crate::indexlist::IndexList;
use crate::job::{Job, MAX_NODES, MAX_RANKS};
use crate::locality::LocalityString;
use crate::shape::MachineShape;

/// The largest job description file read (a million ranks written out one by one take
/// about 68 MB of JSON).
pub const MAX_JOB_FILE_BYTES: u64 = 2 << 30;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobFile {
    ranks: Option<Ranks>,
    layout: Option<Layout>,
}

/// A `ranks:` list, built into a [`Job`] entry by entry as the parser reads it (never held
/// as a list of entries), so memory stays linear in the number of distinct nodes and
/// localities plus a few bytes per rank.
#[derive(Debug)]
struct Ranks(Job);

impl<'de> Deserialize<'de> for Ranks {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ranks;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of {node, locality} entries")
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<Ranks, A::Error> {
                let mut job = Job::new();
                let mut parsed: std::collections::HashMap<String, u32> =
                    std::collections::HashMap::new();
                let mut rank = 0u64;
                while let Some(entry) = seq.next_element::<RankEntry>()? {
                    push_entry(&mut job, &mut parsed, rank, entry).map_err(de::Error::custom)?;
                    rank += 1;
                }
                Ok(Ranks(job))
            }
        }
        d.deserialize_seq(V)
    }
}

/// Appends rank `rank` of a `ranks:` list (`parsed` caches the localities seen so far).
fn push_entry(
    job: &mut Job,
    parsed: &mut std::collections::HashMap<String, u32>,
    rank: u64,
    entry: RankEntry,
) -> Result<()> {
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
    job.push_interned(node, loc)
        .map_err(|e| Error::job(format!("rank {rank}: {e}")))?;
    Ok(())
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

/// Reads a job description into a [`Job`]: JSON (a file whose first character is `{`)
/// with a streaming JSON parser, anything else as YAML. At most [`MAX_JOB_FILE_BYTES`].
pub fn job_from_reader(reader: impl Read) -> Result<Job> {
    let mut reader = BufReader::with_capacity(1 << 16, reader.take(MAX_JOB_FILE_BYTES + 1));
    let first = loop {
        let buf = reader
            .fill_buf()
            .map_err(|e| Error::job(format!("cannot read: {e}")))?;
        match buf.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(i) => break Some(buf[i]),
            None if buf.is_empty() => break None,
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    };
    let too_large = || {
        Error::job(format!(
            "the file is larger than {} MiB, the most topo-run reads (describe a regular \
             cluster with a `layout:` instead)",
            MAX_JOB_FILE_BYTES >> 20
        ))
    };
    let file: JobFile = if first == Some(b'{') {
        let mut counted = Counted {
            inner: reader,
            n: 0,
        };
        let r = serde_json::from_reader(&mut counted);
        if counted.n > MAX_JOB_FILE_BYTES {
            return Err(too_large());
        }
        r.map_err(|e| Error::job(e.to_string()))?
    } else {
        let mut text = String::new();
        reader
            .read_to_string(&mut text)
            .map_err(|e| Error::job(format!("cannot read: {e}")))?;
        if text.len() as u64 > MAX_JOB_FILE_BYTES {
            return Err(too_large());
        }
        crate::yaml::from_str_large(&text).map_err(Error::job)?
    };
    from_file(file)
}

/// Counts the bytes read through it.
struct Counted<R> {
    inner: R,
    n: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.n += n as u64;
        Ok(n)
    }
}

/// Parses a job description (YAML or JSON) into a [`Job`].
pub fn job_from_str(text: &str) -> Result<Job> {
    job_from_reader(text.as_bytes())
}

fn from_file(file: JobFile) -> Result<Job> {
    match (file.ranks, file.layout) {
        (Some(Ranks(job)), None) if job.size() == 0 => {
            Err(Error::job("the `ranks:` list is empty"))
        }
        (Some(Ranks(job)), None) => Ok(job),
        (None, Some(layout)) => from_layout(&layout),
        (Some(_), Some(_)) => Err(Error::job("give either `ranks:` or `layout:`, not both")),
        (None, None) => Err(Error::job("expected a `ranks:` list or a `layout:`")),
    }
}

fn from_layout(l: &Layout) -> Result<Job> {
    let shape = l.hardware;
    shape.validate()?;
    // The limits are checked before the node names are expanded.
    let count = hostlist::count(&l.nodes).map_err(|e| Error::job(format!("nodes: {e}")))?;
    if count > MAX_NODES as usize {
        return Err(Error::job(format!(
            "nodes: {count} nodes; topo-run plans for at most {MAX_NODES}"
        )));
    }
    let ranks = count as u64 * u64::from(l.ranks_per_node);
    if l.ntasks.map_or(ranks, u64::from) > u64::from(MAX_RANKS) {
        return Err(Error::job(format!(
            "{} ranks; topo-run plans for at most {MAX_RANKS}",
            l.ntasks.map_or(ranks, u64::from)
        )));
    }
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
    if ntasks > u64::from(MAX_RANKS) {
        return Err(Error::job(format!(
            "{ntasks} ranks; topo-run plans for at most {MAX_RANKS}"
        )));
    }
    if nodes.len() > MAX_NODES as usize {
        return Err(Error::job(format!(
            "{} nodes; topo-run plans for at most {MAX_NODES}",
            nodes.len()
        )));
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
