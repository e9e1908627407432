//! The cost model: latency and bandwidth per link class, the cost of copying and
//! combining bytes on a core, and each node's injection bandwidth.
//!
//! A transfer of `m` bytes between two ranks whose lowest shared level is class `c`
//! arrives `alpha(c) + m / bandwidth(c)` after it starts; the sender is busy for
//! `m / bandwidth(c)`. Of the `alpha`, `overhead(c)` (LogP's `o`) is the core's time at
//! each end: the sends a rank posts at once, and the messages it takes in, pay it one
//! after the other. Transfers that leave a node queue behind each other at the node's
//! network interface (`nic`), which holds each for `m / nic`, and at least for its time
//! per message (`rate`: LogGP's `g`). A local copy of `m` bytes takes `m / copy`, and
//! combining `m` bytes (a reduction) `m / reduce`, or `m / memory` beyond `cache` bytes.
//! Each rank starts a collective after the `call` overhead.
//!
//! The file format, version 1: one setting per line, `#` starts a comment.
//!
//! ```text
//! version 1
//! link l2     alpha=0.2us bandwidth=20GB/s
//! link node   alpha=0.4us bandwidth=10GB/s overhead=50ns
//! link leaf   alpha=1.5us bandwidth=12.5GB/s
//! copy   bandwidth=10GB/s
//! reduce bandwidth=5GB/s memory=2.5GB/s cache=1024KiB
//! nic    bandwidth=12.5GB/s rate=150M/s
//! call   overhead=0.2us
//! ```
//!
//! Classes not given keep their defaults ([`CostModel::default`]). Times take `ns`, `us`
//! or `ms`; bandwidths `MB/s` or `GB/s` (powers of 1000); message rates `M/s` or `K/s`;
//! sizes `KiB` or `MiB`.

use std::fmt;
use std::str::FromStr;

/// What two ranks share at the lowest: the class of the link between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkClass {
    /// The same level-2 cache.
    L2,
    /// The same level-3 cache.
    L3,
    /// The same NUMA node.
    Numa,
    /// The same socket (package).
    Socket,
    /// The same node.
    Node,
    /// Nodes under the same leaf switch.
    Leaf,
    /// Nodes under the same switch above the leaves.
    Spine,
    /// Nodes that share no switch of the map (or no map at all).
    World,
}

impl LinkClass {
    /// Every class, lowest first.
    pub const ALL: [LinkClass; 8] = [
        LinkClass::L2,
        LinkClass::L3,
        LinkClass::Numa,
        LinkClass::Socket,
        LinkClass::Node,
        LinkClass::Leaf,
        LinkClass::Spine,
        LinkClass::World,
    ];

    /// The name used in model files and reports.
    pub fn name(self) -> &'static str {
        match self {
            LinkClass::L2 => "l2",
            LinkClass::L3 => "l3",
            LinkClass::Numa => "numa",
            LinkClass::Socket => "socket",
            LinkClass::Node => "node",
            LinkClass::Leaf => "leaf",
            LinkClass::Spine => "spine",
            LinkClass::World => "world",
        }
    }

    /// Whether the link leaves the node.
    pub fn is_network(self) -> bool {
        self > LinkClass::Node
    }
}

impl fmt::Display for LinkClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LinkClass {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        LinkClass::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown link class {s:?}; use l2, l3, numa, socket, node, leaf, spine or world"
                )
            })
    }
}

/// Latency and bandwidth of one link class, and measured one-way times between.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Link {
    /// Latency, in microseconds.
    pub alpha_us: f64,
    /// Bandwidth, in bytes per microsecond (MB/s).
    pub bytes_per_us: f64,
    /// One-way times measured at sizes between (`points=`), which a message of a size in
    /// their range takes instead of `alpha + m / bandwidth`: real paths change protocol
    /// with the size (inline in a control line, through fragments, by single copy).
    pub points: Points,
    /// The time a message takes of its sender's core and of its receiver's (LogP's `o`),
    /// in microseconds: part of the one-way time (at most half the `alpha`), which a rank
    /// sending or receiving many messages at once pays for each, one after the other.
    pub overhead_us: f64,
}

