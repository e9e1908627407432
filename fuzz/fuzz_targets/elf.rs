#![no_main]
//! Any bytes: the launcher's ELF reader must not panic, and what it returns must come from
//! inside the input (every name is at most as long as the file).
use libfuzzer_sys::fuzz_target;

#[path = "../../launcher/src/elf.rs"]
#[allow(dead_code)]
mod elf;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(info) = elf::parse(bytes) {
        for name in info.needed.iter().chain(&info.sections) {
            assert!(name.chars().count() <= bytes.len());
        }
    }
});
