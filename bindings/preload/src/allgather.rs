//! `MPI_Allgather` on topo-run's path.
//!
//! MPI lets the ranks of one Allgather pass different datatypes as long as the type
//! signatures match (and a rank's send signature match its receive block's). Whether a
//! call takes topo-run's path therefore rests on what every rank sees alike: the
//! communicator and the bytes of one receive block (`recvcount` times the size of
//! `recvtype`, its signature's size). How each rank moves its bytes is its own affair: a
//! gap-free predefined type is used in place, anything else is packed (`PMPI_Pack`)
//! before and unpacked (`PMPI_Unpack`) after, outside the library's lock.

use std::ffi::c_void;
use std::os::raw::c_int;

use mpi::ffi;

use crate::abi::{self, MPI_Comm, MPI_Datatype, SUCCESS, TypeInfo};
use crate::classify::{Call, HandOff, TypeClass};
use crate::state::{self, Lookup};

/// A type used as it is: predefined, without gaps (the value-index pairs have gaps).
fn direct_size(look: &mut Lookup<'_>, dt: MPI_Datatype) -> Option<usize> {
    match look.datatype(dt) {
        TypeInfo::Plain { size, class, .. } if class != TypeClass::Pair => Some(size),
        _ => None,
    }
}

/// The bytes `count` elements of `dt` carry (their signature's size).
fn signature_bytes(count: c_int, dt: MPI_Datatype) -> Result<usize, HandOff> {
    let mut size: c_int = 0;
    // SAFETY: `dt` is the application's handle; MPI validates it and writes one int.
    let rc = unsafe { ffi::PMPI_Type_size(dt, &mut size) };
    if rc != SUCCESS || size < 0 || count < 0 {
        return Err(HandOff::Arguments);
    }
    match size as u64 * count as u64 {
        0 => Err(HandOff::ZeroCount),
        // MPI_Pack and MPI_Unpack count in ints.
        n if n > c_int::MAX as u64 => Err(HandOff::DerivedDatatype),
        n => Ok(n as usize),
    }
}

/// The extent of `dt` (the stride between consecutive elements).
fn extent(dt: MPI_Datatype) -> Result<isize, HandOff> {
    let (mut lb, mut ext) = (0, 0);
    // SAFETY: `dt` is the application's handle; MPI writes two address-sized ints.
    let rc = unsafe { ffi::PMPI_Type_get_extent(dt, &mut lb, &mut ext) };
    if rc != SUCCESS {
        return Err(HandOff::Arguments);
    }
    Ok(ext)
}

/// Packs `count` elements of `dt` at `buf`, which must carry `n` bytes.
///
/// # Safety
/// `buf` holds `count` elements of `dt`.
unsafe fn pack(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    n: usize,
    comm: MPI_Comm,
) -> Result<Vec<u8>, HandOff> {
    let mut out = vec![0u8; n];
    let mut pos: c_int = 0;
    // SAFETY: per the contract; `out` has room for the `n` bytes.
    let rc = unsafe {
        ffi::PMPI_Pack(
            buf,
            count,
            dt,
            out.as_mut_ptr().cast(),
            n as c_int,
            &mut pos,
            comm,
        )
    };
    // Not committed, or a signature of another size: MPI reports it.
    if rc != SUCCESS || pos as usize != n {
        return Err(HandOff::Arguments);
    }
    Ok(out)
}

/// A gathered result still to be unpacked into the application's buffer.
pub(crate) struct Unpack {
    bytes: Vec<u8>,
    block: usize,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    stride: isize,
    comm: MPI_Comm,
}

impl Unpack {
    /// Unpacks every rank's block to its place. Returns MPI's code (an error also goes to
    /// the communicator's error handler).
    pub(crate) fn finish(self) -> c_int {
        for (r, block) in self.bytes.chunks_exact(self.block).enumerate() {
            let mut pos: c_int = 0;
            // SAFETY: block r of the receive buffer holds `count` elements of `dt` at
            // `r * count * extent` bytes from its start (the MPI layout of an Allgather's
            // receive buffer); `block` holds their packed bytes.
            let rc = unsafe {
                ffi::PMPI_Unpack(
                    block.as_ptr().cast(),
                    self.block as c_int,
                    &mut pos,
                    self.recv
                        .cast::<u8>()
                        .wrapping_offset(r as isize * self.stride)
                        .cast(),
                    self.count,
                    self.dt,
                    self.comm,
                )
            };
            if rc != SUCCESS {
                // SAFETY: the Allgather's communicator.
                unsafe { ffi::PMPI_Comm_call_errhandler(self.comm, rc) };
                return rc;
            }
        }
        SUCCESS
    }
}

