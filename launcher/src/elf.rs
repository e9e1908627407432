//! Just enough of ELF to decide whether to preload the PMPI library: the shared libraries a
//! program needs (`DT_NEEDED`) and the names of its sections. 64-bit little-endian files
//! only (what this launcher runs on); anything else is "not an ELF program we know".

/// What the launcher needs to know of a program file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ElfInfo {
    /// `DT_NEEDED` entries, in file order (for example `libmpi.so.40`).
    pub needed: Vec<String>,
    /// Section names (for example `.text`, `.topo_runtime`).
    pub sections: Vec<String>,
}

/// Why a file could not be read as a 64-bit little-endian ELF file.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("not a 64-bit little-endian ELF file ({0})")]
pub struct NotElf(&'static str);

const SHT_DYNAMIC: u32 = 6;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// The NUL-terminated string at `at` in `b`.
fn c_str(b: &[u8], at: usize) -> Option<String> {
    let rest = b.get(at..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

struct Section {
    kind: u32,
    offset: usize,
    size: usize,
    link: usize,
    name: usize,
}

/// Reads the needed libraries and section names of an ELF file's bytes.
pub fn parse(b: &[u8]) -> Result<ElfInfo, NotElf> {
    if b.get(..4) != Some(b"\x7fELF") {
        return Err(NotElf("no ELF magic"));
    }
    if b.get(4) != Some(&2) || b.get(5) != Some(&1) {
        return Err(NotElf("not 64-bit little-endian"));
    }
    let bad = || NotElf("truncated or inconsistent headers");
    let shoff = u64_at(b, 0x28).ok_or_else(bad)? as usize;
    let shentsize = u16_at(b, 0x3a).ok_or_else(bad)? as usize;
    let shnum = u16_at(b, 0x3c).ok_or_else(bad)? as usize;
    let shstrndx = u16_at(b, 0x3e).ok_or_else(bad)? as usize;
    if shnum == 0 {
        return Ok(ElfInfo::default());
    }
    if shentsize < 0x40 {
        return Err(bad());
    }
    let sections = (0..shnum)
        .map(|i| {
            let at = shoff.checked_add(i.checked_mul(shentsize)?)?;
            Some(Section {
                name: u32_at(b, at)? as usize,
                kind: u32_at(b, at + 4)?,
                offset: u64_at(b, at + 0x18)? as usize,
                size: u64_at(b, at + 0x20)? as usize,
                link: u32_at(b, at + 0x28)? as usize,
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(bad)?;
    let mut info = ElfInfo::default();
    if let Some(names) = sections.get(shstrndx) {
        for s in &sections {
            let name = names
                .offset
                .checked_add(s.name)
                .and_then(|at| c_str(b, at))
                .ok_or_else(bad)?;
            info.sections.push(name);
        }
    }
    for dynamic in sections.iter().filter(|s| s.kind == SHT_DYNAMIC) {
        let strtab = sections.get(dynamic.link).ok_or_else(bad)?;
        for i in 0..dynamic.size / 16 {
            let at = dynamic.offset.checked_add(i * 16).ok_or_else(bad)?;
            let tag = u64_at(b, at).ok_or_else(bad)?;
            let val = u64_at(b, at + 8).ok_or_else(bad)? as usize;
            match tag {
                DT_NULL => break,
                DT_NEEDED => {
                    let name = strtab
                        .offset
                        .checked_add(val)
                        .and_then(|at| c_str(b, at))
                        .ok_or_else(bad)?;
                    info.needed.push(name);
                }
                _ => {}
            }
        }
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_test_binary() {
        let exe = std::env::current_exe().unwrap();
        let info = parse(&std::fs::read(exe).unwrap()).unwrap();
        assert!(
            info.needed.iter().any(|n| n.starts_with("libc.so")),
            "{info:?}"
        );
        assert!(info.sections.iter().any(|s| s == ".text"));
        assert!(!info.sections.iter().any(|s| s == ".topo_runtime"));
    }

    #[test]
    fn damaged_files_never_panic() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        // The headers and tables the reader follows are in the first and last few KiB.
        let head = &exe[..exe.len().min(8192)];
        for n in 0..head.len() {
            let _ = parse(&head[..n]);
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut b = exe;
        for _ in 0..1000 {
            // Damage 8 bytes of the headers or of the section table at the end, then repair.
            let mut saved = Vec::new();
            for _ in 0..8 {
                let at = (next() % 256) as usize;
                let at = if next() % 2 == 0 {
                    at
                } else {
                    b.len() - 1 - at * 8
                };
                saved.push((at, b[at]));
                b[at] = next() as u8;
            }
            if let Ok(info) = parse(&b) {
                assert!(
                    info.needed
                        .iter()
                        .chain(&info.sections)
                        .all(|n| n.len() <= b.len())
                );
            }
            for (at, v) in saved.into_iter().rev() {
                b[at] = v;
            }
        }
    }

    #[test]
    fn rejects_what_is_not_elf() {
        assert_eq!(parse(b"#!/bin/sh\n"), Err(NotElf("no ELF magic")));
        assert_eq!(
            parse(b"\x7fELF\x01\x01"),
            Err(NotElf("not 64-bit little-endian"))
        );
        assert!(parse(b"\x7fELF\x02\x01").is_err());
        // Every truncation of a real file is an error or a result, never a panic.
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        for len in [5, 64, 100, 4096, exe.len() / 2] {
            let _ = parse(&exe[..len]);
        }
    }
}
