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

/// An MPI reduction applied locally with `PMPI_Reduce_local`: every predefined operation
/// on its predefined types, and user operations. (The profiling entry point, so that a
/// PMPI library that loads this crate never re-enters itself.)
#[derive(Debug)]
pub struct MpiCombine {
    datatype: mpi::ffi::MPI_Datatype,
    op: mpi::ffi::MPI_Op,
    elem: usize,
}

impl MpiCombine {
    /// The reduction `op` over elements of `T`.
    pub fn new<T: Equivalence + 'static, O: Operation>(op: &O) -> Self {
        MpiCombine {
            datatype: T::equivalent_datatype().as_raw(),
            op: op.as_raw(),
            elem: std::mem::size_of::<T>(),
        }
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
        MpiCombine { datatype, op, elem }
    }
}

impl Combine for MpiCombine {
    fn elem_size(&self) -> usize {
        self.elem
    }

    fn combine(&self, acc: &mut [u8], incoming: &[u8]) {
        debug_assert_eq!(acc.len(), incoming.len());
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

/// The largest element count passed to one MPI call (`INT_MAX`).
pub(crate) const MAX_COUNT: usize = i32::MAX as usize;
