//! Network maps: the switch tree above the nodes, read from our YAML, from Slurm's
//! `topology.conf` or from Slurm's `topology.yaml` (tree form), detected from the content.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::hostlist;

/// Which syntax a network map was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapFormat {
    /// `switches:` mapping, topo-run's own YAML.
    TopoYaml,
    /// Slurm's `topology.conf` (`SwitchName=... Nodes=...`).
    SlurmConf,
    /// Slurm's `topology.yaml`, tree topology.
    SlurmYaml,
}

impl fmt::Display for MapFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MapFormat::TopoYaml => "topo-run YAML",
            MapFormat::SlurmConf => "Slurm topology.conf",
            MapFormat::SlurmYaml => "Slurm topology.yaml",
        })
    }
}

/// Index of a switch in a [`NetworkMap`].
pub type SwitchId = u32;

/// One switch definition as written, before validation.
#[derive(Debug, Clone, Default)]
struct RawSwitch {
    name: String,
    line: Option<usize>,
    nodes: Option<String>,
    switches: Option<String>,
}

/// A validated switch tree: every node hangs off one leaf switch, every switch has at most
/// one parent, there are no cycles.
#[derive(Debug, Clone)]
pub struct NetworkMap {
    format: MapFormat,
    names: Vec<String>,
    parent: Vec<Option<SwitchId>>,
    by_name: HashMap<String, SwitchId>,
    leaf_of: HashMap<String, SwitchId>,
    /// Nodes per leaf switch, in the order written (for the canonical form).
    nodes_of: Vec<Vec<String>>,
}

impl NetworkMap {
    /// Reads a map in any supported format.
    pub fn from_reader(mut reader: impl Read) -> Result<Self> {
        let mut text = String::new();
        reader
            .read_to_string(&mut text)
            .map_err(|e| Error::map_syntax(None, format!("cannot read: {e}")))?;
        Self::from_str(&text)
    }

    /// Parses a map in any supported format, chosen from the content.
    #[allow(clippy::should_implement_trait)]
    pub fn from_str(text: &str) -> Result<Self> {
        let format = detect(text)?;
        let raw = match format {
            MapFormat::SlurmConf => parse_conf(text)?,
            MapFormat::TopoYaml => parse_topo_yaml(text)?,
            MapFormat::SlurmYaml => parse_slurm_yaml(text)?,
        };
        Self::validate(format, raw)
    }

    fn validate(format: MapFormat, raw: Vec<RawSwitch>) -> Result<Self> {
        let mut by_name = HashMap::with_capacity(raw.len());
        for (id, sw) in raw.iter().enumerate() {
            if by_name.insert(sw.name.clone(), id as SwitchId).is_some() {
                return Err(Error::MapDuplicateSwitch {
                    switch: sw.name.clone(),
                });
            }
            if sw.nodes.is_some() && sw.switches.is_some() {
                return Err(Error::MapMixedChildren {
                    switch: sw.name.clone(),
                });
            }
        }
        let expand = |sw: &RawSwitch, expr: &str| {
            hostlist::expand(expr)
                .map_err(|e| Error::map_syntax(sw.line, format!("switch {:?}: {e}", sw.name)))
        };
        let mut parent: Vec<Option<SwitchId>> = vec![None; raw.len()];
        let mut leaf_of: HashMap<String, SwitchId> = HashMap::new();
        let mut nodes_of = vec![Vec::new(); raw.len()];
        for (id, sw) in raw.iter().enumerate() {
            let id = id as SwitchId;
            if let Some(expr) = &sw.nodes {
                for node in expand(sw, expr)? {
                    if let Some(&first) = leaf_of.get(&node) {
                        return Err(Error::MapNodeTwoParents {
                            node,
                            first: raw[first as usize].name.clone(),
                            second: sw.name.clone(),
                        });
                    }
                    leaf_of.insert(node.clone(), id);
                    nodes_of[id as usize].push(node);
                }
            }
            if let Some(expr) = &sw.switches {
                for child in expand(sw, expr)? {
                    let Some(&cid) = by_name.get(&child) else {
                        return Err(Error::MapUnknownSwitch {
                            parent: sw.name.clone(),
                            child,
                        });
                    };
                    if let Some(first) = parent[cid as usize] {
                        return Err(Error::MapSwitchTwoParents {
                            switch: child,
                            first: raw[first as usize].name.clone(),
                            second: sw.name.clone(),
                        });
                    }
                    parent[cid as usize] = Some(id);
                }
            }
        }
        // Cycle check: walk up from every switch, colouring as we go.
        let mut state = vec![0u8; raw.len()]; // 0 new, 1 on the current path, 2 done
        for start in 0..raw.len() {
            let mut path = Vec::new();
            let mut cur = Some(start as SwitchId);
            while let Some(s) = cur {
                match state[s as usize] {
                    2 => break,
                    1 => {
                        let from = path.iter().position(|&p| p == s).unwrap_or(0);
                        let mut cycle: Vec<String> = path[from..]
                            .iter()
                            .map(|&p| raw[p as usize].name.clone())
                            .collect();
                        cycle.push(raw[s as usize].name.clone());
                        return Err(Error::MapCycle { cycle });
                    }
                    _ => {
                        state[s as usize] = 1;
                        path.push(s);
                        cur = parent[s as usize];
                    }
                }
            }
            for p in path {
                state[p as usize] = 2;
            }
        }
        Ok(Self {
            format,
            names: raw.into_iter().map(|s| s.name).collect(),
            parent,
            by_name,
            leaf_of,
            nodes_of,
        })
    }

