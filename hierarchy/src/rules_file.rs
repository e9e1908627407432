//! Rules files: a machine's tuned runtime settings in one versioned text file
//! (`topo-run --rules FILE`, `TOPO_RUN_RULES`), so that a site can keep what it measured
//! and every job can load it.
//!
//! ```text
//! topo-run-rules 1
//! # KEY        SELECTOR     ALGORITHM       (algorithm rules, first match wins)
//! bcast        intra        flat
//! bcast        inter<64K    knomial:4
//! allreduce    <64K         rab:rd
//! chunk        allreduce    1M              (pipeline chunks, first match wins)
//! chunk        256K
//! # KEY        VALUE                        (queue geometry and thresholds)
//! fragment     128K
//! single-copy  16K
//! ```
//!
//! The first line that is not blank or a comment (`#` to the end of the line) is the
//! header `topo-run-rules 1`. Every other line is either an algorithm rule, `bcast`,
//! `reduce`, `allreduce`, `allgather`, `alltoall` or `reduce-scatter` followed by a selector
//! (`[SCOPE][>MEMBERS][<BYTES]`, or `*`) and an algorithm, in the order they are tried; or a pipeline-chunk rule, `chunk` followed by
//! an optional selector (`[COLLECTIVE][<BYTES]`, or `*`) and a size, in the order they are
//! tried; or a setting, `slots`, `fragment`, `spin`, `single-copy`, `barrier` or `rooted-v` followed
//! by its value, at most once each. Values are those of the options of the same names
//! (docs/runtime.md, "Settings").
//!
//! A file becomes the `key:value` pairs of a plan's settings ([`RulesFile::pairs`]), so
//! the plan digest covers it; [`merge`] puts the command line's settings first.

use crate::error::{Error, Result};
use crate::settings::Settings;

/// The header line of version 1 of the format.
pub const RULES_HEADER: &str = "topo-run-rules 1";

/// The keys of rules, which may repeat: algorithm rules, and pipeline-chunk rules
/// (`chunk [SELECTOR] BYTES`, whose selector is `[COLLECTIVE][<BYTES]` or `*`).
const RULE_KEYS: [&str; 7] = [
    "bcast",
    "reduce",
    "allreduce",
    "allgather",
    "alltoall",
    "reduce-scatter",
    "chunk",
];
/// The keys of settings, at most once each.
const VALUE_KEYS: [&str; 6] = [
    "slots",
    "fragment",
    "spin",
    "single-copy",
    "barrier",
    "rooted-v",
];

