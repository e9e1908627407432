//! PMIx locality strings (`SK0:L30:L21:L11:CR1:HT1:NM0`): which hardware objects a bound
//! process covers, as logical hwloc indices per object type.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::indexlist::IndexList;

/// A hardware object type that appears in a locality string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    /// `SK`: package (socket).
    Package,
    /// `L3`: level-3 cache.
    L3,
    /// `L2`: level-2 cache.
    L2,
    /// `L1`: level-1 data cache.
    L1,
    /// `CR`: physical core.
    Core,
    /// `HT`: processing unit (hardware thread).
    Pu,
    /// `NM`: NUMA node.
    Numa,
}

impl ObjectKind {
    /// All kinds, in the order OpenPMIx writes them.
    pub const ALL: [ObjectKind; 7] = [
        ObjectKind::Package,
        ObjectKind::L3,
        ObjectKind::L2,
        ObjectKind::L1,
        ObjectKind::Core,
        ObjectKind::Pu,
        ObjectKind::Numa,
    ];

    /// The two-letter code of the PMIx format.
    pub fn code(self) -> &'static str {
        match self {
            ObjectKind::Package => "SK",
            ObjectKind::L3 => "L3",
            ObjectKind::L2 => "L2",
            ObjectKind::L1 => "L1",
            ObjectKind::Core => "CR",
            ObjectKind::Pu => "HT",
            ObjectKind::Numa => "NM",
        }
    }

    fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.code() == code)
    }

    fn slot(self) -> usize {
        self as usize
    }
}

/// A parsed locality string: for each object type, the logical indices the process covers.
///
/// A type can be absent (the server did not report it, or the machine has no such cache).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct LocalityString {
    sets: [Option<IndexList>; 7],
}

impl LocalityString {
    /// An empty locality (no object of any type); add types with [`LocalityString::set`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The indices of `kind` the process covers, if the string mentions `kind`.
    pub fn get(&self, kind: ObjectKind) -> Option<&IndexList> {
        self.sets[kind.slot()].as_ref()
    }

    /// The one object of `kind` the process lies in, or `None` if it covers several or the
    /// type is absent.
    pub fn single(&self, kind: ObjectKind) -> Option<u32> {
        self.get(kind).and_then(IndexList::single)
    }

    /// Sets (or with an empty list, removes) the indices of `kind`.
    pub fn set(&mut self, kind: ObjectKind, list: IndexList) {
        self.sets[kind.slot()] = (!list.is_empty()).then_some(list);
    }

    /// Parses the PMIx format, with or without a `hwloc:` prefix. Tokens may come in any
    /// order; each type may appear once.
    pub fn parse(s: &str) -> Result<Self> {
        let body = s.strip_prefix("hwloc:").unwrap_or(s);
        let bad = |token: &str, reason: &str| Error::Locality {
            string: s.to_string(),
            token: token.to_string(),
            reason: reason.to_string(),
        };
        if body.is_empty() {
            return Err(bad("", "the string is empty"));
        }
        let mut loc = Self::new();
        for token in body.split(':') {
            let Some(code) = token.get(..2) else {
                return Err(bad(
                    token,
                    "expected a type code (SK, L3, L2, L1, CR, HT, NM) followed by indices",
                ));
            };
            let kind = ObjectKind::from_code(code).ok_or_else(|| {
                bad(
                    token,
                    "unknown type code; expected one of SK, L3, L2, L1, CR, HT, NM",
                )
            })?;
            let list = IndexList::parse(&token[2..]).map_err(|e| bad(token, &e.0))?;
            if loc.sets[kind.slot()].is_some() {
                return Err(bad(token, "this type appears twice"));
            }
            loc.sets[kind.slot()] = Some(list);
        }
        Ok(loc)
    }
}

impl FromStr for LocalityString {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// Formats in OpenPMIx's canonical token order, without a prefix.
impl fmt::Display for LocalityString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for kind in ObjectKind::ALL {
            if let Some(list) = self.get(kind) {
                if !first {
                    f.write_str(":")?;
                }
                first = false;
                write!(f, "{}{}", kind.code(), list)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_paper_example() {
        let l = LocalityString::parse("SK1:L31:L218:L118:CR18:NM1").unwrap();
        assert_eq!(l.single(ObjectKind::Package), Some(1));
        assert_eq!(l.single(ObjectKind::L2), Some(18));
        assert_eq!(l.single(ObjectKind::Core), Some(18));
        assert_eq!(l.get(ObjectKind::Pu), None);
        assert_eq!(l.to_string(), "SK1:L31:L218:L118:CR18:NM1");
    }

    #[test]
    fn accepts_prefix_ranges_and_any_order() {
        let l = LocalityString::parse("hwloc:NM0:CR0-7:SK0:L20,2").unwrap();
        assert_eq!(l.single(ObjectKind::Core), None);
        assert_eq!(l.get(ObjectKind::Core).unwrap().len(), 8);
        assert_eq!(l.to_string(), "SK0:L20,2:CR0-7:NM0");
    }

    #[test]
    fn errors_quote_the_bad_token() {
        let cases = [
            ("SK0:XX3", "XX3", "unknown type code"),
            ("SK0:L3", "L3", "empty index list"),
            ("SK0:CRx", "CRx", "not an index"),
            ("SK0:SK1", "SK1", "appears twice"),
            ("SK0::CR1", "", "expected a type code"),
            ("", "", "empty"),
            ("CR3-1", "CR3-1", "backwards"),
        ];
        for (s, token, reason) in cases {
            match LocalityString::parse(s) {
                Err(Error::Locality {
                    token: t,
                    reason: r,
                    ..
                }) => {
                    assert_eq!(t, token, "{s}");
                    assert!(r.contains(reason), "{s}: {r}");
                }
                other => panic!("{s}: {other:?}"),
            }
        }
        let msg = LocalityString::parse("SK0:Q7").unwrap_err().to_string();
        assert!(msg.contains("\"Q7\""), "{msg}");
    }

    #[test]
    fn multibyte_input_is_an_error_not_a_panic() {
        assert!(LocalityString::parse("é0").is_err());
        assert!(LocalityString::parse("SKé").is_err());
    }
}
