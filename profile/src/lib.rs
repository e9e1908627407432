//! The collective profile of topo-run's PMPI library (`topo-run --profile FILE`).
//!
//! Each rank counts its collective calls, per call and communicator kind: how many took
//! topo-run's path, how many went to MPI and why, and per size class (0 bytes, then
//! powers of two) how many there were and how long they took. At `MPI_Finalize` the
//! ranks' counters are summed and maximised over the job ([`summarize`] turns one rank's
//! raw counters into the vector exchanged), and rank 0 turns both into a [`Profile`]
//! ([`combine`]), writes it as JSON and may print its [`table`]. `topo-run simulate
//! --profile` reads it back ([`read`]).
//!
//! The crate is pure: the library owns the recording (atomics, timers, MPI), this crate
//! the layout, the arithmetic and the file. docs/profile.md describes the file.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The `format` field of a profile this crate writes and reads.
pub const FORMAT: &str = "topo-run-profile 1";

/// The environment variable that names the profile file (`topo-run --profile FILE`).
pub const PROFILE_ENV: &str = "TOPO_RUN_PROFILE";

/// The environment variable that leaves every collective to MPI while the library is
/// loaded (`topo-run --native`): with a profile, MPI's own collectives are profiled.
pub const NATIVE_ENV: &str = "TOPO_RUN_NATIVE";

/// Size classes: class 0 holds calls of 0 bytes, class `k` (1 ..) those of `2^(k-1)` to
/// `2^k - 1` bytes, the last one everything from `2^(CLASSES-2)` (16 GiB) on.
pub const CLASSES: usize = 36;

/// The size class of a call of `bytes` bytes.
pub fn class_of(bytes: u64) -> usize {
    if bytes == 0 {
        return 0;
    }
    ((u64::BITS - bytes.leading_zeros()) as usize).min(CLASSES - 1)
}

/// The smallest and largest byte count of class `k` (`None`: no upper bound).
pub fn class_bounds(k: usize) -> (u64, Option<u64>) {
    match k {
        0 => (0, Some(0)),
        k if k == CLASSES - 1 => (1 << (k - 1), None),
        k => (1 << (k - 1), Some((1 << k) - 1)),
    }
}

/// The names behind the counters' indices: calls (`MPI_Bcast`, ...), communicator kinds
/// (`world`, ...) and the reasons a call goes to MPI, each in index order.
#[derive(Debug, Clone, Copy)]
pub struct Shape<'a> {
    pub calls: &'a [&'a str],
    pub kinds: &'a [&'a str],
    pub reasons: &'a [&'a str],
}

/// Fields of one (call, kind) in the raw counters, before the classes.
const RAW_HEAD: usize = 2;
/// Fields per class in the raw counters: calls, calls timed, nanoseconds of those.
const RAW_CLASS: usize = 3;
/// Fields of one (call, kind) in a summary, before the classes.
const SUM_HEAD: usize = 3;
/// Fields per class in a summary: calls, estimated nanoseconds.
const SUM_CLASS: usize = 2;

/// The length of one rank's raw counters for `calls` calls, `kinds` kinds and `reasons`
/// reasons (a constant, so that the library can size a static array).
pub const fn raw_len(calls: usize, kinds: usize, reasons: usize) -> usize {
    calls * kinds * raw_stride(reasons)
}

const fn raw_stride(reasons: usize) -> usize {
    RAW_HEAD + reasons + RAW_CLASS * CLASSES
}

const fn summary_stride(reasons: usize) -> usize {
    SUM_HEAD + reasons + SUM_CLASS * CLASSES
}

/// Where one call's counters go in the raw array: what the library's recording uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawIndex {
    base: usize,
    reasons: usize,
}

impl RawIndex {
    /// The counters of call `call` on a communicator of kind `kind`, with `kinds` kinds
    /// and `reasons` reasons.
    pub const fn new(call: usize, kind: usize, kinds: usize, reasons: usize) -> RawIndex {
        RawIndex {
            base: (call * kinds + kind) * raw_stride(reasons),
            reasons,
        }
    }