    /// The syntax the map was read from.
    pub fn format(&self) -> MapFormat {
        self.format
    }

    /// Number of switches.
    pub fn switch_count(&self) -> usize {
        self.names.len()
    }

    /// The name of a switch.
    pub fn switch_name(&self, id: SwitchId) -> &str {
        &self.names[id as usize]
    }

    /// Looks a switch up by name.
    pub fn switch_id(&self, name: &str) -> Option<SwitchId> {
        self.by_name.get(name).copied()
    }

    /// The parent of a switch, if any.
    pub fn parent(&self, id: SwitchId) -> Option<SwitchId> {
        self.parent[id as usize]
    }

    /// The leaf switch a node hangs off.
    pub fn leaf_of(&self, node: &str) -> Option<SwitchId> {
        self.leaf_of.get(node).copied()
    }

    /// The switches above a node, from its leaf (height 1) up to the root.
    pub fn path(&self, node: &str) -> Option<Vec<SwitchId>> {
        let mut path = Vec::new();
        let mut cur = self.leaf_of(node);
        while let Some(s) = cur {
            path.push(s);
            cur = self.parent(s);
        }
        (!path.is_empty()).then_some(path)
    }

    /// A canonical text form (one line per switch, sorted), equal for equal trees whatever
    /// syntax they were written in. Used in the job digest.
    pub fn canonical(&self) -> String {
        let mut children: Vec<Vec<&str>> = vec![Vec::new(); self.names.len()];
        for (c, p) in self.parent.iter().enumerate() {
            if let Some(p) = p {
                children[*p as usize].push(self.names[c].as_str());
            }
        }
        let mut lines: Vec<String> = children
            .into_iter()
            .enumerate()
            .map(|(id, mut children)| {
                let mut nodes = self.nodes_of[id].clone();
                nodes.sort();
                children.sort_unstable();
                format!(
                    "{} nodes={} switches={}",
                    self.names[id],
                    hostlist::compress(&nodes),
                    children.join(",")
                )
            })
            .collect();
        lines.sort();
        lines.join("\n")
    }
}

fn meaningful_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(|(i, l)| {
        let l = l.split('#').next().unwrap_or("").trim();
        (!l.is_empty()).then_some((i + 1, l))
    })
}

fn detect(text: &str) -> Result<MapFormat> {
    let is_conf = |l: &str| {
        l.split_whitespace().any(|t| {
            t.split_once('=')
                .is_some_and(|(k, _)| k.eq_ignore_ascii_case("switchname"))
        })
    };
    let mut first = None;
    for (_, l) in meaningful_lines(text) {
        if is_conf(l) {
            return Ok(MapFormat::SlurmConf);
        }
        if first.is_none() && l != "---" {
            first = Some(l);
        }
    }
    match first {
        Some(l) if l.starts_with('-') => Ok(MapFormat::SlurmYaml),
        Some(l) if l.starts_with("switches") || l.starts_with('{') => Ok(MapFormat::TopoYaml),
        Some(l) => Err(Error::map_syntax(
            None,
            format!(
                "unrecognised format (first line {l:?}); expected topo-run YAML (`switches:`), \
                 Slurm topology.conf (`SwitchName=...`) or Slurm topology.yaml (`- topology: ...`)"
            ),
        )),
        None => Err(Error::map_syntax(None, "the map is empty")),
    }
}

