//! Which calls take topo-run's path: the predefined datatypes and operations it handles,
//! and the reasons a call is handed to MPI. Pure code, no MPI calls.

pub use topo_runtime::Numeric;

/// The MPI standard's groups of predefined datatypes (MPI-4.0 §6.9.2), which say which
/// predefined operations are defined on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeClass {
    /// C integer types (`MPI_INT`, `MPI_INT32_T`, `MPI_UNSIGNED_CHAR`, ...).
    CInteger,
    /// Fortran integers, and `MPI_AINT`, `MPI_OFFSET`, `MPI_COUNT`.
    FortranInteger,
    /// Floating point (`MPI_FLOAT`, `MPI_DOUBLE`, `MPI_LONG_DOUBLE`, `MPI_REAL`, ...).
    Floating,
    /// Logical (`MPI_C_BOOL`, `MPI_LOGICAL`, `MPI_CXX_BOOL`).
    Logical,
    /// Complex (`MPI_C_DOUBLE_COMPLEX`, `MPI_COMPLEX`, ...).
    Complex,
    /// `MPI_BYTE`.
    Byte,
    /// The value-index pairs of `MPI_MINLOC`/`MPI_MAXLOC` (`MPI_2INT`, `MPI_DOUBLE_INT`, ...).
    Pair,
    /// Any other predefined type (`MPI_CHAR`, `MPI_WCHAR`, `MPI_PACKED`, ...): broadcast
    /// as bytes, never reduced here.
    Other,
}

/// The class of the predefined datatype of standard name `name` (found by its handle,
/// `abi::predefined_name`).
pub fn type_class(name: &str) -> TypeClass {
    use TypeClass::*;
    match name {
        "MPI_INT"
        | "MPI_LONG"
        | "MPI_SHORT"
        | "MPI_UNSIGNED_SHORT"
        | "MPI_UNSIGNED"
        | "MPI_UNSIGNED_INT"
        | "MPI_UNSIGNED_LONG"
        | "MPI_LONG_LONG_INT"
        | "MPI_LONG_LONG"
        | "MPI_UNSIGNED_LONG_LONG"
        | "MPI_SIGNED_CHAR"
        | "MPI_UNSIGNED_CHAR"
        | "MPI_INT8_T"
        | "MPI_INT16_T"
        | "MPI_INT32_T"
        | "MPI_INT64_T"
        | "MPI_UINT8_T"
        | "MPI_UINT16_T"
        | "MPI_UINT32_T"
        | "MPI_UINT64_T" => CInteger,
        "MPI_INTEGER" | "MPI_INTEGER1" | "MPI_INTEGER2" | "MPI_INTEGER4" | "MPI_INTEGER8"
        | "MPI_INTEGER16" | "MPI_AINT" | "MPI_OFFSET" | "MPI_COUNT" => FortranInteger,
        "MPI_FLOAT"
        | "MPI_DOUBLE"
        | "MPI_LONG_DOUBLE"
        | "MPI_REAL"
        | "MPI_DOUBLE_PRECISION"
        | "MPI_REAL2"
        | "MPI_REAL4"
        | "MPI_REAL8"
        | "MPI_REAL16" => Floating,
        "MPI_LOGICAL" | "MPI_C_BOOL" | "MPI_CXX_BOOL" | "MPI_LOGICAL1" | "MPI_LOGICAL2"
        | "MPI_LOGICAL4" | "MPI_LOGICAL8" => Logical,
        "MPI_C_COMPLEX"
        | "MPI_C_FLOAT_COMPLEX"
        | "MPI_C_DOUBLE_COMPLEX"
        | "MPI_C_LONG_DOUBLE_COMPLEX"
        | "MPI_CXX_FLOAT_COMPLEX"
        | "MPI_CXX_DOUBLE_COMPLEX"
        | "MPI_CXX_LONG_DOUBLE_COMPLEX"
        | "MPI_COMPLEX"
        | "MPI_DOUBLE_COMPLEX"
        | "MPI_COMPLEX8"
        | "MPI_COMPLEX16"
        | "MPI_COMPLEX32" => Complex,
        "MPI_BYTE" => Byte,
        "MPI_2INT"
        | "MPI_SHORT_INT"
        | "MPI_LONG_INT"
        | "MPI_FLOAT_INT"
        | "MPI_DOUBLE_INT"
        | "MPI_LONG_DOUBLE_INT"
        | "MPI_2REAL"
        | "MPI_2DOUBLE_PRECISION"
        | "MPI_2INTEGER"
        | "MPI_2COMPLEX"
        | "MPI_2DOUBLE_COMPLEX" => Pair,
        _ => Other,
    }
}

