#![no_main]
//! Any text in any of the three map formats: an error or a valid tree, never a panic.
use libfuzzer_sys::fuzz_target;
use topo_hierarchy::NetworkMap;

fuzz_target!(|text: &str| {
    if let Ok(map) = NetworkMap::from_str(text) {
        let _ = map.canonical();
    }
});
