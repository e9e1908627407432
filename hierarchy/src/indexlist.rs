//! Sets of small non-negative integers in hwloc's list syntax (`0-7`, `0,2,4`, `0-3,8-11`).
//!
//! Stored as sorted, disjoint, non-adjacent inclusive ranges, so that `0-4294967295` costs
//! two words, not sixteen gigabytes.

use std::fmt;

/// A set of indices, as found after a locality token (`CR0-7`) or in a CPU list.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct IndexList {
    ranges: Vec<(u32, u32)>,
}

/// Why an index list did not parse; the caller adds the context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexListError(pub String);

impl IndexList {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a set from arbitrary indices (any order, duplicates allowed).
    pub fn from_indices(indices: impl IntoIterator<Item = u32>) -> Self {
        let mut v: Vec<u32> = indices.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        let mut list = Self::new();
        for i in v {
            list.push_range(i, i);
        }
        list
    }

    /// The set `lo..=hi`.
    pub fn from_range(lo: u32, hi: u32) -> Self {
        let mut list = Self::new();
        list.push_range(lo.min(hi), hi.max(lo));
        list
    }

    /// Appends `lo..=hi`, which must lie above every index already present.
    fn push_range(&mut self, lo: u32, hi: u32) {
        if let Some(last) = self.ranges.last_mut()
            && last.1.checked_add(1) == Some(lo)
        {
            last.1 = hi;
            return;
        }
        self.ranges.push((lo, hi));
    }

    /// Parses hwloc list syntax: comma-separated indices and `lo-hi` ranges, ascending or not.
    pub fn parse(s: &str) -> Result<Self, IndexListError> {
        if s.is_empty() {
            return Err(IndexListError("empty index list".into()));
        }
        let mut ranges = Vec::new();
        for item in s.split(',') {
            let (lo, hi) = match item.split_once('-') {
                Some((lo, hi)) => (parse_index(lo)?, parse_index(hi)?),
                None => {
                    let i = parse_index(item)?;
                    (i, i)
                }
            };
            if lo > hi {
                return Err(IndexListError(format!("range {item:?} runs backwards")));
            }
            ranges.push((lo, hi));
        }
        ranges.sort_unstable();
        let mut list = Self::new();
        for (lo, hi) in ranges {
            match list.ranges.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => list.ranges.push((lo, hi)),
            }
        }
        Ok(list)
    }

    /// The only index of a one-element set.
    pub fn single(&self) -> Option<u32> {
        match self.ranges.as_slice() {
            [(lo, hi)] if lo == hi => Some(*lo),
            _ => None,
        }
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of indices in the set.
    pub fn len(&self) -> u64 {
        self.ranges
            .iter()
            .map(|&(lo, hi)| u64::from(hi - lo) + 1)
            .sum()
    }

    /// Whether `i` is in the set.
    pub fn contains(&self, i: u32) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= i && i <= hi)
    }

    /// The indices in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|&(lo, hi)| lo..=hi)
    }

    /// The inclusive ranges, ascending and non-adjacent.
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }
}

fn parse_index(s: &str) -> Result<u32, IndexListError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(IndexListError(format!("{s:?} is not an index")));
    }
    s.parse()
        .map_err(|_| IndexListError(format!("index {s} is too large")))
}

impl fmt::Display for IndexList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, &(lo, hi)) in self.ranges.iter().enumerate() {
            if n > 0 {
                f.write_str(",")?;
            }
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_ranges() {
        let l = IndexList::parse("0-3,8,5,4").unwrap();
        assert_eq!(l.to_string(), "0-5,8");
        assert_eq!(l.len(), 7);
        assert_eq!(l.single(), None);
        assert_eq!(IndexList::parse("7").unwrap().single(), Some(7));
        assert_eq!(IndexList::parse("0,2,4").unwrap().to_string(), "0,2,4");
        assert_eq!(IndexList::parse("0-4294967295").unwrap().len(), 1 << 32);
    }

    #[test]
    fn rejects_bad_lists() {
        for bad in ["", "a", "1-", "-1", "3-1", "1,,2", "4294967296", "+1", "1 "] {
            assert!(IndexList::parse(bad).is_err(), "{bad:?} should fail");
        }
    }

    #[test]
    fn from_indices_merges() {
        let l = IndexList::from_indices([5, 1, 2, 3, 5, 9]);
        assert_eq!(l.to_string(), "1-3,5,9");
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![1, 2, 3, 5, 9]);
    }
}