impl Link {
    /// A link without measured points.
    pub fn new(alpha_us: f64, bytes_per_us: f64) -> Link {
        Link {
            alpha_us,
            bytes_per_us,
            points: Points::default(),
            overhead_us: 0.0,
        }
    }

    /// The time from the start of a send of `bytes` to its arrival: `alpha + bytes /
    /// bandwidth`; with measured points, the straight line between the two that enclose
    /// `bytes` (from `(0, alpha)`), and beyond the last one its time plus the rest at the
    /// bandwidth.
    pub fn one_way_us(&self, bytes: u64) -> f64 {
        let mut below = (0u64, self.alpha_us);
        for &(b, t) in self.points.as_slice() {
            if bytes <= b {
                let span = (b - below.0) as f64;
                let part = if span > 0.0 {
                    (bytes - below.0) as f64 / span
                } else {
                    1.0
                };
                return below.1 + part * (t - below.1);
            }
            below = (b, t);
        }
        below.1 + (bytes - below.0) as f64 / self.bytes_per_us
    }

    /// The time for `bytes` to pass, latency excluded: how long the sender is busy.
    pub fn transfer_us(&self, bytes: u64) -> f64 {
        (self.one_way_us(bytes) - self.alpha_us).max(0.0)
    }
}

/// Up to [`Points::MAX`] one-way times by message size, sizes increasing and times not
/// decreasing.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Points {
    len: usize,
    at: [(u64, f64); Points::MAX],
}

impl Points {
    /// The most points a link holds.
    pub const MAX: usize = 8;

    /// The points of `(bytes, one-way us)` pairs: at most [`Points::MAX`], sizes
    /// increasing, times not decreasing.
    pub fn new(points: &[(u64, f64)]) -> Result<Points, String> {
        if points.len() > Self::MAX {
            return Err(format!("at most {} points", Self::MAX));
        }
        for w in points.windows(2) {
            if w[1].0 <= w[0].0 {
                return Err("point sizes must increase".into());
            }
            if w[1].1 < w[0].1 {
                return Err("point times must not decrease with the size".into());
            }
        }
        let mut at = [(0, 0.0); Self::MAX];
        at[..points.len()].copy_from_slice(points);
        Ok(Points {
            len: points.len(),
            at,
        })
    }

    /// The points, smallest size first.
    pub fn as_slice(&self) -> &[(u64, f64)] {
        &self.at[..self.len]
    }

    /// `SIZE:TIME,...` as a model file writes them (empty without points).
    fn to_text(self) -> String {
        self.as_slice()
            .iter()
            .map(|&(b, t)| format!("{}:{}us", size_text(b), round(t)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Reads `SIZE:TIME,...`, e.g. `1KiB:0.65us,64KiB:10.5us`.
    fn parse(v: &str) -> Result<Points, String> {
        let mut points = Vec::new();
        for p in v.split(',') {
            let (b, t) = p
                .split_once(':')
                .ok_or_else(|| format!("point {p:?} is not SIZE:TIME, e.g. 4KiB:1.2us"))?;
            points.push((parse_size(b)?, parse_time_us(t)?));
        }
        Points::new(&points)
    }
}

impl serde::Serialize for Points {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.as_slice().serialize(s)
    }
}

/// `bytes` in the largest unit that divides it: `B`, `KiB` or `MiB`.
fn size_text(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{}MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{}KiB", bytes >> 10)
    } else {
        format!("{bytes}B")
    }
}

/// A bad model file: the line and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ModelError {
    /// The line number, from 1.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// The whole model.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CostModel {
    /// Each class's link, in the order of [`LinkClass::ALL`].
    pub links: [Link; 8],
    /// Local copies, bytes per microsecond.
    pub copy_bytes_per_us: f64,
    /// Combining (reductions) of operands in cache, bytes per microsecond.
    pub reduce_bytes_per_us: f64,
    /// Combining operands that no longer fit in the cache (more than `reduce_cache_bytes`
    /// at once), bytes per microsecond: reductions of large messages run at memory speed.
    pub reduce_memory_bytes_per_us: f64,
    /// The most bytes a combine takes at the in-cache rate.
    pub reduce_cache_bytes: u64,
    /// Each node's network injection, bytes per microsecond.
    pub nic_bytes_per_us: f64,
    /// The network interface's time per message (the inverse of its message rate,
    /// LogGP's `g`): a message holds the interface for at least this long, however small.
    pub nic_message_us: f64,
    /// Whether a node's interface carries one message at a time in both directions
    /// together (`duplex=half`): a message then holds the receiving node's interface too.
    /// Real network adapters are full duplex; emulated nodes on one host, whose "network"
    /// is the host's TCP stack on the same cores, are not.
    pub nic_half_duplex: bool,
    /// The cost of a collective call on each rank before its first step (entering the
    /// library, choosing the algorithm), in microseconds.
    pub call_us: f64,
}

