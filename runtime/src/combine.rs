//! How two partial results of a reduction are combined.
//!
//! The algorithms only see bytes; a [`Combine`] knows the element size and the operation.
//! The MPI path uses `MPI_Reduce_local` (every predefined type and operation, and user
//! operations); tests use native Rust closures.

/// A commutative, associative reduction over elements of a fixed size.
pub trait Combine {
    /// Bytes per element; buffers passed to [`Combine::combine`] are whole elements.
    fn elem_size(&self) -> usize;
    /// `acc[i] = acc[i] op incoming[i]` for every element.
    fn combine(&self, acc: &mut [u8], incoming: &[u8]);
    /// Whether [`Combine::combine`] calls MPI (then only threads that MPI allows may
    /// call it).
    fn calls_mpi(&self) -> bool {
        false
    }
}

/// A [`Combine`] from a closure over byte slices, for tests and the sim transport.
pub struct FnCombine<F: Fn(&mut [u8], &[u8])> {
    /// Bytes per element.
    pub elem: usize,
    /// The elementwise operation.
    pub f: F,
}

impl<F: Fn(&mut [u8], &[u8])> std::fmt::Debug for FnCombine<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FnCombine({} bytes)", self.elem)
    }
}

impl<F: Fn(&mut [u8], &[u8])> Combine for FnCombine<F> {
    fn elem_size(&self) -> usize {
        self.elem
    }
    fn combine(&self, acc: &mut [u8], incoming: &[u8]) {
        (self.f)(acc, incoming)
    }
}

/// Wrapping sum of little-endian `i64`s: the reference operation of the tests.
pub fn sum_i64() -> FnCombine<impl Fn(&mut [u8], &[u8])> {
    FnCombine {
        elem: 8,
        f: |acc: &mut [u8], x: &[u8]| {
            for (a, b) in acc.chunks_exact_mut(8).zip(x.chunks_exact(8)) {
                let s = i64::from_le_bytes(a.try_into().unwrap_or_default())
                    .wrapping_add(i64::from_le_bytes(b.try_into().unwrap_or_default()));
                a.copy_from_slice(&s.to_le_bytes());
            }
        },
    }
}
