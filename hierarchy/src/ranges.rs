//! Compact rank lists: `0-17`, `0,18`, `0-1279872:128` (first-last:stride).

use std::fmt::Write;

/// Writes ascending `members` compactly: runs of three or more with a constant step become
/// `a-b` (step 1) or `a-b:s`.
pub fn encode(members: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < members.len() {
        if !out.is_empty() {
            out.push(',');
        }
        let a = members[i];
        let mut j = i;
        if i + 2 < members.len() {
            let step = members[i + 1] - a;
            while j + 1 < members.len() && members[j + 1] - members[j] == step {
                j += 1;
            }
            if j - i >= 2 {
                let b = members[j];
                let _ = if step == 1 {
                    write!(out, "{a}-{b}")
                } else {
                    write!(out, "{a}-{b}:{step}")
                };
                i = j + 1;
                continue;
            }
        }
        let _ = write!(out, "{a}");
        i += 1;
    }
    out
}

/// Reads a list written by [`encode`] (or any list of `a`, `a-b`, `a-b:s` items), checking
/// that the result is strictly ascending and has at most `limit` entries.
pub fn decode(text: &str, limit: usize) -> Result<Vec<u32>, String> {
    let num = |s: &str| -> Result<u32, String> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{s:?} is not a rank"));
        }
        s.parse().map_err(|_| format!("rank {s} is out of range"))
    };
    let mut out: Vec<u32> = Vec::new();
    for item in text.split(',') {
        let (range, step) = match item.split_once(':') {
            Some((r, s)) => (r, num(s)?),
            None => (item, 1),
        };
        let (a, b) = match range.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None if step == 1 && !item.contains(':') => (num(range)?, num(range)?),
            None => return Err(format!("{item:?}: a stride needs a range")),
        };
        if step == 0 || b < a || (b - a) % step != 0 {
            return Err(format!("{item:?} is not a valid first-last:stride range"));
        }
        let count = ((b - a) / step) as usize + 1;
        if out.len() + count > limit {
            return Err(format!("more than {limit} ranks in one list"));
        }
        if out.last().is_some_and(|&l| l >= a) {
            return Err(format!("{item:?}: ranks must be strictly ascending"));
        }
        out.extend((0..count as u32).map(|k| a + k * step));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples() {
        assert_eq!(encode(&(0..18).collect::<Vec<_>>()), "0-17");
        assert_eq!(encode(&[0, 18]), "0,18");
        assert_eq!(encode(&[0, 128, 256, 384]), "0-384:128");
        assert_eq!(encode(&[1, 2, 3, 7, 9, 11, 12]), "1-3,7-11:2,12");
        assert_eq!(encode(&[]), "");
        assert_eq!(decode("0-384:128", 100).unwrap(), vec![0, 128, 256, 384]);
        for bad in [
            "", "a", "3-1", "0-5:0", "0-5:2", "5,1", "1,1", "0:4", "1-2-3", "0-99", "-1",
        ] {
            assert!(decode(bad, 50).is_err(), "{bad:?}");
        }
    }
}
