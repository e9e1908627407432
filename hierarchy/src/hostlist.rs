//! Slurm hostlist expressions: `node[01-16,20]`, `rack[1-2]-n[01-04]`, `a,b[1-3]`.
//!
//! Expansion follows Slurm: bracket groups multiply out left to right (the leftmost varies
//! slowest), a range is zero-padded to the width of its lower bound, and top-level commas
//! separate items. Compression keeps the order of the names, so
//! `expand(&compress(names)) == names` for any valid list.

use crate::error::{Error, Result};

/// Most names one expression may expand to; protects against `n[0-4000000000]`.
pub const MAX_HOSTS: usize = 1 << 24;

/// Most bytes of names one expression may expand to (long names multiplied out by large
/// ranges), so that an expression of a few hundred characters cannot take gigabytes.
pub const MAX_HOST_BYTES: usize = 256 << 20;

/// Expands a hostlist expression into host names, in order.
pub fn expand(expr: &str) -> Result<Vec<String>> {
    let mut hosts = Vec::new();
    walk(expr, Some(&mut hosts))?;
    Ok(hosts)
}

/// The number of names `expr` expands to, without expanding it (the same checks as
/// [`expand`]).
pub fn count(expr: &str) -> Result<usize> {
    walk(expr, None)
}

/// Checks `expr` and counts its names, expanding them into `out` if given.
fn walk(expr: &str, mut out: Option<&mut Vec<String>>) -> Result<usize> {
    let bad = |reason: String| Error::Hostlist {
        expr: expr.to_string(),
        reason,
    };
    // Names so far, and an upper bound of their bytes.
    let (mut names, mut bytes) = (0usize, 0usize);
    for item in split_top_level(expr).map_err(&bad)? {
        let item = item.trim();
        if item.is_empty() {
            if expr.trim().is_empty() {
                return Err(bad("the expression is empty".into()));
            }
            return Err(bad("empty item between commas".into()));
        }
        expand_item(item, out.as_deref_mut(), &mut names, &mut bytes).map_err(&bad)?;
    }
    Ok(names)
}