/// A parsed rules file: its settings, in the form a plan stores them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RulesFile {
    /// Algorithm rules per key, in file order, as `SELECTOR=ALGORITHM`.
    rules: Vec<(&'static str, Vec<String>)>,
    /// Settings in file order.
    values: Vec<(&'static str, String)>,
}

impl RulesFile {
    /// Parses and validates the text of a rules file. An error names the line (1-based).
    pub fn parse(text: &str) -> Result<Self> {
        let mut file = RulesFile::default();
        let mut header = false;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let bad = |reason: String| Error::RulesFile { line, reason };
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let fields: Vec<&str> = content.split_whitespace().collect();
            if !header {
                if fields.join(" ") != RULES_HEADER {
                    return Err(bad(format!(
                        "expected the header {RULES_HEADER:?} before anything else, found \
                         {content:?}"
                    )));
                }
                header = true;
                continue;
            }
            file.add(&fields).map_err(bad)?;
        }
        if !header {
            return Err(Error::RulesFile {
                line: text.lines().count().max(1),
                reason: format!("empty: no header {RULES_HEADER:?}"),
            });
        }
        Ok(file)
    }

    /// Adds one line (without comment), validated as [`RulesFile::parse`] would: an
    /// algorithm rule (`bcast node<8K flat`) after the rules of its key, or a setting
    /// (`fragment 16K`) not set yet. For programs that write rules files.
    pub fn add_line(&mut self, line: &str) -> std::result::Result<(), String> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.is_empty() {
            return Err("an empty line is not a rule".to_string());
        }
        self.add(&fields)
    }

    /// Adds the line split into `fields` (at least one).
    fn add(&mut self, fields: &[&str]) -> std::result::Result<(), String> {
        let key = fields[0];
        if let Some(&k) = RULE_KEYS.iter().find(|&&k| k == key) {
            let (selector, algorithm) = match fields[..] {
                [_, selector, algorithm] => (selector, algorithm),
                ["chunk", size] => ("*", size),
                _ if k == "chunk" => {
                    return Err(
                        "chunk takes a size, or a selector and a size, like `chunk 256K` or \
                         `chunk allreduce<4M 1M`"
                            .to_string(),
                    );
                }
                _ => {
                    return Err(format!(
                        "{key} takes a selector and an algorithm, like `{key} inter<64K \
                         knomial:4`"
                    ));
                }
            };
            let rule = format!("{selector}={algorithm}");
            if selector.contains('=') || selector.contains(',') {
                let form = if k == "chunk" {
                    "[COLLECTIVE][<BYTES]"
                } else {
                    "[SCOPE][>MEMBERS][<BYTES]"
                };
                return Err(format!("{selector:?} is not a selector ({form} or *)"));
            }
            Settings::from_pairs(&[(k, rule.as_str())]).map_err(reason_of)?;
            self.rule_list(k).push(rule);
        } else if let Some(&k) = VALUE_KEYS.iter().find(|&&k| k == key) {
            let [_, value] = fields[..] else {
                return Err(format!(
                    "{key} takes one value, like `{key} {}`",
                    example(k)
                ));
            };
            if self.values.iter().any(|(seen, _)| *seen == k) {
                return Err(format!("{key} is set twice"));
            }
            Settings::from_pairs(&[(k, value)]).map_err(reason_of)?;
            self.values.push((k, value.to_string()));
        } else if key == "progress" {
            return Err("progress is chosen per run (--progress), not in a rules file".to_string());
        } else {
            return Err(format!(
                "unknown key {key:?}; known: {}, {}",
                RULE_KEYS.join(", "),
                VALUE_KEYS.join(", ")
            ));
        }
        Ok(())
    }

    fn rule_list(&mut self, key: &'static str) -> &mut Vec<String> {
        if let Some(i) = self.rules.iter().position(|(k, _)| *k == key) {
            return &mut self.rules[i].1;
        }
        self.rules.push((key, Vec::new()));
        &mut self.rules.last_mut().expect("just pushed").1
    }

    /// The file's settings as plan pairs: one pair per setting, one per rule key with its
    /// rules joined by commas.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let values = self.values.iter().map(|(k, v)| (k.to_string(), v.clone()));
        let rules = self
            .rules
            .iter()
            .map(|(k, list)| (k.to_string(), list.join(",")));
        values.chain(rules).collect()
    }

    /// The file in its canonical form, which parses back to the same file.
    pub fn to_text(&self) -> String {
        let mut out = format!("{RULES_HEADER}\n");
        for (k, list) in &self.rules {
            for rule in list {
                let (selector, algorithm) = rule.split_once('=').expect("rules hold an =");
                out.push_str(&format!("{k:<12} {selector:<12} {algorithm}\n"));
            }
        }
        for (k, v) in &self.values {
            out.push_str(&format!("{k:<12} {v}\n"));
        }
        out
    }
}