impl Default for CostModel {
    /// A typical cluster: shared memory from 0.2 us and 20 GB/s inside an L2 cache to
    /// 0.5 us and 8 GB/s across sockets; a 100 Gb/s network (12.5 GB/s) with 1.5 us to a
    /// node on the same leaf switch and 0.5 us more per switch level above it, whose
    /// interface sends 150 million messages a second; sums at 5 GB/s in cache and
    /// 2.5 GB/s beyond 1 MiB; 0.2 us to enter a collective.
    fn default() -> Self {
        let link = |alpha_us: f64, gb_per_s: f64| Link::new(alpha_us, gb_per_s * 1e3);
        CostModel {
            links: [
                link(0.2, 20.0),
                link(0.25, 16.0),
                link(0.3, 12.0),
                link(0.4, 10.0),
                link(0.5, 8.0),
                link(1.5, 12.5),
                link(2.0, 12.5),
                link(2.5, 12.5),
            ],
            copy_bytes_per_us: 10e3,
            reduce_bytes_per_us: 5e3,
            reduce_memory_bytes_per_us: 2.5e3,
            reduce_cache_bytes: 1 << 20,
            nic_bytes_per_us: 12.5e3,
            nic_message_us: 1.0 / 150.0,
            nic_half_duplex: false,
            call_us: 0.2,
        }
    }
}

impl CostModel {
    /// The time to combine `bytes` (a reduction's step): at the in-cache rate up to
    /// `reduce_cache_bytes`, at the memory rate beyond.
    pub fn combine_us(&self, bytes: u64) -> f64 {
        let rate = if bytes > self.reduce_cache_bytes {
            self.reduce_memory_bytes_per_us
        } else {
            self.reduce_bytes_per_us
        };
        bytes as f64 / rate
    }

    /// Class `c`'s link.
    pub fn link(&self, c: LinkClass) -> &Link {
        &self.links[c as usize]
    }

