//! What the tuner measures and how it decides: the message sizes, the candidates of each
//! phase, the choice between measured candidates and the rules a choice becomes. Pure
//! code, without MPI, so that it is tested on its own.

use std::str::FromStr;

use topo_hierarchy::settings::{Collective, format_bytes};

/// A collective the tuner measures (`key` is its name on the command line, in the
/// settings and in rules files; `ALL` the order the tuner measures them in). An
/// Allgather's sizes are the whole gathered result, as its rules take them; an Alltoall's
/// and a Reduce_scatter_block's are the whole of one rank's blocks, and their rules take
/// one block ([`Op::rule_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Bcast,
    Reduce,
    Allreduce,
    Allgather,
    Alltoall,
    ReduceScatter,
    /// Gatherv and Scatterv of equal blocks (sizes as an Allgather's: the whole gathered
    /// result): measured for the `rooted-v` knob only ([`rooted_v_knob`]), not in
    /// [`Op::ALL`].
    Gatherv,
    Scatterv,
}

impl Op {
    /// Every collective the tuner knows, in the order it measures them.
    pub const ALL: [Op; 6] = [
        Op::Bcast,
        Op::Reduce,
        Op::Allreduce,
        Op::Allgather,
        Op::Alltoall,
        Op::ReduceScatter,
    ];

    /// Its name on the command line, in the settings and in rules files.
    pub fn key(self) -> &'static str {
        match self {
            Op::Alltoall => "alltoall",
            Op::ReduceScatter => "reduce-scatter",
            Op::Gatherv => "gatherv",
            Op::Scatterv => "scatterv",
            _ => self.chunked().expect("the others pipeline").key(),
        }
    }

    /// The collective as pipeline-chunk rules name it, if it pipelines.
    pub fn chunked(self) -> Option<Collective> {
        match self {
            Op::Bcast => Some(Collective::Bcast),
            Op::Reduce => Some(Collective::Reduce),
            Op::Allreduce => Some(Collective::Allreduce),
            Op::Allgather => Some(Collective::Allgather),
            Op::Alltoall | Op::ReduceScatter | Op::Gatherv | Op::Scatterv => None,
        }
    }

    /// Whether its rules are one list for the whole job (`*`, by size), not per level.
    pub fn job_wide(self) -> bool {
        matches!(
            self,
            Op::Allreduce | Op::Allgather | Op::Alltoall | Op::ReduceScatter
        )
    }

    /// The bytes its rules take for a measured size of `bytes` in a job of `ranks`: an
    /// Alltoall's and a Reduce_scatter_block's one block, the others' the size itself.
    pub fn rule_bytes(self, bytes: usize, ranks: usize) -> usize {
        match self {
            Op::Alltoall | Op::ReduceScatter => (bytes / ranks.max(1)).max(1),
            _ => bytes,
        }
    }
}

impl FromStr for Op {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Op::ALL.into_iter().find(|o| o.key() == s).ok_or_else(|| {
            format!(
                "unknown collective {s:?}; use bcast, reduce, allreduce, allgather, alltoall, \
                 reduce-scatter"
            )
        })
    }
}

/// Message sizes from `min` to `max` bytes: powers of 4 (4, 16, 64, ... 1M, 4M) and
/// `max` itself. `min` is at least 4 (one `f32`).
pub fn sizes(min: usize, max: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut s = 4usize;
    while s <= max {
        if s >= min {
            out.push(s);
        }
        s = match s.checked_mul(4) {
            Some(next) => next,
            None => break,
        };
    }
    if max >= min.max(4) && out.last() != Some(&max) {
        out.push(max);
    }
    out
}

