//! Output formats of `topo-run plan`: JSON (a stable schema), text (a picture for people) and
//! Graphviz.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::Result;
use serde::Serialize;
use serde::ser::{SerializeStruct, Serializer};
use topo_hierarchy::{Group, LevelName, ObjectKind, ranges};

use crate::planned::Planned;

/// What a group's members share, for people: `numa 1`, `node01`, `sw11`, `world`.
fn label(p: &Planned, g: &Group) -> String {
    match g.level {
        LevelName::Intra(_) => format!("{} {}", g.level, g.unit),
        LevelName::Node => format!("node {}", p.job.node_name(g.unit)),
        LevelName::Switch(_) => format!("{} {}", g.level, p.hierarchy.switch_name(g.unit)),
        LevelName::World => "world".to_string(),
    }
}

struct JsonGroup<'a>(&'a Group);

impl Serialize for JsonGroup<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("group", 2)?;
        st.serialize_field("level", &self.0.level.to_string())?;
        st.serialize_field("members", &self.0.members)?;
        st.end()
    }
}

struct JsonRank<'a>(&'a Planned, u32);

impl Serialize for JsonRank<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (p, rank) = (self.0, self.1);
        let node = p.job.node_of(rank);
        let mut st = s.serialize_struct("rank", 4)?;
        st.serialize_field("rank", &rank)?;
        st.serialize_field("node", p.job.node_name(node))?;
        st.serialize_field("local_rank", &p.hierarchy.local_rank(rank, node))?;
        let groups: Vec<JsonGroup<'_>> = p.hierarchy.groups_of(rank).map(JsonGroup).collect();
        st.serialize_field("groups", &groups)?;
        st.end()
    }
}

/// `{"version":1,"size":N,"levels":[...],"digest":"..","ranks":[...]}`, with the ranks
/// streamed one by one so that a million ranks are never held in memory twice.
pub fn json(p: &Planned, ranks: impl Iterator<Item = u32>, out: &mut impl Write) -> Result<()> {
    let levels: Vec<String> = p
        .hierarchy
        .levels()
        .iter()
        .map(ToString::to_string)
        .collect();
    write!(
        out,
        "{{\"version\":1,\"size\":{},\"levels\":{},\"digest\":\"{}\",\"ranks\":[",
        p.hierarchy.size(),
        serde_json::to_string(&levels)?,
        p.digest
    )?;
    for (i, rank) in ranks.enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, &JsonRank(p, rank))?;
    }
    writeln!(out, "]}}")?;
    Ok(())
}

/// Indexed groups (position in `Hierarchy::groups`).
type Indexed<'a> = Vec<(usize, &'a Group)>;

/// The groups inside each node (intra-node levels and `node`), per node, and the network-wide
/// ones (switches and `world`). Both keep the hierarchy's bottom-up order.
fn split_by_node(p: &Planned) -> (Vec<Indexed<'_>>, Indexed<'_>) {
    let mut per_node = vec![Vec::new(); p.job.node_count()];
    let mut network = Vec::new();
    for (i, g) in p.hierarchy.groups().iter().enumerate() {
        match g.level {
            LevelName::Intra(_) | LevelName::Node => {
                per_node[p.job.node_of(g.leader()) as usize].push((i, g));
            }
            _ => network.push((i, g)),
        }
    }
    (per_node, network)
}

/// One Graphviz box: the group's label and members.
fn dot_box(p: &Planned, i: usize, g: &Group) -> String {
    let members = ranges::encode(&g.members);
    format!("g{i} [label=\"{}\\n{members}\"];", label(p, g))
}

fn group_line(p: &Planned, g: &Group) -> String {
    format!(
        "{} [{}] leader {}",
        label(p, g),
        ranges::encode(&g.members),
        g.leader()
    )
}