/// What the predefined datatype named `name` holds, for the runtime's Rust reduction
/// kernels (`None`: MPI reduces it, with `PMPI_Reduce_local`). The kernel is chosen by
/// this and the type's size, so `MPI_LONG_DOUBLE` or `MPI_REAL16` (16 bytes) get none.
pub fn numeric(name: &str) -> Option<Numeric> {
    Some(match name {
        "MPI_INT" | "MPI_LONG" | "MPI_SHORT" | "MPI_LONG_LONG_INT" | "MPI_LONG_LONG"
        | "MPI_SIGNED_CHAR" | "MPI_INT8_T" | "MPI_INT16_T" | "MPI_INT32_T" | "MPI_INT64_T"
        | "MPI_INTEGER" | "MPI_INTEGER1" | "MPI_INTEGER2" | "MPI_INTEGER4" | "MPI_INTEGER8"
        | "MPI_AINT" | "MPI_OFFSET" | "MPI_COUNT" => Numeric::Signed,
        "MPI_UNSIGNED_SHORT"
        | "MPI_UNSIGNED"
        | "MPI_UNSIGNED_INT"
        | "MPI_UNSIGNED_LONG"
        | "MPI_UNSIGNED_LONG_LONG"
        | "MPI_UNSIGNED_CHAR"
        | "MPI_UINT8_T"
        | "MPI_UINT16_T"
        | "MPI_UINT32_T"
        | "MPI_UINT64_T" => Numeric::Unsigned,
        "MPI_FLOAT"
        | "MPI_DOUBLE"
        | "MPI_REAL"
        | "MPI_DOUBLE_PRECISION"
        | "MPI_REAL4"
        | "MPI_REAL8" => Numeric::Float,
        _ => return None,
    })
}

/// The predefined operations topo-run reduces with (all commutative). `MPI_MINLOC`,
/// `MPI_MAXLOC`, `MPI_REPLACE`, `MPI_NO_OP` and user operations go to MPI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Max,
    Min,
    Sum,
    Prod,
    Land,
    Band,
    Lor,
    Bor,
    Lxor,
    Bxor,
}

impl OpKind {
    /// All of them, in the order of `OpKind::index`.
    pub const ALL: [OpKind; 10] = [
        OpKind::Max,
        OpKind::Min,
        OpKind::Sum,
        OpKind::Prod,
        OpKind::Land,
        OpKind::Band,
        OpKind::Lor,
        OpKind::Bor,
        OpKind::Lxor,
        OpKind::Bxor,
    ];

    /// Whether the MPI standard defines this operation on `class` (MPI-4.0 §6.9.2). A pair
    /// the standard leaves undefined goes to MPI, which reports the error.
    pub fn defined_on(self, class: TypeClass) -> bool {
        use OpKind::*;
        use TypeClass::*;
        match self {
            Max | Min => matches!(class, CInteger | FortranInteger | Floating),
            Sum | Prod => matches!(class, CInteger | FortranInteger | Floating | Complex),
            Land | Lor | Lxor => matches!(class, CInteger | Logical),
            Band | Bor | Bxor => matches!(class, CInteger | FortranInteger | Byte),
        }
    }
}

/// The collectives the library intercepts, for the statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Bcast,
    Reduce,
    Allreduce,
    Barrier,
    Allgather,
    Gather,
    Scatter,
    Scan,
    Exscan,
    ReduceScatterBlock,
    ReduceScatter,
    Alltoall,
    Alltoallv,
    Allgatherv,
    Gatherv,
    Scatterv,
    Ibcast,
    Ireduce,
    Iallreduce,
    Ibarrier,
    Iallgather,
    Iscan,
    Iexscan,
    Ialltoall,
    Ialltoallv,
    Igather,
    Iscatter,
    Igatherv,
    Iscatterv,
    Iallgatherv,
    IreduceScatterBlock,
    IreduceScatter,
}