    /// Calls on topo-run's path.
    pub const fn ours(self) -> usize {
        self.base
    }

    /// The largest communicator (members) a timed call was made on.
    pub const fn ranks(self) -> usize {
        self.base + 1
    }

    /// Calls handed to MPI for reason `why`.
    pub const fn handed(self, why: usize) -> usize {
        self.base + RAW_HEAD + why
    }

    /// Calls of size class `class`.
    pub const fn calls(self, class: usize) -> usize {
        self.base + RAW_HEAD + self.reasons + RAW_CLASS * class
    }

    /// Calls of size class `class` whose time was measured.
    pub const fn timed(self, class: usize) -> usize {
        self.calls(class) + 1
    }

    /// Nanoseconds the timed calls of size class `class` took.
    pub const fn nanos(self, class: usize) -> usize {
        self.calls(class) + 2
    }
}

impl Shape<'_> {
    /// The length of one rank's raw counters.
    pub fn raw_len(&self) -> usize {
        raw_len(self.calls.len(), self.kinds.len(), self.reasons.len())
    }

    /// The raw counters of (`call`, `kind`).
    pub fn raw(&self, call: usize, kind: usize) -> RawIndex {
        RawIndex::new(call, kind, self.kinds.len(), self.reasons.len())
    }

    /// The length of a summary: per (call, kind), then the wall time and the time in
    /// collectives.
    pub fn summary_len(&self) -> usize {
        self.calls.len() * self.kinds.len() * summary_stride(self.reasons.len()) + 2
    }

    fn summary_base(&self, call: usize, kind: usize) -> usize {
        (call * self.kinds.len() + kind) * summary_stride(self.reasons.len())
    }
}

/// One rank's raw counters, with the nanoseconds from its `MPI_Init` to its
/// `MPI_Finalize`, as the vector the ranks sum and maximise: per (call, kind) the calls on
/// topo-run's path, the largest communicator, the time in all of them, the hand-offs by
/// reason and per class the calls and their estimated time. Where only some calls of a
/// class were timed, their mean stands for the others; where none of a (call, kind)'s were,
/// the mean of the same call and class on the other kinds does.
pub fn summarize(shape: &Shape<'_>, raw: &[u64], wall_nanos: u64) -> Vec<u64> {
    assert_eq!(raw.len(), shape.raw_len(), "raw counters of another shape");
    let r = shape.reasons.len();
    let mut out = vec![0u64; shape.summary_len()];
    let mut in_collectives = 0u64;
    for call in 0..shape.calls.len() {
        for kind in 0..shape.kinds.len() {
            let at = shape.raw(call, kind);
            let base = shape.summary_base(call, kind);
            out[base] = raw[at.ours()];
            out[base + 1] = raw[at.ranks()];
            for why in 0..r {
                out[base + SUM_HEAD + why] = raw[at.handed(why)];
            }
            let mut total = 0u64;
            for class in 0..CLASSES {
                let calls = raw[at.calls(class)];
                if calls == 0 {
                    continue;
                }
                let (timed, nanos) = match raw[at.timed(class)] {
                    0 => (0..shape.kinds.len())
                        .map(|k| shape.raw(call, k))
                        .fold((0, 0), |(t, n), o| {
                            (t + raw[o.timed(class)], n + raw[o.nanos(class)])
                        }),
                    t => (t, raw[at.nanos(class)]),
                };
                let estimate = if timed == 0 {
                    0
                } else {
                    (nanos as u128 * calls as u128 / timed as u128) as u64
                };
                let c = base + SUM_HEAD + r + SUM_CLASS * class;
                out[c] = calls;
                out[c + 1] = estimate;
                total += estimate;
            }
            out[base + 2] = total;
            in_collectives += total;
        }
    }
    let n = out.len();
    out[n - 2] = wall_nanos;
    out[n - 1] = in_collectives;
    out
}

