//! Level names (`core` .. `socket`, `node`, `switch1`..`switchN`, `world`) and the user's
//! level filter (`--levels numa,node,switch1`).

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::locality::ObjectKind;

/// An intra-node level: ranks that share one hardware object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IntraLevel {
    /// Ranks on the same physical core (only when bound to hardware threads).
    Core,
    /// Same L1 cache.
    L1,
    /// Same L2 cache.
    L2,
    /// Same L3 cache.
    L3,
    /// Same NUMA node.
    Numa,
    /// Same package.
    Socket,
}

impl IntraLevel {
    /// In hardware order, finest first; the tie-break when two levels have as many groups.
    pub const ALL: [IntraLevel; 6] = [
        IntraLevel::Core,
        IntraLevel::L1,
        IntraLevel::L2,
        IntraLevel::L3,
        IntraLevel::Numa,
        IntraLevel::Socket,
    ];

    /// The locality token this level reads.
    pub fn object(self) -> ObjectKind {
        match self {
            IntraLevel::Core => ObjectKind::Core,
            IntraLevel::L1 => ObjectKind::L1,
            IntraLevel::L2 => ObjectKind::L2,
            IntraLevel::L3 => ObjectKind::L3,
            IntraLevel::Numa => ObjectKind::Numa,
            IntraLevel::Socket => ObjectKind::Package,
        }
    }

    /// When two levels give the same partition, the one with the lower rank here names it.
    pub fn name_preference(self) -> u8 {
        match self {
            IntraLevel::Numa => 0,
            IntraLevel::Socket => 1,
            IntraLevel::Core => 2,
            IntraLevel::L3 => 3,
            IntraLevel::L2 => 4,
            IntraLevel::L1 => 5,
        }
    }

    fn name(self) -> &'static str {
        match self {
            IntraLevel::Core => "core",
            IntraLevel::L1 => "l1",
            IntraLevel::L2 => "l2",
            IntraLevel::L3 => "l3",
            IntraLevel::Numa => "numa",
            IntraLevel::Socket => "socket",
        }
    }
}

/// The name of one level of the hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LevelName {
    /// A level inside a node.
    Intra(IntraLevel),
    /// All ranks of a node.
    Node,
    /// Nodes below the same switch at this height (1 = leaf switch).
    Switch(u16),
    /// Everyone left after the last level.
    World,
}

impl fmt::Display for LevelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LevelName::Intra(l) => f.write_str(l.name()),
            LevelName::Node => f.write_str("node"),
            LevelName::Switch(h) => write!(f, "switch{h}"),
            LevelName::World => f.write_str("world"),
        }
    }
}

impl LevelName {
    /// The level as one number, for exchanging level lists between processes
    /// ([`LevelName::from_code`] reads it back): intra-node levels 0..=5 in
    /// [`IntraLevel::ALL`]'s order, `node` 0x100, `switchH` 0x10000 + H, `world` `u32::MAX`.
    pub fn code(self) -> u32 {
        match self {
            LevelName::Intra(l) => IntraLevel::ALL.iter().position(|&x| x == l).unwrap_or(0) as u32,
            LevelName::Node => 0x100,
            LevelName::Switch(h) => 0x1_0000 + u32::from(h),
            LevelName::World => u32::MAX,
        }
    }

    /// The level [`LevelName::code`] gave `code`, if any.
    pub fn from_code(code: u32) -> Option<LevelName> {
        match code {
            c if (c as usize) < IntraLevel::ALL.len() => {
                Some(LevelName::Intra(IntraLevel::ALL[c as usize]))
            }
            0x100 => Some(LevelName::Node),
            u32::MAX => Some(LevelName::World),
            c if c > 0x1_0000 && c <= 0x1_0000 + u32::from(u16::MAX) => {
                Some(LevelName::Switch((c - 0x1_0000) as u16))
            }
            _ => None,
        }
    }
}

impl FromStr for LevelName {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if let Some(l) = IntraLevel::ALL.into_iter().find(|l| l.name() == s) {
            return Ok(LevelName::Intra(l));
        }
        match s {
            "node" => return Ok(LevelName::Node),
            "world" => return Ok(LevelName::World),
            _ => {}
        }
        if let Some(h) = s.strip_prefix("switch")
            && !h.is_empty()
            && h.bytes().all(|b| b.is_ascii_digit())
            && !h.starts_with('0')
            && let Ok(h) = h.parse::<u16>()
        {
            return Ok(LevelName::Switch(h));
        }
        Err(format!(
            "unknown level {s:?}; levels are core, l1, l2, l3, numa, socket, node, \
             switch1..switchN (or `switch` for all), world"
        ))
    }
}

