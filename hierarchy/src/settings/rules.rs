//! The rules' grammar: `[SCOPE][>MEMBERS][<BYTES]=ALGORITHM` algorithm rules and
//! `[COLLECTIVE][<BYTES]=CHUNK` pipeline-chunk rules, byte counts, and the first-match
//! choice among the user's rules and the built-in ones.

use std::fmt;
use std::str::FromStr;

use crate::level::LevelName;

/// A collective, as pipeline-chunk rules name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collective {
    Bcast,
    Reduce,
    Allreduce,
    Allgather,
}

impl Collective {
    /// Every collective that pipelines.
    pub const ALL: [Collective; 4] = [
        Collective::Bcast,
        Collective::Reduce,
        Collective::Allreduce,
        Collective::Allgather,
    ];

    /// Its name in settings and rules files.
    pub fn key(self) -> &'static str {
        match self {
            Collective::Bcast => "bcast",
            Collective::Reduce => "reduce",
            Collective::Allreduce => "allreduce",
            Collective::Allgather => "allgather",
        }
    }
}

impl FromStr for Collective {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Collective::ALL
            .into_iter()
            .find(|c| c.key() == s)
            .ok_or_else(|| {
                format!("unknown collective {s:?}; use bcast, reduce, allreduce or allgather")
            })
    }
}

/// One `[COLLECTIVE][<BYTES]=CHUNK` pipeline-chunk rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRule {
    /// The collective it applies to (`None`: every one).
    pub collective: Option<Collective>,
    /// It applies to messages smaller than this many bytes (an Allgather's whole result).
    pub below: Option<u64>,
    /// The chunk in bytes.
    pub bytes: u32,
}

impl ChunkRule {
    pub(super) fn matches(&self, c: Collective, bytes: usize) -> bool {
        self.collective.is_none_or(|x| x == c) && self.below.is_none_or(|b| (bytes as u64) < b)
    }
}

impl fmt::Display for ChunkRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.collective.map_or("", Collective::key);
        match self.below {
            Some(b) => write!(f, "{c}<{}", format_bytes(b))?,
            None if c.is_empty() => f.write_str("*")?,
            None => f.write_str(c)?,
        }
        write!(f, "={}", format_bytes(self.bytes.into()))
    }
}

/// `bytes` as the size of a pipeline's pieces (a chunk, Rabenseifner's piece), which must be
/// between 4 KiB and 1 GiB; else what `what` must be.
pub(super) fn pipeline_bytes(bytes: u64, what: &str) -> std::result::Result<u32, String> {
    const RANGE: std::ops::RangeInclusive<u64> = 4 << 10..=1 << 30;
    if RANGE.contains(&bytes) {
        Ok(bytes as u32)
    } else {
        Err(format!(
            "the {what} must be between {} and {} bytes",
            RANGE.start(),
            RANGE.end()
        ))
    }
}

/// Parses comma-separated `[COLLECTIVE][<BYTES]=CHUNK` rules; a bare `CHUNK` is `*=CHUNK`.
pub(super) fn parse_chunk_rules(text: &str) -> std::result::Result<Vec<ChunkRule>, String> {
    let mut rules = Vec::new();
    for (part, collective, below, size) in rule_parts(text)? {
        let collective = match collective {
            "" | "*" => None,
            c => Some(c.parse().map_err(|e| format!("rule {part:?}: {e}"))?),
        };
        let bytes = parse_bytes(size)?;
        let bytes = pipeline_bytes(bytes, "chunk").map_err(|e| format!("rule {part:?}: {e}"))?;
        rules.push(ChunkRule {
            collective,
            below,
            bytes,
        });
    }
    if rules.is_empty() {
        return Err("no chunk given".to_string());
    }
    Ok(rules)
}

/// Where a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every group.
    Any,
    /// Groups whose members share a node (shared-memory queues).
    Intra,
    /// Groups that span nodes (MPI point-to-point).
    Inter,
    /// One level.
    Level(LevelName),
}

impl Scope {
    pub(super) fn matches(self, level: LevelName, intra: bool) -> bool {
        match self {
            Scope::Any => true,
            Scope::Intra => intra,
            Scope::Inter => !intra,
            Scope::Level(l) => l == level,
        }
    }
}