/// A picture like Fig. 1 of the coll/tcl paper: per node its sockets, NUMA nodes and
/// intra-node groups, then the network levels.
pub fn text(p: &Planned, only: Option<u32>, out: &mut impl Write) -> Result<()> {
    let h = &p.hierarchy;
    let levels: Vec<String> = h.levels().iter().map(ToString::to_string).collect();
    writeln!(
        out,
        "{} ranks on {} nodes; levels bottom-up: {}",
        h.size(),
        p.job.node_count(),
        if levels.is_empty() {
            "(none)".to_string()
        } else {
            levels.join(" -> ")
        }
    )?;
    match &p.map {
        Some(m) => writeln!(
            out,
            "network map: {} ({} switches)",
            m.format(),
            m.switch_count()
        )?,
        None => writeln!(out, "network map: none (no switch levels)")?,
    }
    writeln!(out, "digest: {}", p.digest)?;
    if let Some(rank) = only {
        let node = p.job.node_of(rank);
        writeln!(out, "\nrank {rank} on {}:", p.job.node_name(node))?;
        match p.job.locality_of(rank) {
            Some(l) => writeln!(out, "  locality {l}")?,
            None => writeln!(out, "  unbound")?,
        }
        for g in h.groups_of(rank) {
            writeln!(out, "  {}", group_line(p, g))?;
        }
        return Ok(());
    }
    let (per_node, network) = split_by_node(p);
    for (node, ranks) in h.node_ranks().iter().enumerate() {
        let name = p.job.node_name(node as u32);
        let leaf = p
            .map
            .as_ref()
            .and_then(|m| m.leaf_of(name))
            .map(|s| {
                format!(
                    ", leaf switch {}",
                    p.map.as_ref().map_or("?", |m| m.switch_name(s))
                )
            })
            .unwrap_or_default();
        writeln!(
            out,
            "\n{name}: ranks {} ({}){leaf}",
            ranges::encode(ranks),
            ranks.len()
        )?;
        // Hardware picture: socket -> NUMA node -> ranks.
        let mut tree: BTreeMap<(Option<u32>, Option<u32>), Vec<u32>> = BTreeMap::new();
        for &r in ranks {
            let key = match p.job.locality_of(r) {
                Some(l) => (l.single(ObjectKind::Package), l.single(ObjectKind::Numa)),
                None => (None, None),
            };
            tree.entry(key).or_default().push(r);
        }
        let mut last_socket = None;
        for ((sk, nm), rs) in &tree {
            let bound = p.job.locality_of(rs[0]).is_some();
            if !bound {
                writeln!(out, "  unbound: ranks {}", ranges::encode(rs))?;
                continue;
            }
            if last_socket != Some(*sk) {
                match sk {
                    Some(s) => writeln!(out, "  socket {s}")?,
                    None => writeln!(out, "  (spanning sockets)")?,
                }
                last_socket = Some(*sk);
            }
            match nm {
                Some(n) => writeln!(out, "    numa {n}: ranks {}", ranges::encode(rs))?,
                None => writeln!(
                    out,
                    "    (spanning NUMA nodes): ranks {}",
                    ranges::encode(rs)
                )?,
            }
        }
        for (_, g) in &per_node[node] {
            writeln!(out, "  {}", group_line(p, g))?;
        }
    }
    if !network.is_empty() {
        writeln!(out)?;
    }
    for (_, g) in network {
        writeln!(out, "{}", group_line(p, g))?;
    }
    Ok(())
}

/// Graphviz: one box per group, an edge from each group to the group its leader joins next;
/// intra-node groups are drawn inside their node's cluster.
pub fn dot(p: &Planned, out: &mut impl Write) -> Result<()> {
    let h = &p.hierarchy;
    writeln!(out, "digraph topo_run_plan {{")?;
    writeln!(out, "  rankdir=BT;")?;
    writeln!(out, "  node [shape=box, fontname=\"monospace\"];")?;
    let (per_node, network) = split_by_node(p);
    for (i, g) in network {
        writeln!(out, "  {}", dot_box(p, i, g))?;
    }
    for (node, groups) in per_node.iter().enumerate() {
        if groups.is_empty() {
            continue;
        }
        writeln!(out, "  subgraph cluster_{node} {{")?;
        writeln!(out, "    label=\"{}\";", p.job.node_name(node as u32))?;
        for &(i, g) in groups {
            writeln!(out, "    {}", dot_box(p, i, g))?;
        }
        writeln!(out, "  }}")?;
    }
    for (i, g) in h.groups().iter().enumerate() {
        let ids = h.group_ids_of(g.leader());
        if let Some(pos) = ids.iter().position(|&x| x as usize == i)
            && let Some(next) = ids.get(pos + 1)
        {
            writeln!(out, "  g{i} -> g{next};")?;
        }
    }
    writeln!(out, "}}")?;
    Ok(())
}