fn split_top_level(expr: &str) -> std::result::Result<Vec<&str>, String> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0u32, 0usize);
    for (i, c) in expr.char_indices() {
        match c {
            '[' if depth > 0 => return Err(format!("nested '[' at byte {i}")),
            '[' => depth = 1,
            ']' if depth == 0 => return Err(format!("']' without '[' at byte {i}")),
            ']' => depth = 0,
            ',' if depth == 0 => {
                items.push(&expr[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err("'[' is never closed".into());
    }
    items.push(&expr[start..]);
    Ok(items)
}

/// One bracket's ranges: (lo, hi, width).
type Ranges = Vec<(u64, u64, usize)>;

fn expand_item(
    item: &str,
    out: Option<&mut Vec<String>>,
    names: &mut usize,
    bytes: &mut usize,
) -> std::result::Result<(), String> {
    // Split into literal text and bracket groups: lit0 [g0] lit1 [g1] ... litN.
    let mut literals = Vec::new();
    let mut groups: Vec<Ranges> = Vec::new();
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        literals.push(&rest[..open]);
        let close = rest[open..].find(']').ok_or("'[' is never closed")? + open;
        groups.push(parse_ranges(&rest[open + 1..close])?);
        rest = &rest[close + 1..];
    }
    literals.push(rest);
    for lit in &literals {
        if let Some(c) = lit.chars().find(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("host names cannot contain {c:?}"));
        }
    }
    let count = groups.iter().try_fold(1usize, |acc, g| {
        let n: u64 = g.iter().map(|&(lo, hi, _)| hi - lo + 1).sum();
        acc.checked_mul(usize::try_from(n).ok()?)
            .filter(|&t| t.saturating_add(*names) <= MAX_HOSTS)
    });
    let Some(count) = count else {
        return Err(format!("expands to more than {MAX_HOSTS} hosts"));
    };
    // The longest name: every literal, and each group's widest number.
    let longest = literals.iter().map(|l| l.len()).sum::<usize>()
        + groups
            .iter()
            .map(|g| {
                g.iter()
                    .map(|&(_, hi, w)| w.max(hi.to_string().len()))
                    .max()
                    .unwrap_or(0)
            })
            .sum::<usize>();
    match count
        .checked_mul(longest)
        .and_then(|b| b.checked_add(*bytes))
        .filter(|&b| b <= MAX_HOST_BYTES)
    {
        Some(b) => *bytes = b,
        None => {
            return Err(format!(
                "expands to more than {} MiB of host names",
                MAX_HOST_BYTES >> 20
            ));
        }
    }
    *names += count;
    if let Some(out) = out {
        let mut name = String::new();
        product(&literals, &groups, 0, &mut name, out);
    }
    Ok(())
}

fn product(
    literals: &[&str],
    groups: &[Ranges],
    k: usize,
    name: &mut String,
    out: &mut Vec<String>,
) {
    let base = name.len();
    name.push_str(literals[k]);
    if k == groups.len() {
        out.push(name.clone());
    } else {
        let len = name.len();
        for &(lo, hi, width) in &groups[k] {
            for n in lo..=hi {
                use std::fmt::Write;
                let _ = write!(name, "{n:0width$}");
                product(literals, groups, k + 1, name, out);
                name.truncate(len);
            }
        }
    }
    name.truncate(base);
}

fn parse_ranges(body: &str) -> std::result::Result<Ranges, String> {
    if body.is_empty() {
        return Err("empty brackets".into());
    }
    let number = |s: &str| -> std::result::Result<u64, String> {
        if s.is_empty() || s.len() > 18 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{s:?} is not a number in a bracket range"));
        }
        s.parse::<u64>().map_err(|e| e.to_string())
    };
    body.split(',')
        .map(|piece| match piece.split_once('-') {
            Some((lo_s, hi_s)) => {
                let (lo, hi) = (number(lo_s)?, number(hi_s)?);
                if lo > hi {
                    return Err(format!("range {piece:?} runs backwards"));
                }
                Ok((lo, hi, lo_s.len()))
            }
            None => Ok((number(piece)?, number(piece)?, piece.len())),
        })
        .collect()
}

/// Compresses host names into one hostlist expression, keeping their order.
///
/// Consecutive names that share a prefix and end in numbers of compatible width share one
/// bracket, and runs of consecutive numbers become ranges: `node01..node16,node20` gives
/// `node[01-16,20]`. Names without a trailing number are written as they are.
pub fn compress<S: AsRef<str>>(names: &[S]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < names.len() {
        let name = names[i].as_ref();
        let Some((prefix, _)) = split_number(name) else {
            out.push(name.to_string());
            i += 1;
            continue;
        };
        // Collect the ranges of this bracket while names share the prefix.
        let mut pieces: Vec<String> = Vec::new();
        let mut j = i;
        while j < names.len() {
            let Some((p, d)) = split_number(names[j].as_ref()) else {
                break;
            };
            if p != prefix {
                break;
            }
            // Extend a run lo..hi while each next name is the previous number + 1 written at
            // the width of lo.
            let width = d.len();
            let Ok(lo) = d.parse::<u64>() else { break };
            let mut hi = lo;
            let mut k = j + 1;
            while k < names.len() {
                match split_number(names[k].as_ref()) {
                    Some((p2, d2))
                        if p2 == prefix && hi < u64::MAX && d2 == format!("{:0width$}", hi + 1) =>
                    {
                        hi += 1;
                        k += 1;
                    }
                    _ => break,
                }
            }
            pieces.push(if hi == lo {
                d.to_string()
            } else {
                format!("{d}-{}", format_args!("{hi:0width$}"))
            });
            j = k;
        }
        if j == i {
            // The number did not fit in u64: keep the name literal.
            out.push(name.to_string());
            i += 1;
            continue;
        }
        if pieces.len() == 1 && !pieces[0].contains('-') {
            out.push(format!("{prefix}{}", pieces[0]));
        } else {
            out.push(format!("{prefix}[{}]", pieces.join(",")));
        }
        i = j;
    }
    out.join(",")
}