impl Call {
    /// All of them, in the order of [`Call::index`].
    pub const ALL: [Call; 32] = [
        Call::Bcast,
        Call::Reduce,
        Call::Allreduce,
        Call::Barrier,
        Call::Allgather,
        Call::Gather,
        Call::Scatter,
        Call::Scan,
        Call::Exscan,
        Call::ReduceScatterBlock,
        Call::ReduceScatter,
        Call::Alltoall,
        Call::Alltoallv,
        Call::Allgatherv,
        Call::Gatherv,
        Call::Scatterv,
        Call::Ibcast,
        Call::Ireduce,
        Call::Iallreduce,
        Call::Ibarrier,
        Call::Iallgather,
        Call::Iscan,
        Call::Iexscan,
        Call::Ialltoall,
        Call::Ialltoallv,
        Call::Igather,
        Call::Iscatter,
        Call::Igatherv,
        Call::Iscatterv,
        Call::Iallgatherv,
        Call::IreduceScatterBlock,
        Call::IreduceScatter,
    ];

    /// The MPI name of the call.
    pub fn name(self) -> &'static str {
        match self {
            Call::Bcast => "MPI_Bcast",
            Call::Reduce => "MPI_Reduce",
            Call::Allreduce => "MPI_Allreduce",
            Call::Barrier => "MPI_Barrier",
            Call::Allgather => "MPI_Allgather",
            Call::Gather => "MPI_Gather",
            Call::Scatter => "MPI_Scatter",
            Call::Scan => "MPI_Scan",
            Call::Exscan => "MPI_Exscan",
            Call::ReduceScatterBlock => "MPI_Reduce_scatter_block",
            Call::ReduceScatter => "MPI_Reduce_scatter",
            Call::Alltoall => "MPI_Alltoall",
            Call::Alltoallv => "MPI_Alltoallv",
            Call::Allgatherv => "MPI_Allgatherv",
            Call::Gatherv => "MPI_Gatherv",
            Call::Scatterv => "MPI_Scatterv",
            Call::Ibcast => "MPI_Ibcast",
            Call::Ireduce => "MPI_Ireduce",
            Call::Iallreduce => "MPI_Iallreduce",
            Call::Ibarrier => "MPI_Ibarrier",
            Call::Iallgather => "MPI_Iallgather",
            Call::Iscan => "MPI_Iscan",
            Call::Iexscan => "MPI_Iexscan",
            Call::Ialltoall => "MPI_Ialltoall",
            Call::Ialltoallv => "MPI_Ialltoallv",
            Call::Igather => "MPI_Igather",
            Call::Iscatter => "MPI_Iscatter",
            Call::Igatherv => "MPI_Igatherv",
            Call::Iscatterv => "MPI_Iscatterv",
            Call::Iallgatherv => "MPI_Iallgatherv",
            Call::IreduceScatterBlock => "MPI_Ireduce_scatter_block",
            Call::IreduceScatter => "MPI_Ireduce_scatter",
        }
    }

    /// Position in [`Call::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Why a call was handed to MPI's own implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandOff {
    /// topo-run's path is off for the whole run (see the run's warning: no plan, no
    /// shared memory, `MPI_THREAD_MULTIPLE`, or switched off).
    Inactive,
    /// The communicator has no topo-run context: it is not `MPI_COMM_WORLD` or a
    /// communicator congruent to it made by `MPI_Comm_dup`, `MPI_Comm_dup_with_info`,
    /// `MPI_Comm_split` or `MPI_Comm_create` (or the context limit was reached).
    Communicator,
    /// A derived datatype, or a predefined one with gaps.
    DerivedDatatype,
    /// A value-index pair type (for `MPI_MINLOC`/`MPI_MAXLOC`).
    PairDatatype,
    /// A user-defined operation, `MPI_MINLOC`, `MPI_MAXLOC`, `MPI_REPLACE` or `MPI_NO_OP`.
    Operation,
    /// A predefined operation the standard does not define on the datatype.
    OpOnDatatype,
    /// A count of zero (nothing moves).
    ZeroCount,
    /// Arguments MPI must check and report (a bad root or count, a null handle or
    /// buffer, `MPI_IN_PLACE` where it is not allowed, overlapping buffers).
    Arguments,
    /// A nonblocking call whose algorithm has no nonblocking form yet (`MPI_Iallgather`
    /// where the blocking call would run the hierarchical Allgather).
    NoSchedule,
    /// More than `INT_MAX` bytes in one broadcast or one Allgather block: what
    /// `MPI_Pack` can count, applied whatever the datatype (see [`signature_bytes`]).
    Large,
    /// An intercommunicator: MPI's own collectives serve it.
    Intercommunicator,
    /// A communicator of one rank: nothing to gain, MPI's own copy.
    OneRank,
    /// A communicator that found no room for a context of its own: `TOPO_RUN_MAX_COMMS`
    /// contexts with a segment alive on a member and no lanes (`TOPO_RUN_LANES=0`), or MPI
    /// out of communicators for the context's own (MPICH allows 2,048 per process).
    NoRoom,
    /// MPI's own collectives were asked for (`topo-run --native`, `TOPO_RUN_NATIVE=1`):
    /// the library is loaded (to profile them) but leaves every call to MPI.
    Native,
}

