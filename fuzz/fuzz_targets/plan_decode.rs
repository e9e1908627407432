#![no_main]
//! Any environment value: decode rejects or yields a plan that re-encodes to itself.
use libfuzzer_sys::fuzz_target;
use topo_hierarchy::RankPlan;

fuzz_target!(|text: &str| {
    if let Ok(plan) = RankPlan::decode(text) {
        let again = RankPlan::decode(&plan.encode()).expect("re-encoded plan decodes");
        assert_eq!(again, plan);
    }
});
