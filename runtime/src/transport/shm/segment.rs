//! The node's shared-memory segment: creation by the node leader, attachment by the other
//! local ranks, and the mapping's lifetime. All unsafe memory access of the shared-memory
//! transport goes through [`Segment`]'s accessors.

use std::num::NonZeroUsize;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg, OFlag, open, posix_fallocate};
use nix::sys::mman::{MapFlags, ProtFlags, mmap, munmap};
use nix::sys::stat::{Mode, fstat};
use nix::unistd::{ftruncate, unlink};

use super::layout::{Layout, MAGIC, header};
use crate::error::{Error, Result};

const NO_SPACE_HINT: &str = "; /dev/shm is too small for the queues: enlarge it (mount -o remount,size=...), \
     or lower TOPO_RUN_SLOTS / TOPO_RUN_FRAGMENT";

/// A mapped segment.
#[derive(Debug)]
pub struct Segment {
    base: NonNull<u8>,
    layout: Layout,
    path: String,
    /// Held with a shared lock while mapped: a segment whose lock can be taken
    /// exclusively has no live user, and only then may another launch remove its name.
    fd: Flock<OwnedFd>,
}

// SAFETY: the mapping is plain shared memory; all concurrent access goes through atomics
// or through the queue protocol (one writer per slot, readers only after the writer's
// Release store), so the handle may move between threads.
unsafe impl Send for Segment {}

// SAFETY: `&Segment` gives out only atomics and the `unsafe` byte accessors, whose callers
// uphold the queue protocol (one writer per slot, readers after its Release store) whether
// the ranks are processes or threads sharing one mapping: the node's lanes are one mapping
// per process, used by the contexts of several threads (`transport::shm::lanes`).
unsafe impl Sync for Segment {}

fn shm_err(path: &str, action: &'static str, source: Errno) -> Error {
    let hint = match source {
        Errno::ENOSPC | Errno::ENOMEM => NO_SPACE_HINT,
        Errno::EACCES | Errno::EPERM => "; another user owns a segment of this name",
        Errno::ENOENT => "; is /dev/shm (or TOPO_RUN_SHM_DIR) mounted?",
        _ => "",
    };
    Error::Shm {
        path: path.to_string(),
        action,
        source,
        hint,
    }
}

/// Whether some live process has the segment at `path` mapped (holds its lock). A name
/// that disappears meanwhile is not in use.
fn in_use(path: &str) -> bool {
    let Ok(fd) = open(path, OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()) else {
        return false;
    };
    // Dropping the lock (if taken) releases it at once.
    matches!(
        Flock::lock(fd, FlockArg::LockExclusiveNonblock),
        Err((_, Errno::EWOULDBLOCK))
    )
}

impl Segment {
    /// Creates the segment (node leader): exclusive, mode 0600, header reserved and
    /// written, magic published last. It is built under a temporary name and published
    /// with `link`, already locked, so a segment of the final name is either complete and
    /// in use, or left by a process that died. Such a stale segment is removed first; one
    /// still in use (another launch that chose the same name) is an error, never removed.
    /// `node_plan` is the digest of the node's intra-node groups in this rank's plan
    /// ([`topo_hierarchy::RankPlan::node_plan`]), which every attaching rank must share.
    pub fn create(path: &str, layout: Layout, node_plan: u64) -> Result<Self> {
        let flags = OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC;
        let mode = Mode::from_bits_truncate(0o600);
        let tmp = format!("{path}.{}.new", std::process::id());
        let fd = match open(tmp.as_str(), flags, mode) {
            // Left by a dead process of this PID: this process is the only one using it.
            Err(Errno::EEXIST) => {
                let _ = unlink(tmp.as_str());
                open(tmp.as_str(), flags, mode)
            }
            r => r,
        }
        .map_err(|e| shm_err(path, "creating", e))?;
        let seg = (|| {
            let fd = Flock::lock(fd, FlockArg::LockShared)
                .map_err(|(_, e)| shm_err(path, "locking", e))?;
            ftruncate(&*fd, layout.total() as i64).map_err(|e| shm_err(path, "sizing", e))?;
            posix_fallocate(&*fd, 0, layout.header_len() as i64)
                .map_err(|e| shm_err(path, "reserving the header", e))?;
            Self::map(path, layout, fd)
        })();
        let seg = match seg {
            Ok(s) => s,
            Err(e) => {
                let _ = unlink(tmp.as_str());
                return Err(e);
            }
        };
        seg.store_u32(header::RANKS, layout.ranks as u32);
        seg.store_u32(header::SLOTS, layout.slots as u32);
        seg.store_u32(header::FRAGMENT, layout.fragment as u32);
        seg.store_u64(header::TOTAL, layout.total() as u64);
        seg.store_u64(header::NODE_PLAN, node_plan);
        // SYNC: Release publishes the header fields; attach() reads MAGIC with Acquire.
        seg.atomic_u64(header::MAGIC)
            .store(MAGIC, Ordering::Release);
        let published = Self::publish(&tmp, path);
        let _ = unlink(tmp.as_str());
        published.map(|()| seg)
    }