impl HandOff {
    /// All of them, in the order of [`HandOff::index`].
    pub const ALL: [HandOff; 14] = [
        HandOff::Inactive,
        HandOff::Communicator,
        HandOff::DerivedDatatype,
        HandOff::PairDatatype,
        HandOff::Operation,
        HandOff::OpOnDatatype,
        HandOff::ZeroCount,
        HandOff::Arguments,
        HandOff::NoSchedule,
        HandOff::Large,
        HandOff::Intercommunicator,
        HandOff::OneRank,
        HandOff::NoRoom,
        HandOff::Native,
    ];

    /// Words for the statistics.
    pub fn describe(self) -> &'static str {
        match self {
            HandOff::Inactive => "topo-run inactive",
            HandOff::Communicator => "communicator without a topo-run context",
            HandOff::DerivedDatatype => "derived datatype",
            HandOff::PairDatatype => "MINLOC/MAXLOC pair datatype",
            HandOff::Operation => "user-defined or MINLOC/MAXLOC operation",
            HandOff::OpOnDatatype => "operation undefined on datatype",
            HandOff::ZeroCount => "zero count",
            HandOff::Arguments => "arguments for MPI to check",
            HandOff::NoSchedule => "no nonblocking form of the chosen algorithm",
            HandOff::Large => "over 2 GiB",
            HandOff::Intercommunicator => "intercommunicator",
            HandOff::OneRank => "communicator of one rank",
            HandOff::NoRoom => "no room for another context",
            HandOff::Native => "MPI's own asked for (--native)",
        }
    }

    /// Position in [`HandOff::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The bytes of `count` elements of a datatype whose type signature carries `type_size`
/// bytes (`MPI_Type_size`), if a broadcast or an Allgather block of them takes topo-run's
/// path. Ranks may pass different datatypes with matching signatures (600M `MPI_INT` at
/// the root, one contiguous type of 600M `MPI_INT` elsewhere), and only a signature's
/// byte count is the same on every rank: so this decides on it alone. Derived types are
/// packed, and `MPI_Pack` counts bytes in an `int`: more than `INT_MAX` goes to MPI,
/// whatever the datatype, or a predefined type at one rank and a derived one at another
/// would split the ranks between two paths.
pub fn signature_bytes(count: i32, type_size: usize) -> Result<usize, HandOff> {
    let Ok(count) = u64::try_from(count) else {
        return Err(HandOff::Arguments);
    };
    match count.saturating_mul(type_size as u64) {
        0 => Err(HandOff::ZeroCount),
        n if n > i32::MAX as u64 => Err(HandOff::Large),
        n => Ok(n as usize),
    }
}

/// Whether the byte ranges `[a, a+n)` and `[b, b+n)` overlap.
pub fn overlaps(a: usize, b: usize, n: usize) -> bool {
    overlaps_range(a, n, b, n)
}