    /// Parses a model file (the module's format); unset values keep the defaults.
    pub fn parse(text: &str) -> Result<CostModel, ModelError> {
        let mut model = CostModel::default();
        let mut version = false;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let bad = |message: String| ModelError { line, message };
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let mut words = content.split_whitespace();
            let key = words.next().unwrap_or_default();
            if !version {
                if key != "version" {
                    return Err(bad(
                        "the first setting must be `version 1` (the format's version)".into(),
                    ));
                }
                match words.next() {
                    Some("1") if words.next().is_none() => version = true,
                    other => {
                        return Err(bad(format!(
                            "unsupported version {:?}; this topo-run reads version 1",
                            other.unwrap_or("")
                        )));
                    }
                }
                continue;
            }
            let class = match key {
                "link" => Some(
                    words
                        .next()
                        .ok_or_else(|| bad("`link` needs a class, e.g. `link node`".into()))?
                        .parse::<LinkClass>()
                        .map_err(bad)?,
                ),
                "copy" | "reduce" | "nic" | "call" => None,
                "version" => return Err(bad("`version` given twice".into())),
                other => {
                    return Err(bad(format!(
                        "unknown setting {other:?}; use link, copy, reduce, nic or call"
                    )));
                }
            };
            let keys: &[&str] = match key {
                "link" => &["alpha", "bandwidth", "points", "overhead"],
                "copy" => &["bandwidth"],
                "reduce" => &["bandwidth", "memory", "cache"],
                "nic" => &["bandwidth", "rate", "duplex"],
                _ => &["overhead"],
            };
            let mut set = false;
            for word in words {
                let (k, v) = word
                    .split_once('=')
                    .ok_or_else(|| bad(format!("{word:?} is not key=value")))?;
                if !keys.contains(&k) {
                    return Err(bad(format!(
                        "unknown key {k:?} for {key}; use {}",
                        keys.join(", ")
                    )));
                }
                set = true;
                match (key, k) {
                    ("link", "alpha") => {
                        model.links[class.expect("a link names its class") as usize].alpha_us =
                            parse_time_us(v).map_err(bad)?
                    }
                    ("link", "bandwidth") => {
                        model.links[class.expect("a link names its class") as usize].bytes_per_us =
                            parse_bandwidth(v).map_err(bad)?
                    }
                    ("link", "points") => {
                        model.links[class.expect("a link names its class") as usize].points =
                            Points::parse(v).map_err(bad)?
                    }
                    ("link", _) => {
                        model.links[class.expect("a link names its class") as usize].overhead_us =
                            parse_time_us(v).map_err(bad)?
                    }
                    ("copy", _) => model.copy_bytes_per_us = parse_bandwidth(v).map_err(bad)?,
                    ("reduce", "bandwidth") => {
                        model.reduce_bytes_per_us = parse_bandwidth(v).map_err(bad)?
                    }
                    ("reduce", "memory") => {
                        model.reduce_memory_bytes_per_us = parse_bandwidth(v).map_err(bad)?
                    }
                    ("reduce", _) => model.reduce_cache_bytes = parse_size(v).map_err(bad)?,
                    ("nic", "bandwidth") => {
                        model.nic_bytes_per_us = parse_bandwidth(v).map_err(bad)?
                    }
                    ("nic", "rate") => model.nic_message_us = 1.0 / parse_rate(v).map_err(bad)?,
                    ("nic", _) => {
                        model.nic_half_duplex = match v {
                            "full" => false,
                            "half" => true,
                            _ => return Err(bad(format!("duplex {v:?}: use full or half"))),
                        }
                    }
                    _ => model.call_us = parse_time_us(v).map_err(bad)?,
                }
            }
            if !set {
                return Err(bad(match class {
                    Some(c) => {
                        format!(
                            "`link {c}` sets nothing; give alpha=, bandwidth=, points= or overhead="
                        )
                    }
                    None => format!("`{key}` sets nothing; give {}=", keys.join("= or ")),
                }));
            }
        }
        if !version {
            return Err(ModelError {
                line: 1,
                message: "empty model; it starts with `version 1`".into(),
            });
        }
        Ok(model)
    }

    /// The model as a file that [`CostModel::parse`] reads back.
    pub fn to_text(&self) -> String {
        let mut out =
            String::from("# topo-run cost model (topo-run simulate --model)\nversion 1\n");
        for c in LinkClass::ALL {
            let l = self.link(c);
            out.push_str(&format!(
                "link {:<6} alpha={}us bandwidth={}GB/s overhead={}us",
                c.name(),
                round(l.alpha_us),
                round(l.bytes_per_us / 1e3),
                round(l.overhead_us)
            ));
            if l.points.len > 0 {
                out.push_str(&format!(" points={}", l.points.to_text()));
            }
            out.push('\n');
        }
        let gb = |b: f64| round(b / 1e3);
        out.push_str(&format!(
            "copy        bandwidth={}GB/s\n",
            gb(self.copy_bytes_per_us)
        ));
        out.push_str(&format!(
            "reduce      bandwidth={}GB/s memory={}GB/s cache={}KiB\n",
            gb(self.reduce_bytes_per_us),
            gb(self.reduce_memory_bytes_per_us),
            self.reduce_cache_bytes / 1024
        ));
        out.push_str(&format!(
            "nic         bandwidth={}GB/s rate={}M/s duplex={}\n",
            gb(self.nic_bytes_per_us),
            round(1.0 / self.nic_message_us),
            if self.nic_half_duplex { "half" } else { "full" }
        ));
        out.push_str(&format!("call        overhead={}us\n", round(self.call_us)));
        out
    }
}

