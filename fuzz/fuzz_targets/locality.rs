#![no_main]
//! Any string: parse must not panic, and what parses must format and parse back the same.
use libfuzzer_sys::fuzz_target;
use topo_hierarchy::LocalityString;

fuzz_target!(|text: &str| {
    if let Ok(loc) = LocalityString::parse(text) {
        let again = LocalityString::parse(&loc.to_string()).expect("formatted locality parses");
        assert_eq!(again, loc);
    }
});