/// Whether the byte ranges `[a, a + n)` and `[b, b + m)` overlap.
pub fn overlaps_range(a: usize, n: usize, b: usize, m: usize) -> bool {
    n > 0 && m > 0 && a < b.saturating_add(m) && b < a.saturating_add(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_integers_or_floats_of_their_class() {
        for (name, want) in [
            ("MPI_INT", Some(Numeric::Signed)),
            ("MPI_LONG_LONG", Some(Numeric::Signed)),
            ("MPI_INTEGER8", Some(Numeric::Signed)),
            ("MPI_UNSIGNED_LONG", Some(Numeric::Unsigned)),
            ("MPI_UNSIGNED_CHAR", Some(Numeric::Unsigned)),
            ("MPI_DOUBLE_PRECISION", Some(Numeric::Float)),
            ("MPI_FLOAT", Some(Numeric::Float)),
            ("MPI_LONG_DOUBLE", None),
            ("MPI_C_BOOL", None),
            ("MPI_CHAR", None),
            ("MPI_2INT", None),
        ] {
            assert_eq!(numeric(name), want, "{name}");
            let class = type_class(name);
            match want {
                Some(Numeric::Float) => assert_eq!(class, TypeClass::Floating, "{name}"),
                Some(_) => assert!(
                    matches!(class, TypeClass::CInteger | TypeClass::FortranInteger),
                    "{name}"
                ),
                None => {}
            }
        }
    }

    #[test]
    fn standard_table() {
        assert!(OpKind::Sum.defined_on(type_class("MPI_DOUBLE")));
        assert!(OpKind::Sum.defined_on(type_class("MPI_C_DOUBLE_COMPLEX")));
        assert!(!OpKind::Max.defined_on(type_class("MPI_C_DOUBLE_COMPLEX")));
        assert!(!OpKind::Land.defined_on(type_class("MPI_DOUBLE")));
        assert!(OpKind::Land.defined_on(type_class("MPI_C_BOOL")));
        assert!(OpKind::Land.defined_on(type_class("MPI_INT")));
        assert!(!OpKind::Land.defined_on(type_class("MPI_INTEGER")));
        assert!(OpKind::Bxor.defined_on(type_class("MPI_BYTE")));
        assert!(!OpKind::Sum.defined_on(type_class("MPI_BYTE")));
        assert!(!OpKind::Sum.defined_on(type_class("MPI_CHAR")));
        assert!(!OpKind::Bor.defined_on(type_class("MPI_LOGICAL")));
        for op in OpKind::ALL {
            assert!(!op.defined_on(TypeClass::Pair), "{op:?} on a pair type");
            assert!(!op.defined_on(TypeClass::Other), "{op:?} on another type");
        }
        assert_eq!(type_class("MPI_2INT"), TypeClass::Pair);
        assert_eq!(type_class("MPI_DOUBLE_PRECISION"), TypeClass::Floating);
        assert_eq!(type_class("MPI_AINT"), TypeClass::FortranInteger);
    }

    #[test]
    fn signatures_decide_alike_whatever_the_datatype() {
        // 600M MPI_INT at the root against one contiguous type of 600M MPI_INT: the same
        // decision (MPI's), where a limit on the packed path alone split them.
        let root = signature_bytes(600_000_000, 4);
        let others = signature_bytes(1, 2_400_000_000);
        assert_eq!(root, Err(HandOff::Large));
        assert_eq!(root, others);
        // Up to INT_MAX bytes, both take topo-run's path with the same size.
        assert_eq!(
            signature_bytes(i32::MAX / 4, 4),
            Ok((i32::MAX / 4) as usize * 4)
        );
        assert_eq!(signature_bytes(1, i32::MAX as usize), Ok(i32::MAX as usize));
        assert_eq!(
            signature_bytes(1, i32::MAX as usize + 1),
            Err(HandOff::Large)
        );
        assert_eq!(
            signature_bytes(2, i32::MAX as usize / 2 + 1),
            Err(HandOff::Large)
        );
        assert_eq!(signature_bytes(0, 4), Err(HandOff::ZeroCount));
        assert_eq!(signature_bytes(4, 0), Err(HandOff::ZeroCount));
        assert_eq!(signature_bytes(-1, 4), Err(HandOff::Arguments));
        assert_eq!(signature_bytes(i32::MAX, usize::MAX), Err(HandOff::Large));
    }

    #[test]
    fn overlap() {
        assert!(overlaps(100, 100, 1));
        assert!(overlaps(100, 103, 4));
        assert!(!overlaps(100, 104, 4));
        assert!(!overlaps(104, 100, 4));
        assert!(!overlaps(100, 100, 0));
        assert!(!overlaps(usize::MAX - 2, 0, 4));
        assert!(overlaps_range(0, 8, 4, 8));
        assert!(overlaps_range(4, 8, 0, 8));
        assert!(overlaps_range(0, 8, 7, 1));
        assert!(!overlaps_range(0, 8, 8, 8));
        assert!(!overlaps_range(8, 8, 0, 8));
        assert!(!overlaps_range(0, 0, 0, 8));
        assert!(!overlaps_range(0, 8, 4, 0));
    }

    #[test]
    fn indices_follow_all() {
        for (i, c) in Call::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
        }
        for (i, h) in HandOff::ALL.iter().enumerate() {
            assert_eq!(h.index(), i);
        }
    }
}
