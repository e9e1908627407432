//! The settings being tuned: the knobs' values and the rules found so far per collective,
//! and the rules file they make.

use std::collections::BTreeMap;

use topo_hierarchy::settings::format_bytes;
use topo_hierarchy::{LevelName, RulesFile, Settings};

use crate::space::{self, Op};

/// The settings being tuned: values of the knobs, and the rules found so far per op.
#[derive(Debug, Clone)]
pub(crate) struct State {
    pub(crate) base: Vec<(String, String)>,
    pub(crate) values: BTreeMap<&'static str, String>,
    pub(crate) tuned: BTreeMap<&'static str, Vec<(String, String)>>,
    /// Per op, the levels whose rules were tuned (the base's rules of that op for them
    /// are dropped).
    pub(crate) tuned_levels: Vec<(&'static str, String)>,
    /// Pipeline-chunk rules found so far, as (selector, chunk); each selector starts with
    /// its op's key.
    pub(crate) chunks: Vec<(String, String)>,
    /// Ranks in the job (the allgather defaults depend on it).
    pub(crate) ranks: usize,
    /// Nodes in the job (the allreduce and allgather defaults depend on it).
    pub(crate) nodes: u32,
}

impl State {
    pub(crate) fn new(base: &[(String, String)], ranks: usize, nodes: u32) -> Self {
        State {
            ranks,
            nodes,
            base: base.to_vec(),
            values: BTreeMap::new(),
            tuned: BTreeMap::new(),
            tuned_levels: Vec::new(),
            chunks: Vec::new(),
        }
    }

    /// Whether `key` was given (the base) or tuned, rather than its default.
    fn set(&self, key: &str) -> bool {
        self.values.contains_key(key) || self.base.iter().any(|(k, _)| k == key)
    }

    pub(crate) fn value(&self, key: &str) -> String {
        if let Some(v) = self.values.get(key) {
            return v.clone();
        }
        if let Some((_, v)) = self.base.iter().find(|(k, _)| k == key) {
            return v.clone();
        }
        let d = Settings::default();
        match key {
            "slots" => d.slots.to_string(),
            "fragment" => format_bytes(d.fragment.into()),
            "single-copy" => format_bytes(d.single_copy.into()),
            "rooted-v" => Settings {
                nodes: self.nodes,
                ranks: self.ranks as u32,
                ..d
            }
            .rooted_v_alg()
            .to_string(),
            _ => d.spin.to_string(),
        }
    }

    /// The base's rules of `op` that still matter: not for a level tuned since.
    pub(crate) fn base_rules(&self, op: Op) -> Vec<(String, String)> {
        let Some((_, text)) = self.base.iter().find(|(k, _)| k == op.key()) else {
            return Vec::new();
        };
        if op.job_wide() && self.tuned.contains_key(op.key()) {
            return Vec::new(); // the tuned rules end with one for every size
        }
        text.split(',')
            .filter_map(|r| {
                let (sel, alg) = r.split_once('=').unwrap_or(("*", r));
                let scope = sel.split('<').next().unwrap_or("");
                (!self
                    .tuned_levels
                    .iter()
                    .any(|(o, l)| *o == op.key() && l == scope))
                .then(|| (sel.to_string(), alg.to_string()))
            })
            .collect()
    }

    /// All rules of `op`, in order, with `first` tried before them.
    pub(crate) fn rules(&self, op: Op, first: Option<(String, String)>) -> Vec<(String, String)> {
        let mut out: Vec<_> = first.into_iter().collect();
        out.extend(self.tuned.get(op.key()).cloned().unwrap_or_default());
        out.extend(self.base_rules(op));
        out
    }

    /// The chunk rules in order: `first`, those found so far, then the base's.
    pub(crate) fn chunk_rules(&self, first: Option<(String, String)>) -> Vec<(String, String)> {
        let mut out: Vec<_> = first
            .into_iter()
            .chain(self.chunks.iter().cloned())
            .collect();
        if let Some((_, text)) = self.base.iter().find(|(k, _)| k == "chunk") {
            out.extend(text.split(',').map(|r| {
                let (sel, size) = r.split_once('=').unwrap_or(("*", r));
                (sel.to_string(), size.to_string())
            }));
        }
        out
    }

