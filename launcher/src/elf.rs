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

/// The most bytes read for one table (the section headers, the section-name table, a
/// dynamic section): real programs need a few KiB; a damaged file cannot make the reader
/// allocate more.
const MAX_TABLE: u64 = 1 << 20;
/// The longest name kept (a longer one is cut there).
const MAX_NAME: u64 = 4096;

/// Where the reader takes its bytes from: a file, read at the offsets the headers give
/// (never whole), or bytes in memory.
pub trait ReadAt {
    /// Fills `buf` from offset `at`; false if the source ends first or cannot be read.
    fn read_at(&mut self, at: u64, buf: &mut [u8]) -> bool;
}

impl ReadAt for &[u8] {
    fn read_at(&mut self, at: u64, buf: &mut [u8]) -> bool {
        let Ok(at) = usize::try_from(at) else {
            return false;
        };
        match at.checked_add(buf.len()).and_then(|end| self.get(at..end)) {
            Some(src) => {
                buf.copy_from_slice(src);
                true
            }
            None => false,
        }
    }
}

impl ReadAt for std::fs::File {
    fn read_at(&mut self, at: u64, buf: &mut [u8]) -> bool {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, at).is_ok()
    }
}

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

/// The NUL-terminated string at `at` in `b` (at most [`MAX_NAME`] bytes of it).
fn c_str(b: &[u8], at: usize) -> Option<String> {
    let rest = b.get(at..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    let keep = end.min(MAX_NAME as usize);
    Some(String::from_utf8_lossy(&rest[..keep]).into_owned())
}

/// `len` bytes at `at` of `src`, if `len` is at most [`MAX_TABLE`].
fn table(src: &mut dyn ReadAt, at: u64, len: u64) -> Option<Vec<u8>> {
    if len > MAX_TABLE {
        return None;
    }
    let mut buf = vec![0u8; len as usize];
    src.read_at(at, &mut buf).then_some(buf)
}

/// The NUL-terminated string at `at` of a string table that ends at `end`.
fn string_at(src: &mut dyn ReadAt, at: u64, end: u64) -> Option<String> {
    let len = end.checked_sub(at)?.min(MAX_NAME + 1);
    let mut buf = vec![0u8; len as usize];
    if !src.read_at(at, &mut buf) {
        return None;
    }
    if !buf.contains(&0) {
        // Longer than MAX_NAME, or not terminated inside its table.
        if len <= MAX_NAME {
            return None;
        }
        buf.push(0);
    }
    c_str(&buf, 0)
}

struct Section {
    kind: u32,
    offset: u64,
    size: u64,
    link: usize,
    name: usize,
}

impl Section {
    fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.size)
    }
}

/// Reads the needed libraries and section names of an ELF file's bytes (the fuzz target's
/// and the tests' entry).
#[cfg_attr(not(test), allow(dead_code))]
pub fn parse(mut b: &[u8]) -> Result<ElfInfo, NotElf> {
    read(&mut b)
}