/// Splits `node017` into (`node`, `017`). Names with no trailing digits give `None`.
fn split_number(name: &str) -> Option<(&str, &str)> {
    let cut = name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if cut == name.len() || name.len() - cut > 18 {
        None
    } else {
        Some((&name[..cut], &name[cut..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(s: &str) -> Vec<String> {
        expand(s).unwrap()
    }

    #[test]
    fn long_names_multiplied_out_are_refused_before_they_take_memory() {
        // The fuzzer's out-of-memory input: about 4.4 million names of some 130 bytes.
        // The target reads its bytes as text up to the first byte that is not UTF-8.
        let raw: &[u8] = include_bytes!("../tests/data/hostlist-oom.bin");
        let crash = raw.utf8_chunks().next().unwrap().valid();
        let e = expand(crash).unwrap_err().to_string();
        assert!(e.contains("MiB of host names"), "{e}");
        let long = format!("{}[0-9999]-[0-999]", "x".repeat(64));
        assert!(expand(&long).unwrap_err().to_string().contains("MiB"));
        // Counting checks the same without expanding.
        assert!(count(crash).is_err());
        assert_eq!(count("a,b[1-3],c[01-10]-[1-2]").unwrap(), 24);
        // Real lists stay well within: a million nodes of 20-byte names.
        assert_eq!(
            expand("rack[0000-0999]-node[0000-0999]").unwrap().len(),
            1_000_000
        );
    }

    #[test]
    fn expands_slurm_examples() {
        assert_eq!(
            ex("node[01-03,20]"),
            ["node01", "node02", "node03", "node20"]
        );
        assert_eq!(
            ex("rack[1-2]-n[01-02]"),
            ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]
        );
        assert_eq!(ex("a,b[1-2],c"), ["a", "b1", "b2", "c"]);
        assert_eq!(ex("n[8-10]"), ["n8", "n9", "n10"]);
        assert_eq!(ex("n[098-100]"), ["n098", "n099", "n100"]);
        assert_eq!(ex("tux[0-3,12]"), ["tux0", "tux1", "tux2", "tux3", "tux12"]);
        assert_eq!(ex("single"), ["single"]);
        assert_eq!(ex("n[1-16]").len(), 16);
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "n[1-",
            "n]1",
            "n[]",
            "n[a-b]",
            "n[3-1]",
            "n[[1]]",
            "a,,b",
            "n[1-2",
            "n [1]",
            "n[0-99999999999]",
        ] {
            assert!(expand(bad).is_err(), "{bad:?} should fail");
        }
        let msg = expand("n[5-2]").unwrap_err().to_string();
        assert!(msg.contains("n[5-2]") && msg.contains("backwards"), "{msg}");
    }

    #[test]
    fn compresses() {
        let names = ex("node[01-16,20]");
        assert_eq!(compress(&names), "node[01-16,20]");
        assert_eq!(compress(&["a", "b1", "b2", "c"]), "a,b[1-2],c");
        assert_eq!(compress(&["n9", "n10", "n11"]), "n[9-11]");
        assert_eq!(compress(&["n1", "n01"]), "n[1,01]");
        assert_eq!(compress(&["n3", "n1", "n2"]), "n[3,1-2]");
        assert_eq!(compress(&["x5"]), "x5");
        assert_eq!(compress::<&str>(&[]), "");
        assert_eq!(
            compress(&ex("rack[1-2]-n[01-02]")),
            "rack1-n[01-02],rack2-n[01-02]"
        );
    }
}