/// `x` to 4 significant digits, for files people read.
fn round(x: f64) -> f64 {
    if x == 0.0 {
        return 0.0;
    }
    let scale = 10f64.powi(3 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// `1.5us`, `800ns`, `0.01ms` in microseconds.
fn parse_time_us(v: &str) -> Result<f64, String> {
    let (num, scale) = if let Some(n) = v.strip_suffix("ns") {
        (n, 1e-3)
    } else if let Some(n) = v.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1e3)
    } else {
        return Err(format!("time {v:?} needs a unit: ns, us or ms"));
    };
    match num.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x * scale),
        _ => Err(format!("time {v:?} is not a number of {}", &v[num.len()..])),
    }
}

/// `150M/s`, `800K/s` (messages per second) in messages per microsecond.
fn parse_rate(v: &str) -> Result<f64, String> {
    let (num, scale) = if let Some(n) = v.strip_suffix("M/s") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix("K/s") {
        (n, 1e-3)
    } else {
        return Err(format!(
            "message rate {v:?} needs a unit: M/s or K/s (messages per second)"
        ));
    };
    match num.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x * scale),
        _ => Err(format!(
            "message rate {v:?} must be a positive number of {}",
            &v[num.len()..]
        )),
    }
}

/// `1MiB`, `512KiB` in bytes.
fn parse_size(v: &str) -> Result<u64, String> {
    let (num, scale) = if let Some(n) = v.strip_suffix("MiB") {
        (n, 1u64 << 20)
    } else if let Some(n) = v.strip_suffix("KiB") {
        (n, 1 << 10)
    } else if let Some(n) = v.strip_suffix('B') {
        (n, 1)
    } else {
        return Err(format!("size {v:?} needs a unit: B, KiB or MiB"));
    };
    match num.parse::<u64>() {
        Ok(x) if x > 0 => Ok(x * scale),
        _ => Err(format!(
            "size {v:?} must be a positive whole number of {}",
            &v[num.len()..]
        )),
    }
}