/// `MPI_Allgather`: `Some(code)` when done on topo-run's path, `None` for MPI.
///
/// # Safety
/// The arguments are those of an `MPI_Allgather` call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn allgather(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
) -> Option<c_int> {
    let mut unpack = None;
    state::run(Call::Allgather, comm, |a, look| {
        // What every rank agrees on: the bytes of one block.
        let block = signature_bytes(recv_count, recv_type)?;
        let size = a.size as usize;
        let total = block.checked_mul(size).ok_or(HandOff::Arguments)?;
        let in_place = send == abi::in_place();
        // A null buffer, or MPI_BOTTOM with a predefined type, is erroneous: MPI reports
        // it. (MPI_BOTTOM with a derived type of absolute addresses is packed like any.)
        let bad = |p: *const c_void, direct: bool| {
            p.is_null() || p == abi::in_place() || (direct && p == abi::bottom())
        };
        let recv_direct = direct_size(look, recv_type).is_some();
        if bad(recv.cast_const(), recv_direct)
            || (!in_place && bad(send, direct_size(look, send_type).is_some()))
        {
            return Err(HandOff::Arguments);
        }
        if !recv_direct && !look.committed(recv_type) {
            return Err(HandOff::Arguments);
        }
        // This rank's block, unless it is in place in a directly used receive buffer.
        let own: Option<Vec<u8>> = if in_place {
            if recv_direct {
                None
            } else {
                let at = a.rank as isize * recv_count as isize * extent(recv_type)?;
                // SAFETY: block `rank` of the receive buffer holds this rank's elements.
                Some(unsafe {
                    pack(
                        recv.cast::<u8>().wrapping_offset(at).cast(),
                        recv_count,
                        recv_type,
                        block,
                        comm,
                    )
                }?)
            }
        } else {
            match direct_size(look, send_type) {
                Some(s) if s as u64 * send_count.max(0) as u64 == block as u64 => {
                    // Buffers that overlap are erroneous, but handing the call to MPI on
                    // this rank alone would split the ranks between two paths: copy.
                    let (s, r) = (send as usize, recv as usize);
                    let overlap = s < r.saturating_add(total) && r < s.saturating_add(block);
                    // SAFETY: the send buffer holds `block` bytes.
                    overlap.then(|| {
                        unsafe { std::slice::from_raw_parts(send.cast::<u8>(), block) }.to_vec()
                    })
                }
                // SAFETY: the send buffer holds `send_count` elements of `send_type`.
                _ => Some(unsafe { pack(send, send_count, send_type, block, comm) }?),
            }
        };
        // SAFETY: a send buffer used directly holds `block` bytes (checked above).
        let direct_send = || unsafe { std::slice::from_raw_parts(send.cast::<u8>(), block) };
        let send_bytes: Option<&[u8]> = match (&own, in_place) {
            (Some(v), _) => Some(v),
            (None, true) => None,
            (None, false) => Some(direct_send()),
        };
        if recv_direct {
            // SAFETY: the receive buffer holds `size` blocks of `block` bytes.
            let out = unsafe { std::slice::from_raw_parts_mut(recv.cast::<u8>(), total) };
            return if a.topo.raw_all_gather(send_bytes, out) {
                Ok(())
            } else {
                Err(HandOff::Inactive)
            };
        }
        // Everything that can fail is asked before the collective runs.
        let stride = recv_count as isize * extent(recv_type)?;
        let mut bytes = vec![0u8; total];
        let own = send_bytes.expect("a packed receive side packs this rank's block");
        if !a.topo.raw_all_gather(Some(own), &mut bytes) {
            return Err(HandOff::Inactive);
        }
        unpack = Some(Unpack {
            bytes,
            block,
            recv,
            count: recv_count,
            dt: recv_type,
            stride,
            comm,
        });
        Ok(())
    })?;
    // Unpacked outside the library's lock.
    Some(unpack.map_or(SUCCESS, Unpack::finish))
}
