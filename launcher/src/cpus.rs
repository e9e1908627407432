//! CPU masks and locality strings: what Slurm says about the binding of the node's tasks,
//! what the kernel says about ours, and the PMIx locality string of a mask computed from
//! the node's hwloc topology.

use std::collections::BTreeSet;
use std::fmt;

use hwlocality::Topology;
use hwlocality::object::types::ObjectType;
use topo_hierarchy::{IndexList, LocalityString, ObjectKind};

/// A set of OS CPU numbers (the numbers `taskset` and Slurm use).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuMask(pub BTreeSet<u32>);

impl fmt::Display for CpuMask {
    /// The hwloc/taskset list form: `0-3,8`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = IndexList::from_indices(self.0.iter().copied());
        if list.is_empty() {
            f.write_str("(none)")
        } else {
            write!(f, "{list}")
        }
    }
}

/// A binding list that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BindListError {
    #[error(
        "SLURM_CPU_BIND_TYPE={0:?} does not name CPUs, so the other tasks' CPUs are unknown; \
         bind to CPUs with srun --cpu-bind=cores (or threads, map_cpu:, mask_cpu:)"
    )]
    UnsupportedType(String),
    #[error("SLURM_CPU_BIND_LIST entry {entry:?} is not a valid {what}")]
    BadEntry { entry: String, what: &'static str },
    #[error("SLURM_CPU_BIND_LIST is empty although SLURM_CPU_BIND_TYPE={0:?} binds tasks")]
    Empty(String),
}

/// Largest CPU number accepted from Slurm (hwloc and the kernel handle far fewer).
const MAX_CPU: u32 = 1 << 20;

/// How Slurm bound the tasks of this node, from `SLURM_CPU_BIND_TYPE` and
/// `SLURM_CPU_BIND_LIST`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlurmBinding {
    /// `--cpu-bind=none` (or no binding information at all).
    None,
    /// One mask per local task; task `i` uses entry `i % len`, as Slurm does.
    Masks(Vec<CpuMask>),
}

impl SlurmBinding {
    /// Parses the two variables. `bind_type` is `None` when Slurm did not set it.
    pub fn parse(bind_type: Option<&str>, list: Option<&str>) -> Result<Self, BindListError> {
        let Some(ty) = bind_type else {
            return Ok(SlurmBinding::None);
        };
        let parts: Vec<&str> = ty.split(',').map(str::trim).collect();
        let mask = parts.iter().any(|p| p.starts_with("mask_cpu"));
        let map = parts.iter().any(|p| p.starts_with("map_cpu"));
        if !mask && !map {
            if parts
                .iter()
                .all(|p| p.is_empty() || matches!(*p, "none" | "quiet" | "verbose" | "no" | "off"))
            {
                return Ok(SlurmBinding::None);
            }
            return Err(BindListError::UnsupportedType(ty.to_string()));
        }
        let list = list.unwrap_or("").trim();
        if list.is_empty() {
            return Err(BindListError::Empty(ty.to_string()));
        }
        let masks = list
            .split(',')
            .map(|e| {
                if mask {
                    parse_hex_mask(e)
                } else {
                    parse_cpu_id(e)
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SlurmBinding::Masks(masks))
    }

    /// The mask of local task `local_id`, if known.
    pub fn mask_of(&self, local_id: u32) -> Option<&CpuMask> {
        match self {
            SlurmBinding::None => None,
            SlurmBinding::Masks(m) => m.get(local_id as usize % m.len()),
        }
    }
}

fn parse_hex_mask(entry: &str) -> Result<CpuMask, BindListError> {
    let bad = || BindListError::BadEntry {
        entry: entry.to_string(),
        what: "hexadecimal CPU mask",
    };
    let hex = entry
        .trim()
        .strip_prefix("0x")
        .or_else(|| entry.trim().strip_prefix("0X"))
        .unwrap_or(entry.trim());
    if hex.is_empty() || hex.len() > (MAX_CPU / 4) as usize {
        return Err(bad());
    }
    let mut set = BTreeSet::new();
    for (i, c) in hex.bytes().rev().enumerate() {
        let nibble = (c as char).to_digit(16).ok_or_else(bad)?;
        for bit in 0..4 {
            if nibble & (1 << bit) != 0 {
                set.insert(i as u32 * 4 + bit);
            }
        }
    }
    if set.is_empty() {
        return Err(bad());
    }
    Ok(CpuMask(set))
}

fn parse_cpu_id(entry: &str) -> Result<CpuMask, BindListError> {
    let id: u32 = entry
        .trim()
        .parse()
        .ok()
        .filter(|&c| c < MAX_CPU)
        .ok_or_else(|| BindListError::BadEntry {
            entry: entry.to_string(),
            what: "CPU number",
        })?;
    Ok(CpuMask(BTreeSet::from([id])))
}

/// The CPUs this process may run on (`sched_getaffinity`).
pub fn own_mask() -> nix::Result<CpuMask> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))?;
    let mut out = BTreeSet::new();
    for cpu in 0..nix::sched::CpuSet::count() {
        if set.is_set(cpu)? {
            out.insert(cpu as u32);
        }
    }
    Ok(CpuMask(out))
}