fn parse_conf(text: &str) -> Result<Vec<RawSwitch>> {
    // Join backslash continuations first, remembering each logical line's first line number.
    let mut logical: Vec<(usize, String)> = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let (body, continued) = match line.trim_end().strip_suffix('\\') {
            Some(b) => (b, true),
            None => (line, false),
        };
        let entry = pending.get_or_insert_with(|| (i + 1, String::new()));
        entry.1.push(' ');
        entry.1.push_str(body);
        if !continued {
            logical.extend(pending.take());
        }
    }
    logical.extend(pending);

    let mut out = Vec::new();
    for (line, text) in logical {
        if text.trim().is_empty() {
            continue;
        }
        let mut sw = RawSwitch {
            line: Some(line),
            ..RawSwitch::default()
        };
        let mut name = None;
        for pair in text.split_whitespace() {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(Error::map_syntax(
                    Some(line),
                    format!("expected KEY=VALUE, found {pair:?}"),
                ));
            };
            let value = value.trim_matches('"').to_string();
            if value.is_empty() {
                return Err(Error::map_syntax(Some(line), format!("{key} has no value")));
            }
            let slot = match key.to_ascii_lowercase().as_str() {
                "switchname" => &mut name,
                "nodes" => &mut sw.nodes,
                "switches" => &mut sw.switches,
                "linkspeed" => continue,
                _ => {
                    return Err(Error::map_syntax(
                        Some(line),
                        format!(
                            "unknown key {key:?}; topology.conf knows SwitchName, Nodes, \
                             Switches and LinkSpeed"
                        ),
                    ));
                }
            };
            if slot.replace(value).is_some() {
                return Err(Error::map_syntax(Some(line), format!("{key} given twice")));
            }
        }
        sw.name = name.ok_or_else(|| Error::map_syntax(Some(line), "line has no SwitchName"))?;
        out.push(sw);
    }
    Ok(out)
}

/// A hostlist written as one string or as a YAML list of strings.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum HostlistField {
    One(String),
    Many(Vec<String>),
}

impl HostlistField {
    fn into_expr(self) -> String {
        match self {
            HostlistField::One(s) => s,
            HostlistField::Many(v) => v.join(","),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopoSwitch {
    nodes: Option<HostlistField>,
    switches: Option<HostlistField>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopoYaml {
    switches: OrderedPairs<TopoSwitch>,
}

/// A YAML mapping kept as a list of pairs, duplicates included, so that a duplicate switch
/// is reported by name.
#[derive(Debug)]
struct OrderedPairs<V>(Vec<(String, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for OrderedPairs<V> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visitor<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Visitor<V> {
            type Value = OrderedPairs<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping from switch name to {nodes: ...} or {switches: ...}")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some(pair) = map.next_entry::<String, V>()? {
                    v.push(pair);
                }
                Ok(OrderedPairs(v))
            }
        }
        d.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

fn parse_topo_yaml(text: &str) -> Result<Vec<RawSwitch>> {
    let doc: TopoYaml = crate::yaml::from_str(text).map_err(|e| Error::map_syntax(None, e))?;
    Ok(doc
        .switches
        .0
        .into_iter()
        .map(|(name, sw)| RawSwitch {
            name,
            line: None,
            nodes: sw.nodes.map(HostlistField::into_expr),
            switches: sw.switches.map(HostlistField::into_expr),
        })
        .collect())
}

#[derive(Debug, Deserialize)]
struct SlurmTopology {
    topology: String,
    #[serde(default)]
    cluster_default: bool,
    tree: Option<SlurmTree>,
}

#[derive(Debug, Deserialize)]
struct SlurmTree {
    switches: Vec<SlurmSwitch>,
}

#[derive(Debug, Deserialize)]
struct SlurmSwitch {
    switch: String,
    children: Option<HostlistField>,
    nodes: Option<HostlistField>,
}

fn parse_slurm_yaml(text: &str) -> Result<Vec<RawSwitch>> {
    let topologies: Vec<SlurmTopology> =
        crate::yaml::from_str(text).map_err(|e| Error::map_syntax(None, e))?;
    let pick = topologies
        .iter()
        .position(|t| t.cluster_default && t.tree.is_some())
        .or_else(|| topologies.iter().position(|t| t.tree.is_some()));
    let Some(i) = pick else {
        let names: Vec<&str> = topologies.iter().map(|t| t.topology.as_str()).collect();
        return Err(Error::map_syntax(
            None,
            format!(
                "topology.yaml defines no tree topology (found: {}); topo-run needs a switch tree",
                names.join(", ")
            ),
        ));
    };
    let tree = topologies.into_iter().nth(i).and_then(|t| t.tree);
    Ok(tree
        .map(|t| t.switches)
        .unwrap_or_default()
        .into_iter()
        .map(|s| RawSwitch {
            name: s.switch,
            line: None,
            nodes: s.nodes.map(HostlistField::into_expr),
            switches: s.children.map(HostlistField::into_expr),
        })
        .collect())
}

#[cfg(test)]
mod tests;