/// Reads the needed libraries and section names of an ELF file, looking only at the
/// headers and tables they live in (a few KiB, whatever the size of the file).
pub fn read(src: &mut dyn ReadAt) -> Result<ElfInfo, NotElf> {
    let mut ident = [0u8; 6];
    if !src.read_at(0, &mut ident[..4]) || ident[..4] != *b"\x7fELF" {
        return Err(NotElf("no ELF magic"));
    }
    if !src.read_at(0, &mut ident) || ident[4] != 2 || ident[5] != 1 {
        return Err(NotElf("not 64-bit little-endian"));
    }
    let bad = || NotElf("truncated or inconsistent headers");
    let mut h = [0u8; 0x40];
    if !src.read_at(0, &mut h) {
        return Err(bad());
    }
    let shoff = u64_at(&h, 0x28).ok_or_else(bad)?;
    let shentsize = u16_at(&h, 0x3a).ok_or_else(bad)? as usize;
    let shnum = u16_at(&h, 0x3c).ok_or_else(bad)? as usize;
    let shstrndx = u16_at(&h, 0x3e).ok_or_else(bad)? as usize;
    if shnum == 0 {
        return Ok(ElfInfo::default());
    }
    if shentsize < 0x40 {
        return Err(bad());
    }
    let headers = table(src, shoff, (shnum * shentsize) as u64).ok_or_else(bad)?;
    let sections = (0..shnum)
        .map(|i| {
            let at = i * shentsize;
            Some(Section {
                name: u32_at(&headers, at)? as usize,
                kind: u32_at(&headers, at + 4)?,
                offset: u64_at(&headers, at + 0x18)?,
                size: u64_at(&headers, at + 0x20)?,
                link: u32_at(&headers, at + 0x28)? as usize,
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(bad)?;
    let mut info = ElfInfo::default();
    if let Some(names) = sections.get(shstrndx) {
        let names = table(src, names.offset, names.size).ok_or_else(bad)?;
        for s in &sections {
            info.sections.push(c_str(&names, s.name).ok_or_else(bad)?);
        }
    }
    for dynamic in sections.iter().filter(|s| s.kind == SHT_DYNAMIC) {
        let strtab = sections.get(dynamic.link).ok_or_else(bad)?;
        let str_end = strtab.end().ok_or_else(bad)?;
        let entries = table(src, dynamic.offset, dynamic.size / 16 * 16).ok_or_else(bad)?;
        for e in entries.chunks_exact(16) {
            let tag = u64_at(e, 0).ok_or_else(bad)?;
            let val = u64_at(e, 8).ok_or_else(bad)?;
            match tag {
                DT_NULL => break,
                DT_NEEDED => {
                    let name = strtab
                        .offset
                        .checked_add(val)
                        .and_then(|at| string_at(src, at, str_end))
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
                        .all(|n| n.chars().count() <= b.len())
                );
            }
            for (at, v) in saved.into_iter().rev() {
                b[at] = v;
            }
        }
    }

    /// Counts the bytes a read takes from a file.
    struct Counting(std::fs::File, u64);

    impl ReadAt for Counting {
        fn read_at(&mut self, at: u64, buf: &mut [u8]) -> bool {
            self.1 += buf.len() as u64;
            self.0.read_at(at, buf)
        }
    }

    #[test]
    fn a_file_is_read_at_its_headers_only() {
        let exe = std::env::current_exe().unwrap();
        let len = std::fs::metadata(&exe).unwrap().len();
        let mut f = Counting(std::fs::File::open(&exe).unwrap(), 0);
        let info = read(&mut f).unwrap();
        assert_eq!(info, parse(&std::fs::read(&exe).unwrap()).unwrap());
        // The test binary has megabytes of code and debug information.
        assert!(
            f.1 < 64 << 10 && f.1 * 50 < len,
            "read {} of {len} bytes",
            f.1
        );
    }

    #[test]
    fn damaged_sizes_and_names_stay_bounded() {
        // The crash the fuzzer found: names of 0xff bytes (each one character, three bytes
        // of UTF-8) and a section table far beyond the file.
        let crash: &[u8] = include_bytes!("../tests/data/elf-crash-names.bin");
        if let Ok(info) = parse(crash) {
            for n in info.needed.iter().chain(&info.sections) {
                assert!(n.chars().count() <= crash.len());
            }
        }
        // A name longer than MAX_NAME is cut; a huge table is refused without allocating.
        let long = [vec![b'x'; 10_000], vec![0]].concat();
        assert_eq!(c_str(&long, 0).unwrap().len(), MAX_NAME as usize);
        let mut empty: &[u8] = &[];
        assert!(table(&mut empty, 0, u64::MAX).is_none());
        assert!(string_at(&mut long.as_slice(), 0, long.len() as u64).is_some());
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
