#![no_main]
//! Any expression: expand must not panic; compress(expand(x)) expands to the same names.
use libfuzzer_sys::fuzz_target;
use topo_hierarchy::hostlist;

fuzz_target!(|text: &str| {
    if text.len() > 256 {
        return;
    }
    if let Ok(names) = hostlist::expand(text) {
        if names.len() > 10_000 {
            return;
        }
        let compressed = hostlist::compress(&names);
        assert_eq!(hostlist::expand(&compressed).ok(), Some(names));
    }
});
