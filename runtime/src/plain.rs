//! Byte views of the element types the hierarchical path handles, and reductions through
//! `PMPI_Reduce_local`. The only unsafe code outside the shared-memory transport and the
//! nonblocking schedules.

use std::any::TypeId;

use mpi::collective::Operation;
use mpi::datatype::Equivalence;
use mpi::raw::AsRaw;

use crate::combine::Combine;

/// Whether `T` is one of the primitive types rsmpi maps to a predefined MPI datatype
/// (bool, integers, floats). They have no padding and every byte pattern a peer sends
/// for them is one the peer read from a valid value.
pub fn is_plain<T: 'static>() -> bool {
    let t = TypeId::of::<T>();
    [
        TypeId::of::<bool>(),
        TypeId::of::<i8>(),
        TypeId::of::<i16>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<isize>(),
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<f32>(),
        TypeId::of::<f64>(),
    ]
    .contains(&t)
}

/// The bytes of a slice of a plain type.
pub fn bytes<T: 'static>(s: &[T]) -> &[u8] {
    assert!(is_plain::<T>());
    // SAFETY: plain types have no padding, so every byte is initialised; the view borrows
    // `s` and covers exactly its memory.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), std::mem::size_of_val(s)) }
}

/// The bytes of a mutable slice of a plain type.
pub fn bytes_mut<T: 'static>(s: &mut [T]) -> &mut [u8] {
    assert!(is_plain::<T>());
    // SAFETY: as in `bytes`. Writers only store bytes that came from values of the same
    // type on another rank (or results of MPI_Reduce_local over them), so every value
    // stays valid, including `bool`.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), std::mem::size_of_val(s)) }
}

/// An MPI reduction applied locally: the common predefined operations on fixed-size
/// integers and floats in Rust (`kernel`), everything else (other predefined pairs, user
/// operations) with `PMPI_Reduce_local`. (The profiling entry point, so that a PMPI
/// library that loads this crate never re-enters itself.)
#[derive(Debug, Clone, Copy)]
pub struct MpiCombine {
    datatype: mpi::ffi::MPI_Datatype,
    op: mpi::ffi::MPI_Op,
    elem: usize,
    kernel: Option<Kernel>,
}

/// `acc[i] = acc[i] op incoming[i]` over whole elements, in Rust.
type Kernel = fn(&mut [u8], &[u8]);

/// A Rust kernel for `op` over `T`, elementwise on native-endian bytes.
///
/// On x86-64 the loop is compiled twice: for the baseline instruction set and for AVX2,
/// which the kernel takes when the processor has it (std caches the detection, so the
/// check is one load). Each element is still one operation on two values, so both give
/// the same bits; AVX2 halves the time of an 8 KiB fragment in cache (0.56 against
/// 0.28 us for an `f64` sum, docs/runtime.md), where the baseline build uses SSE2 only.
macro_rules! kernel {
    ($t:ty, $f:expr) => {{
        #[inline(always)]
        fn body(acc: &mut [u8], x: &[u8]) {
            const N: usize = std::mem::size_of::<$t>();
            let f: fn($t, $t) -> $t = $f;
            for (a, b) in acc.chunks_exact_mut(N).zip(x.chunks_exact(N)) {
                let p = <$t>::from_ne_bytes(a.try_into().unwrap_or_default());
                let q = <$t>::from_ne_bytes(b.try_into().unwrap_or_default());
                a.copy_from_slice(&f(p, q).to_ne_bytes());
            }
        }
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        fn body_avx2(acc: &mut [u8], x: &[u8]) {
            body(acc, x)
        }
        fn k(acc: &mut [u8], x: &[u8]) {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the processor has AVX2, checked just above.
                return unsafe { body_avx2(acc, x) };
            }
            body(acc, x)
        }
        Some(k as Kernel)
    }};
}

