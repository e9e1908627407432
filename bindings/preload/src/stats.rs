//! Counts of the calls that took topo-run's path and of those handed to MPI, by reason;
//! printed at `MPI_Finalize` with `TOPO_RUN_STATS=1`.

use crate::classify::{Call, HandOff};

/// What a communicator is to world, for the statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommKind {
    /// `MPI_COMM_WORLD`.
    World,
    /// Congruent to world (the same ranks in the same order): a duplicate or a split
    /// that keeps world whole.
    Duplicate,
    /// Inside one node (for example `MPI_Comm_split_type` SHARED).
    Node,
    /// Any other intracommunicator with a context: a subset, or world in another order.
    Split,
    /// A communicator without a context of topo-run's (an intercommunicator, one rank, no
    /// room, not set up yet).
    Other,
}

impl CommKind {
    /// Every kind, in report order.
    pub const ALL: [CommKind; 5] = [
        CommKind::World,
        CommKind::Duplicate,
        CommKind::Node,
        CommKind::Split,
        CommKind::Other,
    ];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            CommKind::World => "world",
            CommKind::Duplicate => "duplicate",
            CommKind::Node => "node",
            CommKind::Split => "split",
            CommKind::Other => "other",
        }
    }
}

/// The environment variable that turns the report on.
pub const STATS_ENV: &str = "TOPO_RUN_STATS";

/// Per-call counters.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    ours: [u64; Call::ALL.len()],
    handed: [[u64; HandOff::ALL.len()]; Call::ALL.len()],
    /// Per communicator kind: calls on topo-run's path and calls handed to MPI.
    by_kind: [[u64; 2]; CommKind::ALL.len()],
    /// Contexts given to communicators other than world: set up anew, taken up from the
    /// kept ones at their first collective, taken up in their creating call, set up anew
    /// in their creating call.
    contexts: [u64; 4],
}

/// How a communicator got its context (for [`Stats::context`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Set up anew.
    New,
    /// Taken up from the kept ones, agreed over the communicator at its setup.
    Kept,
    /// Taken up from the kept ones in the call that created the communicator.
    KeptAtCreation,
    /// Set up anew in the call that created the communicator, because its members' last
    /// new communicators began with a nonblocking collective (`state::adopt`).
    NewAtCreation,
}

impl Stats {
    /// Counts a call that took topo-run's path.
    pub fn ours(&mut self, call: Call) {
        self.ours[call.index()] += 1;
    }

    /// Counts a call handed to MPI.
    pub fn handed(&mut self, call: Call, why: HandOff) {
        self.handed[call.index()][why.index()] += 1;
    }

    /// Counts a call on a communicator of `kind`, on topo-run's path (`ours`) or not.
    pub fn on(&mut self, kind: CommKind, ours: bool) {
        self.by_kind[kind as usize][usize::from(!ours)] += 1;
    }

    /// Counts a context given to a communicator other than world.
    pub fn context(&mut self, origin: Origin) {
        self.contexts[origin as usize] += 1;
    }

    /// One line per call that was made at all, for example
    /// `MPI_Bcast: 12 topo-run, 3 MPI (2 derived datatype, 1 zero count)`.
    pub fn report(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for call in Call::ALL {
            let ours = self.ours[call.index()];
            let handed = &self.handed[call.index()];
            let total: u64 = handed.iter().sum();
            if ours == 0 && total == 0 {
                continue;
            }
            let mut line = format!("{}: {ours} topo-run, {total} MPI", call.name());
            if total > 0 {
                let why: Vec<String> = HandOff::ALL
                    .iter()
                    .filter(|h| handed[h.index()] > 0)
                    .map(|h| format!("{} {}", handed[h.index()], h.describe()))
                    .collect();
                line.push_str(&format!(" ({})", why.join(", ")));
            }
            lines.push(line);
        }
        if lines.is_empty() {
            lines.push("no collective calls".into());
            return lines;
        }
        let kinds: Vec<String> = CommKind::ALL
            .iter()
            .filter(|k| self.by_kind[**k as usize] != [0, 0])
            .map(|k| {
                let [ours, handed] = self.by_kind[*k as usize];
                format!("{} {ours} topo-run, {handed} MPI", k.name())
            })
            .collect();
        if !kinds.is_empty() {
            lines.push(format!("by communicator: {}", kinds.join("; ")));
        }
        let [new, kept, at_creation, new_at_creation] = self.contexts;
        if new + kept + at_creation + new_at_creation > 0 {
            let mut line = format!(
                "contexts of other communicators: {} set up, {} taken up again from the \
                 kept ones ({at_creation} in the call that created the communicator)",
                new + new_at_creation,
                kept + at_creation
            );
            if new_at_creation > 0 {
                line += &format!(
                    "; {new_at_creation} of those set up in the call that created the \
                     communicator, after communicators whose first collective was nonblocking"
                );
            }
            lines.push(line);
        }
        lines
    }
}

/// Whether `TOPO_RUN_STATS` asks for the report (`1`, `yes`, `true`, `on`).
pub fn wanted(value: Option<&str>) -> bool {
    matches!(
        value.map(|v| v.trim().to_ascii_lowercase()).as_deref(),
        Some("1" | "yes" | "true" | "on")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lines() {
        let mut s = Stats::default();
        assert_eq!(s.report(), vec!["no collective calls".to_string()]);
        s.ours(Call::Bcast);
        s.ours(Call::Bcast);
        s.handed(Call::Bcast, HandOff::DerivedDatatype);
        s.handed(Call::Bcast, HandOff::ZeroCount);
        s.handed(Call::Bcast, HandOff::ZeroCount);
        s.ours(Call::Barrier);
        assert_eq!(
            s.report(),
            vec![
                "MPI_Bcast: 2 topo-run, 3 MPI (1 derived datatype, 2 zero count)".to_string(),
                "MPI_Barrier: 1 topo-run, 0 MPI".to_string(),
            ]
        );
        s.on(CommKind::World, true);
        s.on(CommKind::Split, true);
        s.on(CommKind::Split, false);
        s.on(CommKind::Other, false);
        assert_eq!(
            s.report().last().unwrap(),
            "by communicator: world 1 topo-run, 0 MPI; split 1 topo-run, 1 MPI; other 0 topo-run, 1 MPI"
        );
        s.context(Origin::New);
        s.context(Origin::Kept);
        s.context(Origin::KeptAtCreation);
        s.context(Origin::KeptAtCreation);
        assert_eq!(
            s.report().last().unwrap(),
            "contexts of other communicators: 1 set up, 3 taken up again from the kept ones \
             (2 in the call that created the communicator)"
        );
        s.context(Origin::NewAtCreation);
        assert_eq!(
            s.report().last().unwrap(),
            "contexts of other communicators: 2 set up, 3 taken up again from the kept ones \
             (2 in the call that created the communicator); 1 of those set up in the call \
             that created the communicator, after communicators whose first collective was \
             nonblocking"
        );
    }

    #[test]
    fn switch_values() {
        assert!(wanted(Some("1")));
        assert!(wanted(Some(" Yes ")));
        assert!(!wanted(Some("0")));
        assert!(!wanted(Some("")));
        assert!(!wanted(None));
    }
}