/// Which levels the user keeps. `world` is always kept: without a top group the ranks would
/// not all be connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelFilter {
    intra: [bool; 6],
    node: bool,
    /// `None` keeps every switch level.
    switches: Option<Vec<u16>>,
}

impl Default for LevelFilter {
    fn default() -> Self {
        Self::all()
    }
}

impl LevelFilter {
    /// Every level.
    pub fn all() -> Self {
        Self {
            intra: [true; 6],
            node: true,
            switches: None,
        }
    }

    /// Parses a comma-separated list such as `numa,node,switch1`. `switch` keeps every
    /// switch level.
    pub fn parse(list: &str) -> Result<Self> {
        let bad = |reason: String| Error::Levels {
            list: list.to_string(),
            reason,
        };
        let mut filter = Self {
            intra: [false; 6],
            node: false,
            switches: Some(Vec::new()),
        };
        let mut any = false;
        for item in list.split(',').map(str::trim) {
            if item.is_empty() {
                return Err(bad("empty level name".into()));
            }
            any = true;
            if item == "switch" {
                filter.switches = None;
                continue;
            }
            match item.parse::<LevelName>().map_err(&bad)? {
                LevelName::Intra(l) => filter.intra[l as usize] = true,
                LevelName::Node => filter.node = true,
                LevelName::Switch(h) => {
                    if let Some(v) = &mut filter.switches {
                        v.push(h);
                    }
                }
                LevelName::World => {}
            }
        }
        if !any {
            return Err(bad("no level given".into()));
        }
        Ok(filter)
    }

    /// Whether `level` is kept.
    pub fn keeps(&self, level: LevelName) -> bool {
        match level {
            LevelName::Intra(l) => self.intra[l as usize],
            LevelName::Node => self.node,
            LevelName::Switch(h) => self.switches.as_ref().is_none_or(|v| v.contains(&h)),
            LevelName::World => true,
        }
    }

    /// A canonical text form, for the job digest.
    pub fn canonical(&self) -> String {
        let mut parts: Vec<String> = IntraLevel::ALL
            .into_iter()
            .filter(|l| self.intra[*l as usize])
            .map(|l| l.name().to_string())
            .collect();
        if self.node {
            parts.push("node".into());
        }
        match &self.switches {
            None => parts.push("switch".into()),
            Some(v) => {
                let mut v = v.clone();
                v.sort_unstable();
                v.dedup();
                parts.extend(v.into_iter().map(|h| format!("switch{h}")));
            }
        }
        parts.push("world".into());
        parts.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in [
            "core", "l1", "l2", "l3", "numa", "socket", "node", "switch1", "switch12", "world",
        ] {
            assert_eq!(s.parse::<LevelName>().unwrap().to_string(), s);
        }
        for bad in [
            "",
            "switch",
            "switch0",
            "switch01",
            "Numa",
            "rack",
            "switch99999",
        ] {
            assert!(bad.parse::<LevelName>().is_err(), "{bad}");
        }
    }

    #[test]
    fn filter() {
        let f = LevelFilter::parse("numa, node,switch2").unwrap();
        assert!(f.keeps(LevelName::Intra(IntraLevel::Numa)));
        assert!(!f.keeps(LevelName::Intra(IntraLevel::Socket)));
        assert!(f.keeps(LevelName::Switch(2)) && !f.keeps(LevelName::Switch(1)));
        assert!(f.keeps(LevelName::World));
        assert_eq!(f.canonical(), "numa,node,switch2,world");
        assert!(
            LevelFilter::parse("numa,switch")
                .unwrap()
                .keeps(LevelName::Switch(7))
        );
        let e = LevelFilter::parse("numa,rack").unwrap_err();
        assert!(e.to_string().contains("\"rack\""), "{e}");
        assert!(LevelFilter::parse("").is_err());
        assert!(LevelFilter::parse("numa,,node").is_err());
    }
}