/// The kernels of one integer type: every arithmetic, logical and bitwise operation MPI
/// predefines for it, with MPI's results (wrapping arithmetic, 0 or 1 for the logical
/// ones).
macro_rules! int_kernel {
    ($t:ty, $op:expr) => {{
        use mpi::ffi::*;
        let op = $op;
        // SAFETY: reading constant MPI handles.
        unsafe {
            if op == RSMPI_SUM {
                kernel!($t, |a, b| a.wrapping_add(b))
            } else if op == RSMPI_PROD {
                kernel!($t, |a, b| a.wrapping_mul(b))
            } else if op == RSMPI_MIN {
                kernel!($t, |a, b| a.min(b))
            } else if op == RSMPI_MAX {
                kernel!($t, |a, b| a.max(b))
            } else if op == RSMPI_BAND {
                kernel!($t, |a, b| a & b)
            } else if op == RSMPI_BOR {
                kernel!($t, |a, b| a | b)
            } else if op == RSMPI_BXOR {
                kernel!($t, |a, b| a ^ b)
            } else if op == RSMPI_LAND {
                kernel!($t, |a, b| <$t>::from(a != 0 && b != 0))
            } else if op == RSMPI_LOR {
                kernel!($t, |a, b| <$t>::from(a != 0 || b != 0))
            } else if op == RSMPI_LXOR {
                kernel!($t, |a, b| <$t>::from((a != 0) != (b != 0)))
            } else {
                None
            }
        }
    }};
}

/// The kernels of one float type: sum and product, which give the same bits as MPI's
/// (one IEEE operation per element). Minimum and maximum stay with MPI, whose handling of
/// NaN they would have to copy.
macro_rules! float_kernel {
    ($t:ty, $op:expr) => {{
        use mpi::ffi::*;
        let op = $op;
        // SAFETY: reading constant MPI handles.
        unsafe {
            if op == RSMPI_SUM {
                kernel!($t, |a, b| a + b)
            } else if op == RSMPI_PROD {
                kernel!($t, |a, b| a * b)
            } else {
                None
            }
        }
    }};
}

/// What the fixed-size predefined `datatype` holds and its size, if it is one that has
/// Rust kernels.
fn numeric_of(datatype: mpi::ffi::MPI_Datatype) -> Option<(Numeric, usize)> {
    use Numeric::*;
    use mpi::ffi::*;
    // SAFETY: reading constant MPI handles.
    let table = unsafe {
        [
            (RSMPI_INT8_T, Signed, 1),
            (RSMPI_INT16_T, Signed, 2),
            (RSMPI_INT32_T, Signed, 4),
            (RSMPI_INT64_T, Signed, 8),
            (RSMPI_UINT8_T, Unsigned, 1),
            (RSMPI_UINT16_T, Unsigned, 2),
            (RSMPI_UINT32_T, Unsigned, 4),
            (RSMPI_UINT64_T, Unsigned, 8),
            (RSMPI_FLOAT, Float, 4),
            (RSMPI_DOUBLE, Float, 8),
        ]
    };
    table
        .iter()
        .find(|(t, ..)| *t == datatype)
        .map(|&(_, n, size)| (n, size))
}

/// The Rust kernel for `op` on `numeric` numbers of `size` bytes, if there is one.
fn kernel(numeric: Numeric, size: usize, op: mpi::ffi::MPI_Op) -> Option<Kernel> {
    match (numeric, size) {
        (Numeric::Signed, 1) => int_kernel!(i8, op),
        (Numeric::Signed, 2) => int_kernel!(i16, op),
        (Numeric::Signed, 4) => int_kernel!(i32, op),
        (Numeric::Signed, 8) => int_kernel!(i64, op),
        (Numeric::Unsigned, 1) => int_kernel!(u8, op),
        (Numeric::Unsigned, 2) => int_kernel!(u16, op),
        (Numeric::Unsigned, 4) => int_kernel!(u32, op),
        (Numeric::Unsigned, 8) => int_kernel!(u64, op),
        (Numeric::Float, 4) => float_kernel!(f32, op),
        (Numeric::Float, 8) => float_kernel!(f64, op),
        _ => None,
    }
}