    /// Gives the segment built at `tmp` its final name `path`, removing a stale segment
    /// of that name first.
    fn publish(tmp: &str, path: &str) -> Result<()> {
        for _ in 0..3 {
            match std::fs::hard_link(tmp, path) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if in_use(path) {
                        return Err(Error::ShmInUse { path: path.into() });
                    }
                    match unlink(path) {
                        Ok(()) | Err(Errno::ENOENT) => {}
                        Err(e) => return Err(shm_err(path, "removing a stale segment", e)),
                    }
                }
                Err(e) => {
                    let errno = Errno::from_raw(e.raw_os_error().unwrap_or(0));
                    return Err(shm_err(path, "creating", errno));
                }
            }
        }
        Err(Error::ShmInUse { path: path.into() })
    }

    /// Attaches to the segment the leader created, checking that it has this job's layout
    /// and that the leader's plan of the node's intra-node groups is this rank's.
    pub fn attach(path: &str, layout: Layout, node_plan: u64) -> Result<Self> {
        let fd = open(path, OFlag::O_RDWR | OFlag::O_CLOEXEC, Mode::empty())
            .map_err(|e| shm_err(path, "opening", e))?;
        let fd =
            Flock::lock(fd, FlockArg::LockShared).map_err(|(_, e)| shm_err(path, "locking", e))?;
        let size = fstat(&*fd).map_err(|e| shm_err(path, "stat", e))?.st_size;
        if size as usize != layout.total() {
            return Err(Error::ShmLayout {
                path: path.into(),
                reason: format!("it has {size} bytes, this job expects {}", layout.total()),
            });
        }
        let seg = Self::map(path, layout, fd)?;
        // SYNC: Acquire pairs with the creator's Release store of MAGIC.
        let magic = seg.atomic_u64(header::MAGIC).load(Ordering::Acquire);
        let fields = (
            seg.load_u32(header::RANKS),
            seg.load_u32(header::SLOTS),
            seg.load_u32(header::FRAGMENT),
        );
        let want = (
            layout.ranks as u32,
            layout.slots as u32,
            layout.fragment as u32,
        );
        if magic != MAGIC || fields != want {
            return Err(Error::ShmLayout {
                path: path.into(),
                reason: format!(
                    "it is not this job's segment (ranks, slots, fragment = {fields:?}, expected {want:?})"
                ),
            });
        }
        let theirs = seg.load_u64(header::NODE_PLAN);
        if theirs != node_plan {
            return Err(Error::NodePlans {
                path: path.into(),
                mine: node_plan,
                theirs,
            });
        }
        Ok(seg)
    }

    fn map(path: &str, layout: Layout, fd: Flock<OwnedFd>) -> Result<Self> {
        let len = NonZeroUsize::new(layout.total()).unwrap_or(NonZeroUsize::MIN);
        // SAFETY: a fresh shared mapping of a file we hold open; no Rust object aliases it.
        let base = unsafe {
            mmap(
                None,
                len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                &*fd,
                0,
            )
        }
        .map_err(|e| shm_err(path, "mapping", e))?;
        Ok(Segment {
            base: base.cast(),
            layout,
            path: path.to_string(),
            fd,
        })
    }

    /// Reserves local rank `r`'s queue from this process, so that its pages come from
    /// this rank's NUMA node (first touch), and records this process's PID and mapping
    /// address.
    pub fn reserve_queue(&self, r: usize) -> Result<()> {
        let q = self.layout.queue(r);
        posix_fallocate(&*self.fd, q.start as i64, q.len() as i64)
            .map_err(|e| shm_err(&self.path, "reserving a queue", e))?;
        // SAFETY: the range lies inside the mapping, is reserved (so touching it cannot
        // SIGBUS), and no other rank uses queue `r` before the attach barrier.
        unsafe { std::ptr::write_bytes(self.base.as_ptr().add(q.start), 0, q.len()) };
        // SYNC: Relaxed; peers read PIDs only after the MPI barrier that ends attachment.
        self.atomic_i32(self.layout.pid(r))
            .store(std::process::id() as i32, Ordering::Relaxed);
        self.store_u64(self.layout.base(r), self.base.as_ptr() as u64);
        Ok(())
    }

    /// Removes the segment's name. Mappings stay valid until dropped.
    pub fn unlink(&self) -> Result<()> {
        unlink(self.path.as_str()).map_err(|e| self.unlink_error(e))
    }

    /// The error of an [`Segment::unlink`] that failed with `e`.
    pub(crate) fn unlink_error(&self, e: Errno) -> Error {
        Error::Shm {
            path: self.path.clone(),
            action: "removing the name",
            source: e,
            hint: "; the next launch on this node removes it (or topo-run doctor --remove-leftovers)",
        }
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The path (for messages).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The PID of local rank `r` (0 before it attached).
    pub fn pid(&self, r: usize) -> i32 {
        self.atomic_i32(self.layout.pid(r)).load(Ordering::Relaxed)
    }

    /// Where local rank `r` mapped the segment in its own address space (0 before it
    /// attached).
    pub fn base_of(&self, r: usize) -> u64 {
        self.atomic_u64(self.layout.base(r)).load(Ordering::Relaxed)
    }

    /// The control word at `offset` (from [`Layout::control`]).
    pub fn atomic_u64(&self, offset: usize) -> &AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.layout.total());
        // SAFETY: in bounds and 8-aligned (the mapping is page-aligned); shared memory is
        // only ever accessed atomically at control-word offsets.
        unsafe { &*self.base.as_ptr().add(offset).cast::<AtomicU64>() }
    }

    /// Asks the processor to start bringing the cache line at `offset` into this core's
    /// cache. A hint only: it changes nothing that any load or store sees.
    pub fn prefetch(&self, offset: usize) {
        assert!(offset < self.layout.total());
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the address is inside the mapping (checked above); a prefetch reads no
        // value into the program and never faults. SSE, which has it, is part of x86-64.
        unsafe {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            _mm_prefetch::<_MM_HINT_T0>(self.base.as_ptr().add(offset).cast());
        }
    }

    fn atomic_i32(&self, offset: usize) -> &AtomicI32 {
        assert!(offset.is_multiple_of(4) && offset + 4 <= self.layout.total());
        // SAFETY: as for atomic_u64.
        unsafe { &*self.base.as_ptr().add(offset).cast::<AtomicI32>() }
    }

    fn store_u32(&self, offset: usize, v: u32) {
        self.atomic_i32(offset).store(v as i32, Ordering::Relaxed);
    }

    fn load_u32(&self, offset: usize) -> u32 {
        self.atomic_i32(offset).load(Ordering::Relaxed) as u32
    }

    fn load_u64(&self, offset: usize) -> u64 {
        self.atomic_u64(offset).load(Ordering::Relaxed)
    }

    fn store_u64(&self, offset: usize, v: u64) {
        self.atomic_u64(offset).store(v, Ordering::Relaxed);
    }

    /// Copies `src` into the segment at `offset`.
    ///
    /// # Safety
    /// The caller owns the destination bytes under the queue protocol: no other process
    /// reads or writes them until the caller publishes them with a Release store.
    pub unsafe fn write(&self, offset: usize, src: &[u8]) {
        assert!(offset + src.len() <= self.layout.total());
        // SAFETY: in bounds; exclusivity is the caller's contract.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.as_ptr().add(offset), src.len())
        };
    }

    /// A view of `len` bytes at `offset`.
    ///
    /// # Safety
    /// As for [`Segment::read`], for as long as the slice lives.
    pub unsafe fn slice(&self, offset: usize, len: usize) -> &[u8] {
        assert!(offset + len <= self.layout.total());
        // SAFETY: in bounds; stability for the slice's lifetime is the caller's contract.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(offset), len) }
    }

    /// Copies bytes at `offset` into `dst`.
    ///
    /// # Safety
    /// The bytes were published to the caller by an Acquire load of their control word,
    /// and the writer does not touch them until the caller releases the word.
    pub unsafe fn read(&self, offset: usize, dst: &mut [u8]) {
        assert!(offset + dst.len() <= self.layout.total());
        // SAFETY: in bounds; stability is the caller's contract.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.as_ptr().add(offset),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if let Some(len) = NonZeroUsize::new(self.layout.total()) {
            // SAFETY: we mapped exactly this range and hand out no references that outlive
            // `self` (accessors borrow `self`).
            let _ = unsafe { munmap(self.base.cast(), len.get()) };
        }
    }
}