    /// The settings pairs, with `knob` set to a candidate value, `rule` first in its op and
    /// `chunk` (selector, chunk) the first chunk rule.
    pub(crate) fn pairs(
        &self,
        knob: Option<(&str, &str)>,
        rule: Option<(Op, String, String)>,
        chunk: Option<(String, String)>,
    ) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        let chunks: Vec<String> = self
            .chunk_rules(chunk)
            .iter()
            .map(|(sel, size)| format!("{sel}={size}"))
            .collect();
        if !chunks.is_empty() {
            out.push(("chunk".to_string(), chunks.join(",")));
        }
        for key in ["slots", "fragment", "spin", "single-copy"] {
            let v = match knob {
                Some((k, v)) if k == key => v.to_string(),
                _ => self.value(key),
            };
            out.push((key.to_string(), v));
        }
        // Gatherv's and Scatterv's form where it was given or tuned (else its default,
        // which depends on the job's shape).
        match knob {
            Some(("rooted-v", v)) => out.push(("rooted-v".to_string(), v.to_string())),
            _ if self.set("rooted-v") => {
                out.push(("rooted-v".to_string(), self.value("rooted-v")));
            }
            _ => {}
        }
        for op in Op::ALL {
            let first = match &rule {
                Some((o, sel, alg)) if *o == op => Some((sel.clone(), alg.clone())),
                _ => None,
            };
            let rules = self.rules(op, first);
            if !rules.is_empty() {
                let text: Vec<String> = rules.iter().map(|(s, a)| format!("{s}={a}")).collect();
                out.push((op.key().to_string(), text.join(",")));
            }
        }
        out
    }

    /// The pipeline chunk the settings give `op` (one that pipelines) for `bytes` now.
    pub(crate) fn current_chunk(&self, op: Op, bytes: usize) -> String {
        let s =
            Settings::from_pairs(&self.pairs(None, None, None)).expect("tuned settings are valid");
        let c = op
            .chunked()
            .expect("only the collectives that pipeline have a chunk");
        format_bytes(s.chunk_for(c, bytes).into())
    }

    /// What the settings pick for `op` at `level` (groups of `members`) for `bytes` now.
    pub(crate) fn current(
        &self,
        op: Op,
        level: LevelName,
        intra: bool,
        members: usize,
        bytes: usize,
    ) -> String {
        let mut s =
            Settings::from_pairs(&self.pairs(None, None, None)).expect("tuned settings are valid");
        s.nodes = self.nodes;
        s.ranks = self.ranks as u32;
        let alg = match op {
            Op::Bcast => s.bcast_for(level, intra, members, bytes).to_string(),
            Op::Reduce => s.reduce_for(level, intra, members, bytes).to_string(),
            Op::Allreduce => s.allreduce_for(bytes).to_string(),
            Op::Allgather => s.allgather_for(bytes, self.ranks).to_string(),
            Op::Alltoall => s.alltoall_for(op.rule_bytes(bytes, self.ranks)).to_string(),
            Op::Gatherv | Op::Scatterv => self.value("rooted-v"),
            Op::ReduceScatter => s
                .reduce_scatter_for(op.rule_bytes(bytes, self.ranks))
                .to_string(),
        };
        space::canonical(alg)
    }

    /// Drops the algorithm and chunk rules tuned for `op`: the base's rules for it apply
    /// again.
    pub(crate) fn revert_rules(&mut self, op: Op) {
        self.tuned.remove(op.key());
        self.tuned_levels.retain(|(o, _)| *o != op.key());
        self.chunks
            .retain(|(sel, _)| sel.split('<').next() != Some(op.key()));
    }