impl MpiCombine {
    /// The reduction `op` over elements of `T`.
    pub fn new<T: Equivalence + 'static, O: Operation>(op: &O) -> Self {
        let (datatype, op) = (T::equivalent_datatype().as_raw(), op.as_raw());
        MpiCombine {
            datatype,
            op,
            elem: std::mem::size_of::<T>(),
            kernel: numeric_of(datatype).and_then(|(n, size)| kernel(n, size, op)),
        }
    }

    /// [`MpiCombine::new`], taken from `last` when that is the same pair: the search for
    /// the kernel costs more than a small collective's own work. Only reductions with a
    /// Rust kernel are kept there (a predefined operation on a predefined type, whose
    /// handles never change meaning); a user's operation is looked at anew each call,
    /// since a freed handle may come back as another operation.
    pub fn reuse<T: Equivalence + 'static, O: Operation>(
        op: &O,
        last: &mut Option<MpiCombine>,
    ) -> Self {
        let (datatype, raw) = (T::equivalent_datatype().as_raw(), op.as_raw());
        if let Some(c) = *last
            && c.datatype == datatype
            && c.op == raw
            && c.elem == std::mem::size_of::<T>()
        {
            return c;
        }
        let c = MpiCombine::new::<T, O>(op);
        if c.is_native() {
            *last = Some(c);
        }
        c
    }

    /// The reduction `op` over elements of `datatype`, from raw MPI handles (for callers
    /// that receive them through the C ABI, such as the PMPI library).
    ///
    /// # Safety
    ///
    /// `datatype` and `op` must be valid MPI handles for as long as the value is used,
    /// `op` must be defined on `datatype`, `datatype` must be contiguous without gaps, and
    /// `elem` must be its size in bytes (non-zero).
    pub unsafe fn from_raw(
        datatype: mpi::ffi::MPI_Datatype,
        op: mpi::ffi::MPI_Op,
        elem: usize,
    ) -> Self {
        // SAFETY: the caller's contract is this function's.
        unsafe { Self::from_raw_numeric(datatype, op, elem, None) }
    }

    /// Like [`MpiCombine::from_raw`], for a datatype known to hold `numeric` numbers of
    /// `elem` bytes (say `MPI_INT` or `MPI_UNSIGNED_LONG`, which are not the fixed-size
    /// handles the Rust kernels are found by): it gets the kernel of the fixed-size type
    /// of that kind and size.
    ///
    /// # Safety
    ///
    /// As [`MpiCombine::from_raw`], and `datatype` must hold `numeric` numbers: two's
    /// complement integers, unsigned integers or IEEE floats of `elem` bytes.
    pub unsafe fn from_raw_numeric(
        datatype: mpi::ffi::MPI_Datatype,
        op: mpi::ffi::MPI_Op,
        elem: usize,
        numeric: Option<Numeric>,
    ) -> Self {
        let kind = numeric
            .map(|n| (n, elem))
            .or_else(|| numeric_of(datatype))
            .filter(|&(_, size)| size == elem);
        MpiCombine {
            datatype,
            op,
            elem,
            kernel: kind.and_then(|(n, size)| kernel(n, size, op)),
        }
    }
}

/// What a predefined datatype holds, as far as the Rust kernels care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numeric {
    /// Two's complement integers.
    Signed,
    /// Unsigned integers.
    Unsigned,
    /// IEEE floating point.
    Float,
}

impl Combine for MpiCombine {
    fn elem_size(&self) -> usize {
        self.elem
    }

    fn calls_mpi(&self) -> bool {
        self.kernel.is_none()
    }

    fn combine(&self, acc: &mut [u8], incoming: &[u8]) {
        debug_assert_eq!(acc.len(), incoming.len());
        if let Some(k) = self.kernel {
            return k(acc, incoming);
        }
        // MPI counts are `int`: larger buffers are combined in pieces of whole elements.
        let piece = (MAX_COUNT / self.elem).max(1) * self.elem;
        for (acc, incoming) in acc.chunks_mut(piece).zip(incoming.chunks(piece)) {
            let count = (acc.len() / self.elem) as i32;
            // SAFETY: both pieces hold `count` (at most `MAX_COUNT`) elements of
            // `datatype`; MPI reads `incoming` and updates `acc` in place; they do not
            // overlap (distinct borrows).
            unsafe {
                mpi::ffi::PMPI_Reduce_local(
                    incoming.as_ptr().cast(),
                    acc.as_mut_ptr().cast(),
                    count,
                    self.datatype,
                    self.op,
                );
            }
        }
    }
}

impl MpiCombine {
    /// Whether the operation runs in Rust, without calling MPI.
    pub fn is_native(&self) -> bool {
        self.kernel.is_some()
    }
}

/// Whether `op` commutes. Every predefined operation does, and is known here without
/// asking MPI (rsmpi's `Operation::is_commutative` calls `MPI_Op_commutative`, on every
/// reduction); a user's operation is asked.
pub(crate) fn commutes<O: Operation>(op: &O) -> bool {
    let raw = op.as_raw();
    // SAFETY: reading constant MPI handles.
    let predefined = unsafe {
        use mpi::ffi::*;
        [
            RSMPI_MAX, RSMPI_MIN, RSMPI_SUM, RSMPI_PROD, RSMPI_LAND, RSMPI_BAND, RSMPI_LOR,
            RSMPI_BOR, RSMPI_LXOR, RSMPI_BXOR,
        ]
    };
    predefined.contains(&raw) || op.is_commutative()
}

/// The largest element count passed to one MPI call (`INT_MAX`).
pub(crate) const MAX_COUNT: usize = i32::MAX as usize;