/// `12.5GB/s`, `800MB/s` in bytes per microsecond.
fn parse_bandwidth(v: &str) -> Result<f64, String> {
    let (num, scale) = if let Some(n) = v.strip_suffix("GB/s") {
        (n, 1e3)
    } else if let Some(n) = v.strip_suffix("MB/s") {
        (n, 1.0)
    } else {
        return Err(format!("bandwidth {v:?} needs a unit: MB/s or GB/s"));
    };
    match num.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x * scale),
        _ => Err(format!(
            "bandwidth {v:?} must be a positive number of {}",
            &v[num.len()..]
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_reads_back_what_it_writes() {
        let mut m = CostModel::default();
        m.links[LinkClass::Leaf as usize].alpha_us = 1.25;
        m.nic_bytes_per_us = 25e3;
        assert_eq!(CostModel::parse(&m.to_text()).unwrap(), m);
    }

    #[test]
    fn settings_override_the_defaults() {
        let m = CostModel::parse(
            "# a comment\nversion 1\nlink node alpha=800ns  # inline\nreduce bandwidth=2500MB/s\n",
        )
        .unwrap();
        assert_eq!(m.link(LinkClass::Node).alpha_us, 0.8);
        assert_eq!(m.link(LinkClass::Node).bytes_per_us, 8e3);
        assert_eq!(m.reduce_bytes_per_us, 2.5e3);
    }

    #[test]
    fn the_message_rate_memory_rate_and_call_overhead_parse() {
        let m = CostModel::parse(
            "version 1\nnic rate=200M/s\nreduce memory=1GB/s cache=512KiB\ncall overhead=500ns\n",
        )
        .unwrap();
        assert_eq!(m.nic_message_us, 1.0 / 200.0);
        assert_eq!(m.nic_bytes_per_us, 12.5e3);
        assert_eq!(m.reduce_memory_bytes_per_us, 1e3);
        assert_eq!(m.reduce_bytes_per_us, 5e3);
        assert_eq!(m.reduce_cache_bytes, 512 << 10);
        assert_eq!(m.call_us, 0.5);
        let o = CostModel::parse("version 1\nlink leaf alpha=2us overhead=300ns\n").unwrap();
        assert_eq!(o.link(LinkClass::Leaf).overhead_us, 0.3);
        assert_eq!(o.link(LinkClass::Node).overhead_us, 0.0);
        assert_eq!(CostModel::parse(&o.to_text()).unwrap(), o);
        let d = CostModel {
            nic_message_us: 1.0 / 80.0,
            nic_half_duplex: true,
            call_us: 0.35,
            ..CostModel::default()
        };
        assert_eq!(CostModel::parse(&d.to_text()).unwrap(), d);
    }

    #[test]
    fn points_are_followed_between_and_the_bandwidth_beyond() {
        let m = CostModel::parse(
            "version 1\nlink node alpha=1us bandwidth=1000MB/s points=1KiB:3us,4KiB:4us\n",
        )
        .unwrap();
        let l = m.link(LinkClass::Node);
        assert_eq!(l.one_way_us(0), 1.0);
        assert_eq!(l.one_way_us(512), 2.0);
        assert_eq!(l.one_way_us(1024), 3.0);
        assert_eq!(l.one_way_us(2560), 3.5);
        assert_eq!(l.one_way_us(4096 + 1000), 5.0);
        assert_eq!(l.transfer_us(1024), 2.0);
        // Without points: alpha + m / bandwidth.
        let plain = Link::new(1.0, 1000.0);
        assert_eq!(plain.one_way_us(2000), 3.0);
        assert_eq!(plain.transfer_us(2000), 2.0);
        // Written and read back.
        assert_eq!(CostModel::parse(&m.to_text()).unwrap(), m);
        assert!(m.to_text().contains("points=1KiB:3us,4KiB:4us"));
        let odd = Points::new(&[(100, 2.0), (3 << 20, 9.0)]).unwrap();
        assert_eq!(odd.to_text(), "100B:2us,3MiB:9us");
        assert_eq!(Points::parse(&odd.to_text()).unwrap(), odd);
        assert!(Points::new(&[(1, 1.0); Points::MAX + 1]).is_err());
    }

    #[test]
    fn bad_files_name_the_line_and_the_fix() {
        for (text, line, says) in [
            ("", 1, "starts with `version 1`"),
            (
                "link node alpha=1us",
                1,
                "first setting must be `version 1`",
            ),
            ("version 2", 1, "this topo-run reads version 1"),
            (
                "version 1\nlink rack alpha=1us",
                2,
                "unknown link class \"rack\"",
            ),
            ("version 1\n\nlink node alpha=1", 3, "needs a unit"),
            (
                "version 1\nlink node bandwidth=-3GB/s",
                2,
                "positive number",
            ),
            ("version 1\nlink node", 2, "sets nothing"),
            (
                "version 1\ncopy alpha=1us",
                2,
                "unknown key \"alpha\" for copy; use bandwidth",
            ),
            (
                "version 1\nnic",
                2,
                "sets nothing; give bandwidth= or rate= or duplex=",
            ),
            ("version 1\nnic rate=5", 2, "needs a unit: M/s or K/s"),
            ("version 1\nnic duplex=simplex", 2, "use full or half"),
            ("version 1\nreduce cache=0KiB", 2, "positive whole number"),
            ("version 1\ncall overhead=1", 2, "needs a unit"),
            (
                "version 1\ncall bandwidth=1GB/s",
                2,
                "unknown key \"bandwidth\" for call",
            ),
            ("version 1\nlatency 3", 2, "unknown setting"),
            ("version 1\nlink node alpha", 2, "not key=value"),
            ("version 1\nlink node points=1KiB", 2, "is not SIZE:TIME"),
            (
                "version 1\nlink node points=4KiB:1us,1KiB:2us",
                2,
                "sizes must increase",
            ),
            (
                "version 1\nlink node points=1KiB:2us,4KiB:1us",
                2,
                "must not decrease",
            ),
            (
                "version 1\nlink node points=1K:1us",
                2,
                "needs a unit: B, KiB or MiB",
            ),
        ] {
            let e = CostModel::parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().contains(says), "{text:?}: {e}");
        }
    }
}