/// Settings from the command line or the environment (`first`) over those of a rules
/// file: a setting given in both takes `first`'s value; algorithm rules of `first` are
/// tried before the file's.
pub fn merge(first: &[(String, String)], file: &[(String, String)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = first.to_vec();
    for (k, v) in file {
        match out.iter_mut().find(|(key, _)| key == k) {
            Some((_, mine)) if RULE_KEYS.contains(&k.as_str()) => *mine = format!("{mine},{v}"),
            Some(_) => {}
            None => out.push((k.clone(), v.clone())),
        }
    }
    out
}

fn reason_of(e: Error) -> String {
    match e {
        Error::Settings { reason, .. } => reason,
        other => other.to_string(),
    }
}

fn example(key: &str) -> &'static str {
    match key {
        "slots" => "8",
        "spin" => "1024",
        "single-copy" => "16K",
        "fragment" => "128K",
        "barrier" => "root-first",
        _ => "8K",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::level::LevelName;
    use crate::settings::{BarrierAlg, BcastAlg, Collective};
    use proptest::prelude::*;

    const GOOD: &str = "# tuned on the dev cluster\n\
        topo-run-rules 1\n\
        \n\
        bcast   intra      flat     # shared memory\n\
        bcast   inter<64K  knomial:4\n\
        reduce  *          binomial\n\
        fragment 16K\n\
        bcast   *          binomial\n\
        single-copy 32K\n";

    #[test]
    fn a_file_becomes_plan_pairs_in_order() {
        let f = RulesFile::parse(GOOD).unwrap();
        assert_eq!(
            f.pairs(),
            [
                ("fragment", "16K"),
                ("single-copy", "32K"),
                ("bcast", "intra=flat,inter<64K=knomial:4,*=binomial"),
                ("reduce", "*=binomial"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        let s = Settings::from_pairs(&f.pairs()).unwrap();
        let world: LevelName = "world".parse().unwrap();
        assert_eq!(s.bcast_for(world, false, 2, 100), BcastAlg::Knomial(4));
        assert_eq!(s.bcast_for(world, false, 2, 1 << 20), BcastAlg::Knomial(2));
        assert_eq!(s.fragment, 16 << 10);
        assert_eq!(RulesFile::parse(&f.to_text()).unwrap(), f);
    }

    #[test]
    fn the_shipped_defaults_file_is_the_built_in_defaults() {
        let text = include_str!("../../examples/rules/defaults.rules");
        let s = Settings::from_pairs(&RulesFile::parse(text).unwrap().pairs()).unwrap();
        let d = Settings::default();
        assert_eq!(
            (s.slots, s.fragment, s.spin, s.single_copy, s.barrier_alg()),
            (d.slots, d.fragment, d.spin, d.single_copy, d.barrier_alg())
        );
        for c in Collective::ALL {
            for bytes in [0, 8, 65535, 65536, 1 << 20, 1 << 30] {
                assert_eq!(
                    s.chunk_for(c, bytes),
                    d.chunk_for(c, bytes),
                    "{c:?} {bytes}"
                );
            }
        }
        for level in [
            "core", "l3", "numa", "socket", "node", "switch1", "switch2", "world",
        ] {
            let level: LevelName = level.parse().unwrap();
            for (intra, m) in [true, false]
                .into_iter()
                .flat_map(|i| [2, 3, 16].map(|m| (i, m)))
            {
                for bytes in [0, 8, 511, 512, 4095, 4096, 65535, 65536, 1 << 20, 1 << 30] {
                    assert_eq!(
                        s.bcast_for(level, intra, m, bytes),
                        d.bcast_for(level, intra, m, bytes)
                    );
                    assert_eq!(
                        s.reduce_for(level, intra, m, bytes),
                        d.reduce_for(level, intra, m, bytes),
                        "{level} intra {intra}, {m} members, {bytes} bytes"
                    );
                    assert_eq!(s.allreduce_for(bytes), d.allreduce_for(bytes));
                }
            }
        }
    }

    #[test]
    fn a_file_chooses_how_gatherv_and_scatterv_go() {
        let f = RulesFile::parse("topo-run-rules 1\nrooted-v leaders\n").unwrap();
        assert_eq!(f.pairs(), [("rooted-v".to_string(), "leaders".to_string())]);
        let s = Settings::from_pairs(&f.pairs()).unwrap();
        assert_eq!(s.rooted_v_alg(), crate::settings::RootedVAlg::Leaders);
    }

    #[test]
    fn a_file_chooses_the_reduce_scatter_form_by_block() {
        let f = RulesFile::parse(
            "topo-run-rules 1\nreduce-scatter <1K root\nreduce-scatter * leaders\n",
        )
        .unwrap();
        let s = Settings::from_pairs(&f.pairs()).unwrap();
        use crate::settings::ReduceScatterAlg;
        assert_eq!(s.reduce_scatter_for(8), ReduceScatterAlg::Root);
        assert_eq!(s.reduce_scatter_for(1 << 20), ReduceScatterAlg::Leaders);
    }

    #[test]
    fn a_file_chooses_the_barrier_once() {
        let f = RulesFile::parse("topo-run-rules 1\nbarrier root-first\n").unwrap();
        assert_eq!(
            f.pairs(),
            [("barrier".to_string(), "root-first".to_string())]
        );
        let s = Settings::from_pairs(&f.pairs()).unwrap();
        assert_eq!(s.barrier_alg(), BarrierAlg::RootFirst);
        for (text, line, says) in [
            (
                "topo-run-rules 1\nbarrier sideways\n",
                2,
                "use dissemination, root-first or flat",
            ),
            (
                "topo-run-rules 1\nbarrier\n",
                2,
                "barrier takes one value, like `barrier root-first`",
            ),
            (
                "topo-run-rules 1\nbarrier root-first\nbarrier dissemination\n",
                3,
                "barrier is set twice",
            ),
        ] {
            let e = RulesFile::parse(text).unwrap_err().to_string();
            assert!(
                e.contains(&format!("line {line}")) && e.contains(says),
                "{text:?}: {e}"
            );
        }
    }

    #[test]
    fn bad_files_name_the_line_and_the_problem() {
        let cases = [
            ("bcast * flat\n", 1, "header"),
            ("\n# nothing\n", 2, "empty"),
            ("", 1, "empty"),
            ("topo-run-rules 2\n", 1, "header"),
            (
                "topo-run-rules 1\nbcast flat\n",
                2,
                "selector and an algorithm",
            ),
            ("topo-run-rules 1\nbcast * ring\n", 2, "ring"),
            ("topo-run-rules 1\nbcast numa=x flat\n", 2, "not a selector"),
            ("topo-run-rules 1\nbcast bogus flat\n", 2, "bogus"),
            ("topo-run-rules 1\nfragment 100\n", 2, "multiple of 64"),
            ("topo-run-rules 1\nslots 8\n\nslots 4\n", 4, "twice"),
            ("topo-run-rules 1\nslots\n", 2, "one value"),
            ("topo-run-rules 1\nchunk\n", 2, "a selector and a size"),
            (
                "topo-run-rules 1\nchunk gather 1M\n",
                2,
                "unknown collective",
            ),
            ("topo-run-rules 1\nchunk bcast 1K\n", 2, "between"),
            ("topo-run-rules 1\nchunk bcast=x 1M\n", 2, "[COLLECTIVE]"),
            ("topo-run-rules 1\nprogress thread\n", 2, "per run"),
            ("topo-run-rules 1\nfrobnicate 3\n", 2, "unknown key"),
        ];
        for (text, line, needle) in cases {
            let e = RulesFile::parse(text).unwrap_err();
            let Error::RulesFile { line: l, .. } = &e else {
                panic!("{text:?}: {e:?}");
            };
            assert_eq!(*l, line, "{text:?}: {e}");
            assert!(e.to_string().contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_program_builds_a_file_line_by_line() {
        let mut f = RulesFile::default();
        f.add_line("bcast node<8K flat").unwrap();
        f.add_line("fragment 16K").unwrap();
        f.add_line("bcast node knomial:4").unwrap();
        assert!(f.add_line("fragment 4K").unwrap_err().contains("twice"));
        assert!(
            f.add_line("bcast node<8K ring")
                .unwrap_err()
                .contains("ring")
        );
        assert!(f.add_line("  ").is_err());
        assert_eq!(
            f.to_text(),
            "topo-run-rules 1\nbcast        node<8K      flat\n\
             bcast        node         knomial:4\nfragment     16K\n"
        );
        assert_eq!(RulesFile::parse(&f.to_text()).unwrap(), f);
    }

    #[test]
    fn chunk_rules_keep_their_order_and_the_command_line_comes_first() {
        let text = "topo-run-rules 1\nchunk bcast<128K 16K\nslots 4\nchunk allreduce 1M\n\
                    chunk 512K\n";
        let f = RulesFile::parse(text).unwrap();
        let pairs = f.pairs();
        assert_eq!(
            pairs[1],
            ("chunk".into(), "bcast<128K=16K,allreduce=1M,*=512K".into())
        );
        let s = Settings::from_pairs(&pairs).unwrap();
        assert_eq!(s.chunk_for(Collective::Bcast, 64 << 10), 16 << 10);
        assert_eq!(s.chunk_for(Collective::Allreduce, 64 << 10), 1 << 20);
        assert_eq!(s.chunk_for(Collective::Reduce, 64 << 10), 512 << 10);
        assert_eq!(RulesFile::parse(&f.to_text()).unwrap(), f);
        // `--chunk 64K` on the command line is tried before the file's rules.
        let m = merge(&[("chunk".into(), "64K".into())], &pairs);
        let s = Settings::from_pairs(&m).unwrap();
        for c in Collective::ALL {
            assert_eq!(s.chunk_for(c, 64 << 10), 64 << 10);
        }
    }

    #[test]
    fn the_command_line_comes_first() {
        let cli = [("bcast", "numa=flat"), ("fragment", "4K")]
            .map(|(k, v)| (k.to_string(), v.to_string()));
        let file = RulesFile::parse(GOOD).unwrap().pairs();
        let m = merge(&cli, &file);
        let get = |k: &str| m.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("fragment"), Some("4K"));
        assert_eq!(get("single-copy"), Some("32K"));
        assert_eq!(
            get("bcast"),
            Some("numa=flat,intra=flat,inter<64K=knomial:4,*=binomial")
        );
        assert_eq!(get("reduce"), Some("*=binomial"));
        Settings::from_pairs(&m).unwrap();
    }

    fn line() -> impl Strategy<Value = String> {
        let scope = prop::sample::select(vec!["*", "intra", "inter", "numa", "node", "switch1"]);
        let below = prop::option::of(prop::sample::select(vec!["64", "4K", "64K", "1M"]));
        let selector = (scope, below).prop_map(|(s, b)| match b {
            Some(b) => format!("{s}<{b}"),
            None => s.to_string(),
        });
        prop_oneof![
            (
                selector.clone(),
                prop::sample::select(vec!["flat", "binomial", "knomial:3"])
            )
                .prop_map(|(s, a)| format!("bcast {s} {a}")),
            (
                selector.clone(),
                prop::sample::select(vec!["flat", "knomial:4"])
            )
                .prop_map(|(s, a)| format!("reduce {s} {a}")),
            (
                selector,
                prop::sample::select(vec!["rb", "rab:rd", "rab:ring"])
            )
                .prop_map(|(s, a)| format!("allreduce {s} {a}")),
            (
                prop::sample::select(vec!["", "*", "bcast", "reduce<64K", "<1M", "allgather<4K"]),
                prop::sample::select(vec!["4K", "256K", "1M"])
            )
                .prop_map(|(s, c)| format!("chunk {s} {c}")),
        ]
    }

    proptest! {
        #[test]
        fn files_round_trip_through_their_canonical_text(
            lines in prop::collection::vec(line(), 0..12),
            fragment in prop::option::of(1u32..256),
            comment in any::<bool>(),
        ) {
            let mut text = String::new();
            if comment {
                text.push_str("# made by a test\n\n");
            }
            text.push_str(RULES_HEADER);
            text.push('\n');
            for l in &lines {
                text.push_str(l);
                text.push('\n');
            }
            if let Some(f) = fragment {
                text.push_str(&format!("fragment {}\n", f * 64));
            }
            let f = RulesFile::parse(&text).unwrap();
            prop_assert_eq!(RulesFile::parse(&f.to_text()).unwrap(), f.clone());
            Settings::from_pairs(&f.pairs()).unwrap();
            let rules: usize = f.pairs().iter()
                .filter(|(k, _)| RULE_KEYS.contains(&k.as_str()))
                .map(|(_, v)| v.split(',').count())
                .sum();
            prop_assert_eq!(rules, lines.len());
        }

        #[test]
        fn any_text_parses_or_names_a_line(text in ".{0,200}") {
            match RulesFile::parse(&text) {
                Ok(f) => { Settings::from_pairs(&f.pairs()).unwrap(); }
                Err(Error::RulesFile { line, .. }) => prop_assert!(line >= 1),
                Err(e) => prop_assert!(false, "unexpected error {e:?}"),
            }
        }
    }
}