#[cfg(test)]
mod tests {
    use super::*;
    use mpi::collective::SystemOperation;

    fn run<T: Equivalence + 'static>(op: SystemOperation, acc: &mut [T], x: &[T]) -> bool {
        let c = MpiCombine::new::<T, _>(&op);
        if !c.is_native() {
            return false;
        }
        let x = bytes(x).to_vec();
        c.combine(bytes_mut(acc), &x);
        true
    }

    /// Unit tests run without MPI initialised, where `MPI_Op_commutative` would abort: the
    /// predefined operations must be known without it.
    #[test]
    fn predefined_operations_commute_without_asking_mpi() {
        for op in [
            SystemOperation::max(),
            SystemOperation::min(),
            SystemOperation::sum(),
            SystemOperation::product(),
            SystemOperation::logical_and(),
            SystemOperation::bitwise_and(),
            SystemOperation::logical_or(),
            SystemOperation::bitwise_or(),
            SystemOperation::logical_xor(),
            SystemOperation::bitwise_xor(),
        ] {
            assert!(commutes(&op));
        }
    }

    /// Long buffers, so that the vector loop of the kernels (AVX2 where the processor has
    /// it) and its scalar tail both run: every element as one scalar operation gives.
    #[test]
    fn vector_kernels_match_scalar_operations() {
        const N: usize = 1027;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let x: Vec<u64> = (0..N).map(|_| next()).collect();
        let y: Vec<u64> = (0..N).map(|_| next()).collect();

        /// The kernel of `op` gives, element by element, the bytes of `f`.
        fn same_as_scalar<T: Equivalence + Copy + 'static>(
            op: SystemOperation,
            x: &[T],
            y: &[T],
            f: fn(T, T) -> T,
        ) {
            let mut acc = x.to_vec();
            assert!(run(op, &mut acc, y));
            let want: Vec<T> = x.iter().zip(y).map(|(&a, &b)| f(a, b)).collect();
            assert_eq!(bytes(&acc), bytes(&want));
        }
        let f64s = |v: &[u64], k: f64| v.iter().map(|&v| (v as i64) as f64 * k).collect::<Vec<_>>();
        same_as_scalar(
            SystemOperation::sum(),
            &f64s(&x, 1e-7),
            &f64s(&y, 3e-9),
            |a, b| a + b,
        );
        let f32s = |v: &[u64], k: f32| v.iter().map(|&v| (v as i32) as f32 * k).collect::<Vec<_>>();
        same_as_scalar(
            SystemOperation::product(),
            &f32s(&x, 1e-3),
            &f32s(&y, 1e-6),
            |a, b| a * b,
        );
        let i32s = |v: &[u64]| v.iter().map(|&v| v as i32).collect::<Vec<_>>();
        same_as_scalar(
            SystemOperation::product(),
            &i32s(&x),
            &i32s(&y),
            i32::wrapping_mul,
        );
        let i64s = |v: &[u64]| v.iter().map(|&v| v as i64).collect::<Vec<_>>();
        same_as_scalar(SystemOperation::max(), &i64s(&x), &i64s(&y), i64::max);
        let u8s = |v: &[u64]| v.iter().map(|&v| v as u8).collect::<Vec<_>>();
        same_as_scalar(SystemOperation::sum(), &u8s(&x), &u8s(&y), u8::wrapping_add);
    }

    #[test]
    fn a_reused_reduction_is_the_one_asked_for() {
        let mut last = None;
        let combine = |c: MpiCombine, a: &mut [u8], b: &[u8]| c.combine(a, b);
        let (sum, max) = (SystemOperation::sum(), SystemOperation::max());
        let c = MpiCombine::reuse::<i64, _>(&sum, &mut last);
        assert!(last.is_some());
        let mut a = 5i64.to_ne_bytes();
        combine(c, &mut a, &7i64.to_ne_bytes());
        assert_eq!(i64::from_ne_bytes(a), 12);
        // Another operation, then another type of the same size: each gets its kernel.
        let c = MpiCombine::reuse::<i64, _>(&max, &mut last);
        let mut a = 5i64.to_ne_bytes();
        combine(c, &mut a, &7i64.to_ne_bytes());
        assert_eq!(i64::from_ne_bytes(a), 7);
        let c = MpiCombine::reuse::<f64, _>(&sum, &mut last);
        let mut a = 0.5f64.to_ne_bytes();
        combine(c, &mut a, &(-1.5f64).to_ne_bytes());
        assert_eq!(f64::from_ne_bytes(a), -1.0);
        // A pair without a Rust kernel (MPI would combine it) is not kept.
        assert!(!MpiCombine::reuse::<f64, _>(&max, &mut last).is_native());
        let kept = last.expect("kept");
        assert_eq!((kept.datatype, kept.op), (c.datatype, c.op));
        // The same pair again comes from `last`.
        let again = MpiCombine::reuse::<f64, _>(&sum, &mut last);
        let mut a = 0.5f64.to_ne_bytes();
        combine(again, &mut a, &2.5f64.to_ne_bytes());
        assert_eq!(f64::from_ne_bytes(a), 3.0);
    }

    #[test]
    fn rust_kernels_give_mpis_results() {
        let mut a = [i32::MAX, -5, 7, 0];
        assert!(run(SystemOperation::sum(), &mut a, &[1, 2, -7, 0]));
        assert_eq!(a, [i32::MIN, -3, 0, 0]);
        let mut a = [3u8, 0, 250];
        assert!(run(SystemOperation::product(), &mut a, &[5, 9, 2]));
        assert_eq!(a, [15, 0, 244]);
        let mut a = [-3i64, 9];
        assert!(run(SystemOperation::min(), &mut a, &[4, -9]));
        assert_eq!(a, [-3, -9]);
        let mut a = [1u16, 9];
        assert!(run(SystemOperation::max(), &mut a, &[4, 2]));
        assert_eq!(a, [4, 9]);
        let mut a = [0b1100u32, 0b1100, 0b1100];
        assert!(run(SystemOperation::bitwise_and(), &mut a[..1], &[0b1010]));
        assert!(run(SystemOperation::bitwise_or(), &mut a[1..2], &[0b1010]));
        assert!(run(SystemOperation::bitwise_xor(), &mut a[2..], &[0b1010]));
        assert_eq!(a, [0b1000, 0b1110, 0b0110]);
        let mut a = [0i8, 3, 3, 0];
        assert!(run(SystemOperation::logical_and(), &mut a[..2], &[5, 5]));
        assert!(run(SystemOperation::logical_or(), &mut a[2..], &[0, 0]));
        assert_eq!(a, [0, 1, 1, 0]);
        let mut a = [0u64, 7];
        assert!(run(SystemOperation::logical_xor(), &mut a, &[2, 2]));
        assert_eq!(a, [1, 0]);
        let mut f = [0.1f64, 1e308, -0.0];
        assert!(run(SystemOperation::sum(), &mut f, &[0.2, 1e308, 0.0]));
        assert_eq!(f[0].to_bits(), (0.1f64 + 0.2).to_bits());
        assert!(f[1].is_infinite() && f[2] == 0.0 && f[2].is_sign_positive());
        let mut g = [1.5f32, 2.0];
        assert!(run(SystemOperation::product(), &mut g, &[2.0, 0.25]));
        assert_eq!(g, [3.0, 0.5]);
        // Float minimum and maximum, and bool, stay with MPI.
        assert!(!run(SystemOperation::min(), &mut [1.0f64], &[0.0]));
        assert!(!run(SystemOperation::max(), &mut [1.0f32], &[0.0]));
        assert!(!run(SystemOperation::logical_and(), &mut [true], &[false]));
        // A raw handle whose element size does not match the type gets no kernel.
        // SAFETY: the combine is never applied.
        let odd = unsafe { MpiCombine::from_raw(mpi::ffi::RSMPI_INT32_T, mpi::ffi::RSMPI_SUM, 8) };
        assert!(!odd.is_native() && odd.calls_mpi());
        // A handle known only by what it holds (as the PMPI library knows MPI_INT) gets
        // the kernel of the fixed-size type of its kind and size; sizes without one do not.
        // SAFETY: the handles are predefined; the combine is applied to bytes only.
        let like = unsafe {
            MpiCombine::from_raw_numeric(
                mpi::ffi::RSMPI_C_BOOL,
                mpi::ffi::RSMPI_SUM,
                1,
                Some(Numeric::Unsigned),
            )
        };
        assert!(like.is_native());
        let mut acc = [250u8, 1];
        like.combine(&mut acc, &[10, 2]);
        assert_eq!(acc, [4, 3]);
        // SAFETY: never applied.
        let wide = unsafe {
            MpiCombine::from_raw_numeric(
                mpi::ffi::RSMPI_DOUBLE,
                mpi::ffi::RSMPI_SUM,
                16,
                Some(Numeric::Float),
            )
        };
        assert!(!wide.is_native());
    }
}