/// One `[SCOPE][>MEMBERS][<BYTES]=ALGORITHM` rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule<A> {
    /// Where it applies.
    pub scope: Scope,
    /// It applies to groups of more than this many members only (broadcast and reduce
    /// rules; the Allreduce's and Allgather's are not per group).
    pub more_than: Option<u32>,
    /// It applies to messages smaller than this many bytes.
    pub below: Option<u64>,
    /// What to run.
    pub algorithm: A,
}

/// Parses `123`, `8K`, `16M`, `1G` (powers of 1024).
pub fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let (digits, shift) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{s:?} is not a byte count (like 4096, 8K or 16M)"));
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n < 1 << 40)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// Writes a byte count as [`parse_bytes`] reads it, with the largest suffix that divides
/// it exactly: `4096` → `4K`, `1536` → `1536`, `16777216` → `16M`.
pub fn format_bytes(n: u64) -> String {
    for (shift, suffix) in [(30, 'G'), (20, 'M'), (10, 'K')] {
        if n != 0 && n.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", n >> shift);
        }
    }
    n.to_string()
}

/// One rule of a list, split: the rule's text, `WHERE`, the bound and `VALUE`.
pub(super) type RulePart<'a> = (&'a str, &'a str, Option<u64>, &'a str);

/// Splits comma-separated `[WHERE][<BYTES]=VALUE` rules (a bare `VALUE` is `*=VALUE`;
/// `WHERE` may end in a group-size clause `>MEMBERS`, see [`parse_rules`]).
pub(super) fn rule_parts(text: &str) -> std::result::Result<Vec<RulePart<'_>>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lhs, value) = part.split_once('=').unwrap_or(("*", part));
        let (head, below) = match lhs.split_once('<') {
            Some((head, bytes)) => (head, Some(parse_bytes(bytes)?)),
            None => (lhs, None),
        };
        out.push((part, head, below, value));
    }
    Ok(out)
}

/// Parses `[SCOPE][>MEMBERS][<BYTES]=ALGORITHM` rules; `per_group`: whether a rule may
/// name a group size (broadcast and reduce rules).
pub(super) fn parse_rules<A: FromStr<Err = String>>(
    text: &str,
    per_group: bool,
) -> std::result::Result<Vec<Rule<A>>, String> {
    let mut rules = Vec::new();
    for (part, head, below, alg) in rule_parts(text)? {
        let (scope, more_than) = match head.split_once('>') {
            Some(_) if !per_group => {
                return Err(format!(
                    "rule {part:?}: a group size (>MEMBERS) applies to bcast and reduce rules only"
                ));
            }
            Some((scope, members)) => {
                let m = members.parse::<u32>().map_err(|_| {
                    format!("rule {part:?}: {members:?} is not a number of members (like intra>2)")
                })?;
                (scope, Some(m))
            }
            None => (head, None),
        };
        let scope = match scope {
            "" | "*" => Scope::Any,
            "intra" => Scope::Intra,
            "inter" => Scope::Inter,
            level => Scope::Level(level.parse().map_err(|e| format!("rule {part:?}: {e}"))?),
        };
        let algorithm = alg.parse().map_err(|e| format!("rule {part:?}: {e}"))?;
        rules.push(Rule {
            scope,
            more_than,
            below,
            algorithm,
        });
    }
    Ok(rules)
}

/// The first rule of `rules`, then of `defaults`, that applies to a group of `members` at
/// `level` (`None`: a rule that is not per group, which no group-size clause matches).
pub(super) fn pick<A: Copy>(
    rules: &[Rule<A>],
    defaults: &[Rule<A>],
    level: LevelName,
    intra: bool,
    members: Option<usize>,
    bytes: usize,
) -> A {
    rules
        .iter()
        .chain(defaults)
        .find(|r| {
            r.scope.matches(level, intra)
                && r.more_than
                    .is_none_or(|m| members.is_some_and(|n| n > m as usize))
                && r.below.is_none_or(|b| (bytes as u64) < b)
        })
        .map(|r| r.algorithm)
        .unwrap_or(defaults[defaults.len() - 1].algorithm)
}
