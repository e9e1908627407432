#![no_main]
//! Any environment value, read as the runtime reads `TOPO_RUN_PLAN`: decode rejects it or
//! yields a plan that re-encodes to itself, and its settings parse or are rejected, never
//! panic (`Topo::from_env` does both before anything else).
use libfuzzer_sys::fuzz_target;
use topo_hierarchy::{RankPlan, Settings};

fuzz_target!(|text: &str| {
    if let Ok(plan) = RankPlan::decode(text) {
        let again = RankPlan::decode(&plan.encode()).expect("re-encoded plan decodes");
        assert_eq!(again, plan);
        if let Ok(s) = Settings::from_pairs(&plan.settings) {
            // Settings that parse choose an algorithm for each of the plan's levels and
            // every size without panicking.
            for g in &plan.groups {
                for n in [0, 1, 4096, usize::MAX] {
                    for intra in [false, true] {
                        let m = g.members.len();
                        let _ = (
                            s.bcast_for(g.level, intra, m, n),
                            s.reduce_for(g.level, intra, m, n),
                        );
                    }
                    let _ = s.allreduce_for(n);
                }
            }
        }
    }
});