/// The algorithms worth measuring for `op` at a level whose largest group has `members`
/// ranks in a job of `nodes` nodes, plus `current` (what the settings pick now) if it is
/// not among them. Radixes at least the group size are left out: such a tree is the flat
/// one; so is the Reduce_scatter's ring on one node, where it runs as recursive halving.
pub fn algorithms(op: Op, members: u32, nodes: u32, current: &str) -> Vec<String> {
    let trees = |extra: &str| {
        let mut v = vec!["flat".to_string(), "binomial".to_string()];
        for k in [4, 8] {
            if members > k {
                v.push(format!("knomial:{k}"));
            }
        }
        v.push(extra.to_string());
        v
    };
    let mut out = match op {
        Op::Bcast => trees("scatter-allgather"),
        Op::Reduce => trees("reduce-scatter-gather"),
        Op::Allreduce => [
            "rb",
            "rab:rd",
            "rab:ring",
            "ring",
            "rabenseifner",
            "rabenseifner:256K",
            "rd",
        ]
        .map(String::from)
        .to_vec(),
        Op::Allgather => ["rd", "ring", "hier:rd", "hier:ring"]
            .map(String::from)
            .to_vec(),
        Op::Alltoall => ["spread", "aggregated", "pairwise"]
            .map(String::from)
            .to_vec(),
        Op::ReduceScatter => ["root", "leaders", "allreduce", "halving", "ring"]
            .into_iter()
            .filter(|&a| a != "ring" || nodes > 1)
            .map(String::from)
            .collect(),
        // One form for all sizes: a knob ([`rooted_v_knob`]).
        Op::Gatherv | Op::Scatterv => return Vec::new(),
    };
    if !out.iter().any(|a| a == current) {
        out.push(current.to_string());
    }
    out
}

/// Algorithms by the names rules files use (`binomial` for a radix-2 tree).
pub fn canonical(alg: String) -> String {
    if alg == "knomial:2" {
        "binomial".to_string()
    } else {
        alg
    }
}

/// A setting the tuner varies: its key, the values it tries and the message sizes where
/// it can make a difference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knob {
    /// The settings key (`fragment`, `slots`, `single-copy`).
    pub key: &'static str,
    /// Values to try, in the form the settings take.
    pub values: Vec<String>,
    /// Messages of at least this many bytes feel it.
    pub from: usize,
    /// ... and at most this many (`usize::MAX`: no bound).
    pub to: usize,
    /// The collectives it is measured on (none: those the run tunes).
    pub ops: &'static [Op],
}

/// The knobs, in the order they are tuned. `current` gives the current value of a key;
/// `single_copy`: the node's ranks can read each other's memory. (The pipeline chunk is
/// tuned per collective and size, after its algorithms: [`chunks`].)
pub fn knobs(current: impl Fn(&str) -> String, single_copy: bool) -> Vec<Knob> {
    let with_current = |key: &'static str, values: &[&str]| {
        let mut v: Vec<String> = values.iter().map(|s| s.to_string()).collect();
        let now = current(key);
        if !v.contains(&now) {
            v.push(now);
        }
        v
    };
    let mut out = Vec::new();
    if single_copy {
        out.push(Knob {
            key: "single-copy",
            values: with_current(
                "single-copy",
                &["0", "4K", "8K", "16K", "32K", "64K", "128K"],
            ),
            from: 2 << 10,
            to: 256 << 10,
            ops: &[],
        });
    }
    out.push(Knob {
        key: "fragment",
        values: with_current("fragment", &["2K", "8K", "32K", "64K", "128K", "256K"]),
        from: 1 << 10,
        to: usize::MAX,
        ops: &[],
    });
    out.push(Knob {
        key: "slots",
        values: with_current("slots", &["4", "8", "16", "32"]),
        from: 4 << 10,
        to: usize::MAX,
        ops: &[],
    });
    out
}

impl Knob {
    /// The collectives it is measured on: its own, else `ops` (those the run tunes).
    pub fn ops<'a>(&self, ops: &'a [Op]) -> &'a [Op] {
        if self.ops.is_empty() { ops } else { self.ops }
    }
}