/// What the job was, for the profile's head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Ranks in `MPI_COMM_WORLD`.
    pub ranks: u64,
    /// Nodes they ran on.
    pub nodes: u64,
    /// MPI's own name for itself (`MPI_Get_library_version`, first line).
    pub mpi: String,
    /// Whether topo-run's path was off (`--native`).
    pub native: bool,
}

/// A quantity per rank: its largest value and its mean over the job's ranks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub max: f64,
    pub mean: f64,
}

/// The calls of one size class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeClass {
    /// The smallest byte count of the class.
    pub min_bytes: u64,
    /// The largest (`null`: no upper bound).
    pub max_bytes: Option<u64>,
    /// Calls, summed over the ranks.
    pub calls: u64,
    /// The most calls one rank made.
    pub calls_max: u64,
    /// Seconds inside these calls, per rank.
    pub seconds: Spread,
}

/// One collective on one kind of communicator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Collective {
    /// `MPI_Allreduce`, ...; the nonblocking forms apart (`MPI_Iallreduce`), timed from
    /// their start to its return.
    pub call: String,
    /// The communicator kind: `world`, `duplicate`, `node`, `split` or `other`.
    pub comm: String,
    /// The largest communicator (members) of this kind it ran on, as far as seen.
    pub ranks: u64,
    /// Calls, summed over the ranks.
    pub calls: u64,
    /// The most calls one rank made.
    pub calls_max: u64,
    /// Of `calls`, those on topo-run's path.
    pub topo_run: u64,
    /// Of `calls`, those handed to MPI, by reason.
    pub mpi: BTreeMap<String, u64>,
    /// Seconds inside the calls, per rank.
    pub seconds: Spread,
    /// By size class, the classes with calls only.
    pub bytes: Vec<SizeClass>,
}

/// A job's collective profile, as written to the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// [`FORMAT`].
    pub format: String,
    /// Whether topo-run's path was off (`--native`): MPI's own collectives were profiled.
    pub native: bool,
    /// Ranks in `MPI_COMM_WORLD`.
    pub ranks: u64,
    /// Nodes.
    pub nodes: u64,
    /// The MPI library.
    pub mpi: String,
    /// Seconds from `MPI_Init` to `MPI_Finalize`, per rank.
    pub wall_seconds: Spread,
    /// Seconds inside collective calls, per rank.
    pub collective_seconds: Spread,
    /// Every (call, communicator kind) with calls, in the library's call order.
    pub collectives: Vec<Collective>,
}

/// Seconds from nanoseconds (to the nanosecond, so that the file shows `8e-7`, not
/// `8.000000000000001e-7`).
fn seconds(nanos: f64) -> f64 {
    nanos.round() / 1e9
}

fn spread(sum: u64, max: u64, ranks: u64) -> Spread {
    Spread {
        max: seconds(max as f64),
        mean: seconds(sum as f64 / ranks.max(1) as f64),
    }
}

