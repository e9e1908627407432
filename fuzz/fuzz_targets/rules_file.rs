#![no_main]
//! Any string: parsing a rules file must not panic; what parses must give valid settings
//! and parse back the same from its canonical text.
use libfuzzer_sys::fuzz_target;
use topo_hierarchy::{RulesFile, Settings};

fuzz_target!(|text: &str| {
    if let Ok(file) = RulesFile::parse(text) {
        Settings::from_pairs(&file.pairs()).expect("a parsed rules file gives valid settings");
        let again = RulesFile::parse(&file.to_text()).expect("canonical text parses");
        assert_eq!(again, file);
    }
});