/// The objects of one kind: logical index and OS CPUs, in logical order.
type Objects = Vec<(u32, BTreeSet<u32>)>;

/// The node's hardware topology, as hwloc sees it.
#[derive(Debug)]
pub struct NodeTopology {
    topology: Topology,
    /// Per locality token, its objects.
    objects: Vec<(ObjectKind, Objects)>,
    all_cpus: BTreeSet<u32>,
}

/// The hwloc types behind the locality tokens, in the order PMIx writes them.
const TOKEN_TYPES: [(ObjectKind, ObjectType); 7] = [
    (ObjectKind::Package, ObjectType::Package),
    (ObjectKind::L3, ObjectType::L3Cache),
    (ObjectKind::L2, ObjectType::L2Cache),
    (ObjectKind::L1, ObjectType::L1Cache),
    (ObjectKind::Core, ObjectType::Core),
    (ObjectKind::Pu, ObjectType::PU),
    (ObjectKind::Numa, ObjectType::NUMANode),
];

impl NodeTopology {
    /// Loads this node's topology. hwloc honours `HWLOC_XMLFILE` and `HWLOC_SYNTHETIC`.
    pub fn load() -> Result<Self, String> {
        let topology = Topology::new().map_err(|e| e.to_string())?;
        let set_of =
            |cs: Option<hwlocality::bitmap::BitmapRef<'_, hwlocality::cpu::cpuset::CpuSet>>| {
                cs.map(|cs| {
                    cs.iter_set()
                        .map(|i| usize::from(i) as u32)
                        .collect::<BTreeSet<u32>>()
                })
                .unwrap_or_default()
            };
        let mut objects = Vec::new();
        for (kind, ty) in TOKEN_TYPES {
            let objs = topology
                .objects_with_type(ty)
                .map(|o| (o.logical_index() as u32, set_of(o.cpuset())))
                .collect();
            objects.push((kind, objs));
        }
        let all_cpus = set_of(Some(topology.cpuset()));
        Ok(NodeTopology {
            topology,
            objects,
            all_cpus,
        })
    }

    /// Every CPU of the node that tasks may use.
    pub fn all_cpus(&self) -> CpuMask {
        CpuMask(self.all_cpus.clone())
    }

    /// Whether a mask covers the whole node, which means "not bound".
    pub fn is_unbound(&self, mask: &CpuMask) -> bool {
        self.all_cpus.is_subset(&mask.0)
    }

    /// The PMIx locality string of a task bound to `mask`: for each object kind, the
    /// logical indices of the objects whose CPUs intersect the mask (the rule of
    /// OpenPMIx's generator). `None` if the mask has no CPU of this node.
    pub fn locality(&self, mask: &CpuMask) -> Option<LocalityString> {
        if mask.0.is_disjoint(&self.all_cpus) {
            return None;
        }
        let mut loc = LocalityString::new();
        for (kind, objs) in &self.objects {
            let hit = objs
                .iter()
                .filter(|(_, cpus)| !cpus.is_disjoint(&mask.0))
                .map(|(i, _)| *i);
            let list = IndexList::from_indices(hit);
            if !list.is_empty() {
                loc.set(*kind, list);
            }
        }
        Some(loc)
    }

    /// A one-line summary, for `--verbose`.
    pub fn summary(&self) -> String {
        let count = |ty| self.topology.objects_with_type(ty).len();
        format!(
            "{} package(s), {} NUMA node(s), {} L3, {} core(s), {} PU(s)",
            count(ObjectType::Package),
            count(ObjectType::NUMANode),
            count(ObjectType::L3Cache),
            count(ObjectType::Core),
            count(ObjectType::PU)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(cpus: &[u32]) -> CpuMask {
        CpuMask(cpus.iter().copied().collect())
    }

    #[test]
    fn parses_slurm_mask_and_map_lists() {
        let b = SlurmBinding::parse(Some("cores,mask_cpu:"), Some("0x1,0x6,0X100")).unwrap();
        assert_eq!(
            b,
            SlurmBinding::Masks(vec![mask(&[0]), mask(&[1, 2]), mask(&[8])])
        );
        let b = SlurmBinding::parse(Some("map_cpu:"), Some("3,1")).unwrap();
        assert_eq!(b.mask_of(0), Some(&mask(&[3])));
        assert_eq!(
            b.mask_of(3),
            Some(&mask(&[1])),
            "entries are reused cyclically"
        );
        assert_eq!(
            SlurmBinding::parse(Some("none"), None).unwrap(),
            SlurmBinding::None
        );
        assert_eq!(SlurmBinding::parse(None, None).unwrap(), SlurmBinding::None);
    }

    #[test]
    fn rejects_unusable_binding_lists() {
        for (ty, list) in [
            ("mask_cpu:", "0xZZ"),
            ("mask_cpu:", "0x0"),
            ("mask_cpu:", ""),
            ("map_cpu:", "-1"),
            ("map_cpu:", "99999999"),
            ("map_ldom:", "0,1"),
            ("rank", ""),
        ] {
            assert!(
                SlurmBinding::parse(Some(ty), Some(list)).is_err(),
                "{ty} {list} must be rejected"
            );
        }
    }
}