/// The profile of a job from the sum and the maximum over its ranks of their
/// [`summarize`]d counters.
pub fn combine(shape: &Shape<'_>, sum: &[u64], max: &[u64], job: Job) -> Profile {
    assert_eq!(sum.len(), shape.summary_len(), "a summary of another shape");
    assert_eq!(max.len(), shape.summary_len(), "a summary of another shape");
    let r = shape.reasons.len();
    let n = job.ranks;
    let mut collectives = Vec::new();
    for (call, call_name) in shape.calls.iter().enumerate() {
        for (kind, kind_name) in shape.kinds.iter().enumerate() {
            let base = shape.summary_base(call, kind);
            let mut bytes = Vec::new();
            let (mut calls, mut calls_max) = (0, 0);
            for class in 0..CLASSES {
                let c = base + SUM_HEAD + r + SUM_CLASS * class;
                if sum[c] == 0 {
                    continue;
                }
                let (min_bytes, max_bytes) = class_bounds(class);
                calls += sum[c];
                // The most calls of one rank over all classes is at most the sum of the
                // classes' maxima; equal where one rank made the most in every class (the
                // usual SPMD program). Ranks' own totals would need another field.
                calls_max += max[c];
                bytes.push(SizeClass {
                    min_bytes,
                    max_bytes,
                    calls: sum[c],
                    calls_max: max[c],
                    seconds: spread(sum[c + 1], max[c + 1], n),
                });
            }
            if calls == 0 {
                continue;
            }
            let mpi = (0..r)
                .filter(|&why| sum[base + SUM_HEAD + why] > 0)
                .map(|why| (shape.reasons[why].to_string(), sum[base + SUM_HEAD + why]))
                .collect();
            collectives.push(Collective {
                call: call_name.to_string(),
                comm: kind_name.to_string(),
                ranks: max[base + 1],
                calls,
                calls_max,
                topo_run: sum[base],
                mpi,
                seconds: spread(sum[base + 2], max[base + 2], n),
                bytes,
            });
        }
    }
    let len = sum.len();
    Profile {
        format: FORMAT.to_string(),
        native: job.native,
        ranks: job.ranks,
        nodes: job.nodes,
        mpi: job.mpi,
        wall_seconds: spread(sum[len - 2], max[len - 2], n),
        collective_seconds: spread(sum[len - 1], max[len - 1], n),
        collectives,
    }
}

/// A profile that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read the profile {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a topo-run profile: {source}")]
    Json {
        path: String,
        source: serde_json::Error,
    },
    #[error("{path} is a profile of format {found:?}; this topo-run reads {FORMAT:?}")]
    Format { path: String, found: String },
}

impl Profile {
    /// The profile as the file holds it (pretty JSON, a final newline).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a profile serialises");
        s.push('\n');
        s
    }

    /// The MPI library's name and version, without the rest of its line ("Open MPI
    /// v4.1.4, package: ..." gives "Open MPI v4.1.4").
    pub fn mpi_name(&self) -> String {
        let first = self.mpi.split(',').next().unwrap_or("");
        first.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// A profile from the text of its file (`path` names it in errors).
    pub fn from_json(text: &str, path: &str) -> Result<Profile, ProfileError> {
        let p: Profile = serde_json::from_str(text).map_err(|source| ProfileError::Json {
            path: path.to_string(),
            source,
        })?;
        if p.format != FORMAT {
            return Err(ProfileError::Format {
                path: path.to_string(),
                found: p.format,
            });
        }
        Ok(p)
    }
}

/// Reads a profile file.
pub fn read(path: &Path) -> Result<Profile, ProfileError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Io {
        path: shown.clone(),
        source,
    })?;
    Profile::from_json(&text, &shown)
}

/// A byte count as people write it: `0 B`, `8 B`, `64 KiB`, `2 MiB`.
pub fn bytes_text(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut u = 0;
    while v >= 1024 && v.is_multiple_of(1024) && u < UNITS.len() - 1 {
        v /= 1024;
        u += 1;
    }
    format!("{v} {}", UNITS[u])
}

/// A duration in seconds with a fitting unit.
fn time_text(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} us", s * 1e6)
    }
}