    /// The rules file of these settings.
    pub(crate) fn file(&self) -> anyhow::Result<RulesFile> {
        let mut f = RulesFile::default();
        for op in Op::ALL {
            for (sel, alg) in self.rules(op, None) {
                f.add_line(&format!("{} {sel} {alg}", op.key()))
                    .map_err(anyhow::Error::msg)?;
            }
        }
        for (sel, size) in self.chunk_rules(None) {
            f.add_line(&format!("chunk {sel} {size}"))
                .map_err(anyhow::Error::msg)?;
        }
        for key in ["slots", "fragment", "single-copy"] {
            f.add_line(&format!("{key} {}", self.value(key)))
                .map_err(anyhow::Error::msg)?;
        }
        if self.set("rooted-v") {
            f.add_line(&format!("rooted-v {}", self.value("rooted-v")))
                .map_err(anyhow::Error::msg)?;
        }
        if self.base.iter().any(|(k, _)| k == "spin") {
            f.add_line(&format!("spin {}", self.value("spin")))
                .map_err(anyhow::Error::msg)?;
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn base() -> Vec<(String, String)> {
        vec![
            ("bcast".into(), "node<1K=binomial,node=flat".into()),
            ("reduce".into(), "node=flat".into()),
        ]
    }

    #[test]
    pub(crate) fn a_tuned_level_replaces_the_base_rules_of_its_own_op_only() {
        let mut s = State::new(&base(), 4, 1);
        s.tuned
            .insert("bcast", vec![("node".into(), "knomial:4".into())]);
        s.tuned_levels.push(("bcast", "node".into()));
        let pairs = s.pairs(None, None, None);
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("bcast").as_deref(), Some("node=knomial:4"));
        // Reduce was not tuned at the node level: its base rule stays.
        assert_eq!(get("reduce").as_deref(), Some("node=flat"));
    }

    #[test]
    pub(crate) fn undoing_an_ops_rules_gives_back_where_tuning_started() {
        let start = State::new(&base(), 4, 1);
        let mut s = start.clone();
        s.tuned
            .insert("bcast", vec![("node".into(), "knomial:4".into())]);
        s.tuned_levels.push(("bcast", "node".into()));
        s.tuned
            .insert("allreduce", vec![("*".into(), "rab:ring".into())]);
        s.values.insert("fragment", "32K".into());
        s.revert_rules(Op::Bcast);
        let (p, q) = (s.pairs(None, None, None), start.pairs(None, None, None));
        let get = |v: &[(String, String)], k: &str| {
            v.iter().find(|(key, _)| key == k).map(|(_, x)| x.clone())
        };
        assert_eq!(get(&p, "bcast"), get(&q, "bcast"));
        // The other op's rules and the queue settings are left as tuned.
        assert_eq!(get(&p, "allreduce").as_deref(), Some("*=rab:ring"));
        assert_eq!(get(&p, "fragment").as_deref(), Some("32K"));
        s.revert_rules(Op::Allreduce);
        s.values.clear();
        assert_eq!(s.pairs(None, None, None), start.pairs(None, None, None));
    }

    #[test]
    fn the_rooted_v_form_is_the_jobs_default_until_given_or_tuned() {
        let get = |v: &[(String, String)], k: &str| {
            v.iter().find(|(key, _)| key == k).map(|(_, x)| x.clone())
        };
        // 4 nodes x 8: through the leaders by default; 4 x 2: straight.
        let mut s = State::new(&base(), 32, 4);
        assert_eq!(s.value("rooted-v"), "leaders");
        assert_eq!(State::new(&base(), 8, 4).value("rooted-v"), "direct");
        assert_eq!(
            s.current(Op::Gatherv, LevelName::World, false, 2, 64),
            "leaders"
        );
        // Not pinned in the settings or the file until tuned.
        assert_eq!(get(&s.pairs(None, None, None), "rooted-v"), None);
        assert_eq!(get(&s.file().unwrap().pairs(), "rooted-v"), None);
        // A candidate, then the tuned value.
        let p = s.pairs(Some(("rooted-v", "direct")), None, None);
        assert_eq!(get(&p, "rooted-v").as_deref(), Some("direct"));
        s.values.insert("rooted-v", "direct".into());
        assert_eq!(
            get(&s.pairs(None, None, None), "rooted-v").as_deref(),
            Some("direct")
        );
        assert_eq!(
            get(&s.file().unwrap().pairs(), "rooted-v").as_deref(),
            Some("direct")
        );
        assert_eq!(
            s.current(Op::Scatterv, LevelName::World, false, 2, 64),
            "direct"
        );
    }

    #[test]
    pub(crate) fn chunk_rules_come_before_the_base_ones_and_undo_per_op() {
        let mut base = base();
        base.push(("chunk".into(), "512K".into()));
        let mut s = State::new(&base, 4, 1);
        assert_eq!(s.current_chunk(Op::Allreduce, 1 << 20), "512K");
        s.chunks.push(("allreduce<2M".into(), "1M".into()));
        s.chunks.push(("bcast".into(), "64K".into()));
        assert_eq!(s.current_chunk(Op::Allreduce, 1 << 20), "1M");
        assert_eq!(s.current_chunk(Op::Allreduce, 2 << 20), "512K");
        assert_eq!(s.current_chunk(Op::Bcast, 2 << 20), "64K");
        // A candidate goes first.
        let p = s.pairs(None, None, Some(("allreduce".into(), "16K".into())));
        let t = Settings::from_pairs(&p).unwrap();
        let allreduce = topo_hierarchy::settings::Collective::Allreduce;
        assert_eq!(t.chunk_for(allreduce, 1 << 20), 16 << 10);
        // The file holds every chunk rule, in order, and loads back to the same choices.
        let f = s.file().unwrap();
        let back = Settings::from_pairs(&f.pairs()).unwrap();
        let now = Settings::from_pairs(&s.pairs(None, None, None)).unwrap();
        assert_eq!(back.chunk, now.chunk);
        assert!(
            f.to_text().contains("chunk        allreduce<2M 1M"),
            "{}",
            f.to_text()
        );
        s.revert_rules(Op::Allreduce);
        assert_eq!(s.current_chunk(Op::Allreduce, 1 << 20), "512K");
        assert_eq!(s.current_chunk(Op::Bcast, 2 << 20), "64K");
    }
}
