//! Counts of the calls that took topo-run's path and of those handed to MPI, by reason;
//! printed at `MPI_Finalize` with `TOPO_RUN_STATS=1`.

use crate::classify::{Call, HandOff};

/// The environment variable that turns the report on.
pub const STATS_ENV: &str = "TOPO_RUN_STATS";

/// Per-call counters.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    ours: [u64; Call::ALL.len()],
    handed: [[u64; HandOff::ALL.len()]; Call::ALL.len()],
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