/// The profile as a short table (`topo-run -v --profile FILE`), the costliest first.
pub fn table(p: &Profile) -> Vec<String> {
    let mut lines = vec![format!(
        "profile: {} ranks on {} nodes, {}{}; {} in collectives (most of one rank), {:.1} % of \
         its time",
        p.ranks,
        p.nodes,
        p.mpi_name(),
        if p.native {
            ", MPI's own collectives (--native)"
        } else {
            ""
        },
        time_text(p.collective_seconds.max),
        100.0 * p.collective_seconds.max / p.wall_seconds.max.max(1e-12)
    )];
    if p.collectives.is_empty() {
        lines.push("no collective calls".into());
        return lines;
    }
    let mut rows: Vec<&Collective> = p.collectives.iter().collect();
    rows.sort_by(|a, b| b.seconds.max.total_cmp(&a.seconds.max));
    lines.push(format!(
        "{:<26} {:<9} {:>10} {:>9} {:>10} {:>10}  sizes",
        "call", "comm", "calls/rank", "topo-run", "time max", "mean"
    ));
    for c in rows {
        let lo = c.bytes.first().map_or(0, |b| b.min_bytes);
        let hi = c.bytes.last().and_then(|b| b.max_bytes);
        let sizes = match hi {
            Some(hi) if lo == hi => bytes_text(lo),
            Some(hi) => format!("[{}, {})", bytes_text(lo), bytes_text(hi + 1)),
            None => format!("{} and more", bytes_text(lo)),
        };
        lines.push(format!(
            "{:<26} {:<9} {:>10} {:>8.0}% {:>10} {:>10}  {sizes}",
            c.call,
            c.comm,
            c.calls_max,
            100.0 * c.topo_run as f64 / c.calls.max(1) as f64,
            time_text(c.seconds.max),
            time_text(c.seconds.mean)
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: Shape<'static> = Shape {
        calls: &["MPI_Bcast", "MPI_Allreduce"],
        kinds: &["world", "split"],
        reasons: &["zero count", "derived datatype"],
    };

    #[test]
    fn classes_cover_every_size_once() {
        assert_eq!(class_of(0), 0);
        assert_eq!(class_of(1), 1);
        assert_eq!(class_of(2), 2);
        assert_eq!(class_of(3), 2);
        assert_eq!(class_of(4), 3);
        assert_eq!(class_of(u64::MAX), CLASSES - 1);
        for b in (0..70_000u64).chain([1 << 33, (1 << 34) - 1, 1 << 34, 1 << 40]) {
            let (lo, hi) = class_bounds(class_of(b));
            assert!(lo <= b && hi.is_none_or(|h| b <= h), "{b} in {lo}..={hi:?}");
        }
        for k in 1..CLASSES - 1 {
            assert_eq!(class_bounds(k).1.unwrap() + 1, class_bounds(k + 1).0);
        }
    }

    fn raw_of(records: &[(usize, usize, u64, u64, u64)]) -> Vec<u64> {
        // (call, kind, bytes, timed nanos or 0 when not timed, handed reason + 1 or 0)
        let mut raw = vec![0u64; SHAPE.raw_len()];
        for &(call, kind, bytes, nanos, handed) in records {
            let at = SHAPE.raw(call, kind);
            let class = class_of(bytes);
            raw[at.calls(class)] += 1;
            if nanos > 0 {
                raw[at.timed(class)] += 1;
                raw[at.nanos(class)] += nanos;
            }
            match handed {
                0 => raw[at.ours()] += 1,
                why => raw[at.handed(why as usize - 1)] += 1,
            }
            raw[at.ranks()] = raw[at.ranks()].max(4);
        }
        raw
    }

    #[test]
    fn a_job_of_two_ranks_is_summed_maximised_and_estimated() {
        // Rank 0: 4 Bcasts of 8 bytes on world, 2 timed (100 and 300 ns), one handed for
        // a zero count (0 bytes, timed 50 ns); an Allreduce of 1 KiB on a split, untimed,
        // beside one on world of the same class timed at 1000 ns.
        let r0 = raw_of(&[
            (0, 0, 8, 100, 0),
            (0, 0, 8, 300, 0),
            (0, 0, 8, 0, 0),
            (0, 0, 8, 0, 0),
            (0, 0, 0, 50, 1),
            (1, 1, 1024, 0, 2),
            (1, 0, 1500, 1000, 0),
        ]);
        // Rank 1: the same 4 Bcasts, all timed at 200 ns.
        let r1 = raw_of(&[
            (0, 0, 8, 200, 0),
            (0, 0, 8, 200, 0),
            (0, 0, 8, 200, 0),
            (0, 0, 8, 200, 0),
        ]);
        let s0 = summarize(&SHAPE, &r0, 2_000_000_000);
        let s1 = summarize(&SHAPE, &r1, 1_000_000_000);
        let sum: Vec<u64> = s0.iter().zip(&s1).map(|(a, b)| a + b).collect();
        let max: Vec<u64> = s0.iter().zip(&s1).map(|(a, b)| *a.max(b)).collect();
        let job = Job {
            ranks: 2,
            nodes: 1,
            mpi: "Test MPI".into(),
            native: false,
        };
        let p = combine(&SHAPE, &sum, &max, job);
        assert_eq!(p.collectives.len(), 3);
        let bcast = &p.collectives[0];
        assert_eq!(
            (bcast.call.as_str(), bcast.comm.as_str()),
            ("MPI_Bcast", "world")
        );
        assert_eq!((bcast.calls, bcast.calls_max, bcast.topo_run), (9, 5, 8));
        assert_eq!(bcast.mpi, BTreeMap::from([("zero count".to_string(), 1)]));
        assert_eq!(bcast.bytes.len(), 2);
        assert_eq!(
            (bcast.bytes[0].min_bytes, bcast.bytes[0].max_bytes),
            (0, Some(0))
        );
        assert_eq!(
            (bcast.bytes[1].min_bytes, bcast.bytes[1].max_bytes),
            (8, Some(15))
        );
        // Rank 0's 8-byte class: 4 calls at a mean of 200 ns = 800 ns; rank 1's as well.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-15;
        let s = bcast.bytes[1].seconds;
        assert!(close(s.max, 800e-9) && close(s.mean, 800e-9), "{s:?}");
        // Rank 0's Bcasts: 850 ns; rank 1's 800.
        assert!(close(bcast.seconds.max, 850e-9));
        assert!(close(bcast.seconds.mean, 825e-9));
        // The untimed Allreduce on the split borrows world's mean for its class.
        let split = &p.collectives[2];
        assert_eq!(
            (split.call.as_str(), split.comm.as_str()),
            ("MPI_Allreduce", "split")
        );
        assert_eq!(
            split.mpi,
            BTreeMap::from([("derived datatype".to_string(), 1)])
        );
        assert_eq!(split.topo_run, 0);
        assert!(close(split.seconds.max, 1000e-9));
        assert!(close(split.seconds.mean, 500e-9));
        assert_eq!(split.ranks, 4);
        assert_eq!(
            p.wall_seconds,
            Spread {
                max: 2.0,
                mean: 1.5
            }
        );
        assert!(close(p.collective_seconds.max, 2850e-9));

        let text = p.to_json();
        let back = Profile::from_json(&text, "p.json").unwrap();
        assert_eq!(back.collectives.len(), 3);
        assert_eq!(back.to_json(), text, "the file reads back as written");
        let table = table(&p);
        assert!(
            table[0].starts_with("profile: 2 ranks on 1 nodes, Test MPI;"),
            "{table:?}"
        );
        assert!(
            table
                .iter()
                .any(|l| l.starts_with("MPI_Allreduce") && l.contains("split"))
        );
    }

    #[test]
    fn a_file_of_another_format_is_named() {
        let e = Profile::from_json("{\"format\": 2}", "x.json").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("x.json is not a topo-run profile"),
            "{e}"
        );
        let p = Profile {
            format: "topo-run-profile 9".into(),
            native: true,
            ranks: 1,
            nodes: 1,
            mpi: String::new(),
            wall_seconds: Spread {
                max: 1.0,
                mean: 1.0,
            },
            collective_seconds: Spread {
                max: 0.0,
                mean: 0.0,
            },
            collectives: Vec::new(),
        };
        let e = Profile::from_json(&p.to_json(), "y.json").unwrap_err();
        assert!(
            e.to_string().contains("of format \"topo-run-profile 9\""),
            "{e}"
        );
        let e = read(Path::new("/nonexistent/p.json")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read the profile /nonexistent/p.json")
        );
    }

    #[test]
    fn byte_counts_read_as_written() {
        assert_eq!(bytes_text(0), "0 B");
        assert_eq!(bytes_text(8), "8 B");
        assert_eq!(bytes_text(65536), "64 KiB");
        assert_eq!(bytes_text(3 << 20), "3 MiB");
        assert_eq!(bytes_text(1500), "1500 B");
    }
}