/// Gatherv's and Scatterv's form (`rooted-v`: through the leaders, or straight between the
/// root and each rank), one value for all sizes, measured on those two collectives: for a
/// job on several nodes, where the two differ (the current value `current` is among the
/// candidates).
pub fn rooted_v_knob(current: String) -> Knob {
    let mut values = vec!["leaders".to_string(), "direct".to_string()];
    if !values.contains(&current) {
        values.push(current);
    }
    Knob {
        key: "rooted-v",
        values,
        from: 0,
        to: usize::MAX,
        ops: &[Op::Gatherv, Op::Scatterv],
    }
}

/// The pipeline chunks worth measuring, plus `current` if it is not among them.
pub fn chunks(current: &str) -> Vec<String> {
    let mut v: Vec<String> = ["16K", "64K", "256K", "1M", "4M"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if !v.iter().any(|c| c == current) {
        v.push(current.to_string());
    }
    v
}

/// Messages of at least this many bytes feel the pipeline chunk (they are larger than the
/// smallest candidate of [`chunks`]).
pub const CHUNK_FROM: usize = 32 << 10;

/// A candidate must be this much faster than the current choice to replace it
/// (measurements on a busy machine wobble by a few per cent).
pub const MARGIN: f64 = 0.03;

/// Which of the measured `times` to keep at one size: the fastest, if it beats the
/// current choice (`times[current]`) by [`MARGIN`]; else the current one.
pub fn choose(times: &[f64], current: usize) -> usize {
    let best = (0..times.len())
        .min_by(|&a, &b| times[a].total_cmp(&times[b]))
        .unwrap_or(current);
    if times[best] < times[current] * (1.0 - MARGIN) {
        best
    } else {
        current
    }
}

/// Whether settings that took `tuned` us lose against the `start` ones' time: by more
/// than three margins, as a knob may lose nowhere ([`choose_overall`]).
pub fn loses(start: f64, tuned: f64) -> bool {
    tuned > start * (1.0 + 3.0 * MARGIN)
}

/// A knob's value applies to every size, so it must pay overall and hurt nowhere: the
/// candidate with the smallest geometric mean of its time ratios to the current value
/// (`ratios[candidate][size]`), if that mean is below `1 - MARGIN` and no ratio exceeds
/// `1 + 3 * MARGIN`; else `current`.
pub fn choose_overall(ratios: &[Vec<f64>], current: usize) -> usize {
    let geomean = |r: &[f64]| {
        if r.is_empty() {
            1.0
        } else {
            (r.iter().map(|x| x.ln()).sum::<f64>() / r.len() as f64).exp()
        }
    };
    let best = (0..ratios.len())
        .filter(|&c| ratios[c].iter().all(|&r| !loses(1.0, r)))
        .min_by(|&a, &b| geomean(&ratios[a]).total_cmp(&geomean(&ratios[b])));
    match best {
        Some(b) if geomean(&ratios[b]) < 1.0 - MARGIN => b,
        _ => current,
    }
}

/// The rules that give `picks[i]` to messages of `sizes[i]` bytes at `scope` (a level
/// name, or `*`), as `SELECTOR ALGORITHM` pairs in the order they must be tried. Runs of
/// one algorithm become one rule; the boundary between two sizes is the power of two
/// halfway between them (in a log scale), and the last rule has no bound.
pub fn rules(scope: &str, sizes: &[usize], picks: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in 0..picks.len() {
        let last = i + 1 == picks.len();
        if !last && picks[i + 1] == picks[i] {
            continue;
        }
        let selector = if last {
            scope.to_string()
        } else {
            let mid = ((sizes[i] as f64) * (sizes[i + 1] as f64)).sqrt();
            let bound = (mid as u64).next_power_of_two().max(sizes[i] as u64 + 1);
            let prefix = if scope == "*" { "" } else { scope };
            format!("{prefix}<{}", format_bytes(bound))
        };
        out.push((selector, picks[i].clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use topo_hierarchy::{LevelName, Settings};

    #[test]
    fn sizes_are_powers_of_four_and_the_largest() {
        assert_eq!(sizes(4, 256), [4, 16, 64, 256]);
        assert_eq!(sizes(4, 1000), [4, 16, 64, 256, 1000]);
        assert_eq!(sizes(64, 64 << 10), [64, 256, 1024, 4096, 16384, 65536]);
        assert_eq!(sizes(1, 8), [4, 8]);
        assert!(sizes(16, 8).is_empty());
    }

    #[test]
    fn candidates_skip_radixes_as_large_as_the_group_and_keep_the_current_choice() {
        assert_eq!(
            algorithms(Op::Bcast, 2, 1, "flat"),
            ["flat", "binomial", "scatter-allgather"]
        );
        assert_eq!(
            algorithms(Op::Reduce, 16, 1, "knomial:3"),
            [
                "flat",
                "binomial",
                "knomial:4",
                "knomial:8",
                "reduce-scatter-gather",
                "knomial:3"
            ]
        );
        assert_eq!(algorithms(Op::Allreduce, 64, 1, "rab:rd").len(), 7);
        assert_eq!(
            algorithms(Op::Allgather, 4, 1, "hier"),
            ["rd", "ring", "hier:rd", "hier:ring", "hier"]
        );
        // Every candidate is one the settings accept, under the name they print.
        for a in algorithms(Op::Allgather, 4, 1, "rd") {
            let s = Settings::from_pairs(&[("allgather", a.as_str())]).unwrap();
            assert_eq!(s.allgather_for(64, 4).to_string(), a);
        }
    }

    #[test]
    fn knobs_follow_what_the_job_can_use() {
        let current = |k: &str| {
            if k == "slots" {
                "12".into()
            } else {
                "8K".into()
            }
        };
        let all = knobs(current, true);
        let keys: Vec<_> = all.iter().map(|k| k.key).collect();
        assert_eq!(keys, ["single-copy", "fragment", "slots"]);
        assert!(all[2].values.contains(&"12".to_string()));
        let keys: Vec<_> = knobs(current, false).iter().map(|k| k.key).collect();
        assert_eq!(keys, ["fragment", "slots"]);
        // Chunks: the candidates and the current one, each one the settings accept.
        assert_eq!(chunks("256K").len(), 5);
        assert_eq!(chunks("512K").last().map(String::as_str), Some("512K"));
        for c in chunks("8K") {
            Settings::from_pairs(&[("chunk", c.as_str())]).unwrap();
        }
        // Every value tried is one the settings accept.
        for k in &all {
            for v in &k.values {
                Settings::from_pairs(&[(k.key, v.as_str())]).unwrap();
            }
        }
        // Gatherv's and Scatterv's form: both, measured on those two only.
        let k = rooted_v_knob("direct".into());
        assert_eq!(k.values, ["leaders", "direct"]);
        assert_eq!(k.ops, [Op::Gatherv, Op::Scatterv]);
        assert!(all.iter().all(|k| k.ops.is_empty()));
        for v in &k.values {
            let s = Settings::from_pairs(&[(k.key, v.as_str())]).unwrap();
            assert_eq!(s.rooted_v_alg().to_string(), *v);
        }
        // They are no collective of the command line, and have no rules of their own.
        assert!("gatherv".parse::<Op>().is_err());
        assert!(algorithms(Op::Gatherv, 8, 1, "flat").is_empty());
    }

    #[test]
    fn a_candidate_must_beat_the_current_choice_by_the_margin() {
        assert_eq!(choose(&[10.0, 9.0, 9.9], 0), 1);
        assert_eq!(choose(&[10.0, 9.8, 9.9], 0), 0);
        assert_eq!(choose(&[5.0, 10.0], 1), 0);
        // A knob must pay overall and not hurt anywhere.
        let ratios = vec![
            vec![1.0, 1.0, 1.0],
            vec![0.5, 0.6, 1.2],
            vec![0.9, 0.95, 1.0],
        ];
        assert_eq!(choose_overall(&ratios, 0), 2);
        assert_eq!(choose_overall(&[vec![1.0], vec![0.99]], 0), 0);
    }

    #[test]
    fn runs_of_one_algorithm_become_one_rule_with_a_bound_between_sizes() {
        let s = sizes(4, 1 << 20);
        let picks: Vec<String> = s
            .iter()
            .map(|&b| {
                if b < 4096 {
                    "flat"
                } else if b < 262144 {
                    "binomial"
                } else {
                    "flat"
                }
            })
            .map(String::from)
            .collect();
        let r = rules("node", &s, &picks);
        let r: Vec<(&str, &str)> = r.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(
            r,
            [
                ("node<2K", "flat"),
                ("node<128K", "binomial"),
                ("node", "flat")
            ]
        );
        assert_eq!(
            rules("*", &[4, 1000], &["rb".into(), "rab:rd".into()]),
            [
                ("<64".to_string(), "rb".to_string()),
                ("*".into(), "rab:rd".into())
            ]
        );
    }

    #[test]
    fn the_rules_pick_what_was_measured_at_every_size() {
        let s = sizes(4, 16 << 20);
        let algs = ["flat", "binomial", "knomial:4"];
        // Every pattern of three algorithms over the sizes, with a fixed stride.
        for seed in 0..200u64 {
            let picks: Vec<String> = (0..s.len())
                .map(|i| algs[((seed >> (i % 20)) as usize + i / 5) % 3].to_string())
                .collect();
            let text: Vec<String> = rules("numa", &s, &picks)
                .iter()
                .map(|(sel, alg)| format!("{sel}={alg}"))
                .collect();
            let settings = Settings::from_pairs(&[("bcast", text.join(","))]).unwrap();
            let numa: LevelName = "numa".parse().unwrap();
            for (i, &b) in s.iter().enumerate() {
                let got = canonical(settings.bcast_for(numa, true, 2, b).to_string());
                assert_eq!(got, picks[i], "seed {seed}, {b} bytes");
            }
        }
    }

    #[test]
    fn alltoall_and_reduce_scatter_rules_take_one_block_of_the_measured_size() {
        // Sizes are one rank's blocks in all (4 ranks); its rules bound one block.
        let s = sizes(64, 64 << 10);
        let picks: Vec<String> = s
            .iter()
            .map(|&b| if b < 4096 { "aggregated" } else { "pairwise" }.to_string())
            .collect();
        let blocks: Vec<usize> = s.iter().map(|&b| Op::Alltoall.rule_bytes(b, 4)).collect();
        let text: Vec<String> = rules("*", &blocks, &picks)
            .iter()
            .map(|(sel, alg)| format!("{sel}={alg}"))
            .collect();
        let settings = Settings::from_pairs(&[("alltoall", text.join(","))]).unwrap();
        for (i, &b) in blocks.iter().enumerate() {
            assert_eq!(
                settings.alltoall_for(b).to_string(),
                picks[i],
                "{b}-byte blocks"
            );
        }
        for a in algorithms(Op::Alltoall, 2, 1, "pairwise") {
            Settings::from_pairs(&[("alltoall", a.as_str())]).unwrap();
        }
        assert_eq!("alltoall".parse::<Op>(), Ok(Op::Alltoall));
        assert!(Op::Alltoall.chunked().is_none() && Op::Alltoall.job_wide());
        // The same for Reduce_scatter_block's forms.
        for a in algorithms(Op::ReduceScatter, 2, 2, "root") {
            let s = Settings::from_pairs(&[("reduce-scatter", a.as_str())]).unwrap();
            assert_eq!(s.reduce_scatter_for(64).to_string(), a);
        }
        // The ring only on several nodes (on one it runs as recursive halving).
        let ring = |nodes| algorithms(Op::ReduceScatter, 2, nodes, "root").contains(&"ring".into());
        assert!(ring(2) && !ring(1));
        assert_eq!("reduce-scatter".parse::<Op>(), Ok(Op::ReduceScatter));
        assert_eq!(Op::ReduceScatter.rule_bytes(4096, 4), 1024);
    }

    #[test]
    fn a_loss_is_more_than_three_margins() {
        assert!(!loses(10.0, 10.9));
        assert!(loses(10.0, 10.95));
        assert!(!loses(10.0, 9.0));
    }
}
