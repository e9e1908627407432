//! A lock that costs no fence while only one thread at a time can use what it guards.
//!
//! Every collective call locks its context's state, and the PMPI library locks its own
//! on every intercepted call. On x86 both halves of `std::sync::Mutex` are atomic
//! read-modify-writes, full fences that wait until the call's last stores to lines the
//! other core reads (a queue's control word) have left this core: one cache-line transfer
//! added to every call, measurable at the smallest sizes (benchmarks/records.md, "Barrier and
//! the smallest calls").
//!
//! Most of the time nothing else can touch the state: a context without a progress
//! thread is used only by the thread that holds its (not `Send`) handles, and the PMPI
//! library below `MPI_THREAD_MULTIPLE` is only entered by one MPI call at a time. Then
//! the lock is a plain flag, set and cleared by ordinary loads and stores; it still
//! catches re-entrance (a progress hook that runs inside a call of the same context, and
//! must leave it alone). Where another thread may come in (a progress thread, or
//! `MPI_THREAD_MULTIPLE`), the lock is a mutex.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

/// A value behind a lock that is a plain flag while one thread at a time uses it
/// ([`SerialLock::new_serial`]) and a mutex otherwise ([`SerialLock::new`]).
pub struct SerialLock<T> {
    /// Whether every use is known to be serial (no two threads at once): then `held`
    /// alone guards the value.
    serial: AtomicBool,
    /// Set while a guard of a serial lock is alive.
    held: AtomicBool,
    /// The lock of the non-serial case.
    mutex: Mutex<()>,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard. A non-serial lock hands out one
// guard at a time with a mutex; a serial one was declared, by the `unsafe` constructor
// or switch, to be used by one thread at a time, which the flag then serialises within
// that thread. `T: Send` because the value may be reached from any thread that locks.
unsafe impl<T: Send> Sync for SerialLock<T> {}
// SAFETY: moving the lock moves the value; nothing in it is tied to a thread.
unsafe impl<T: Send> Send for SerialLock<T> {}

impl<T> SerialLock<T> {
    /// A lock that may be used from several threads at once (a mutex).
    pub const fn new(value: T) -> Self {
        SerialLock {
            serial: AtomicBool::new(false),
            held: AtomicBool::new(false),
            mutex: Mutex::new(()),
            value: UnsafeCell::new(value),
        }
    }

    /// A lock that costs no atomic read-modify-write: a flag.
    ///
    /// # Safety
    /// No two threads ever use the lock at the same time: every use on one thread
    /// happens before (in the memory model's sense) every later use on another.
    pub unsafe fn new_serial(value: T) -> Self {
        let lock = SerialLock::new(value);
        lock.serial.store(true, Ordering::Relaxed);
        lock
    }

    /// Makes the lock a flag from now on, as [`SerialLock::new_serial`].
    ///
    /// # Safety
    /// As [`SerialLock::new_serial`], from this call on; and the lock is not held now.
    pub unsafe fn make_serial(&self) {
        self.serial.store(true, Ordering::Relaxed);
    }

    /// Locks, waiting for another thread's guard to go if the lock is a mutex.
    ///
    /// # Panics
    /// If the lock is a flag and held already: the same thread came back in, which would
    /// deadlock on a mutex.
    #[inline]
    pub fn lock(&self) -> SerialGuard<'_, T> {
        if self.serial.load(Ordering::Relaxed) {
            return self.try_lock().expect(
                "topo-run: internal error: a lock was taken again by the thread that holds it",
            );
        }
        // A panic while a guard was alive left the value consistent (its users make every
        // change whole before anything can panic), so poisoning is ignored.
        let m = self.mutex.lock().unwrap_or_else(PoisonError::into_inner);
        SerialGuard {
            lock: self,
            _mutex: Some(m),
        }
    }

    /// Locks if nobody holds the lock.
    #[inline]
    pub fn try_lock(&self) -> Option<SerialGuard<'_, T>> {
        if self.serial.load(Ordering::Relaxed) {
            if self.held.load(Ordering::Relaxed) {
                return None;
            }
            self.held.store(true, Ordering::Relaxed);
            return Some(SerialGuard {
                lock: self,
                _mutex: None,
            });
        }
        let m = match self.mutex.try_lock() {
            Ok(m) => m,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        Some(SerialGuard {
            lock: self,
            _mutex: Some(m),
        })
    }
}

impl<T> std::fmt::Debug for SerialLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SerialLock")
            .field("serial", &self.serial.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Access to the value of a locked [`SerialLock`]; unlocks when dropped.
pub struct SerialGuard<'a, T> {
    lock: &'a SerialLock<T>,
    /// The mutex's guard when the lock is not serial.
    _mutex: Option<MutexGuard<'a, ()>>,
}

impl<T> std::fmt::Debug for SerialGuard<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SerialGuard")
    }
}

impl<T> Deref for SerialGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one alive (see `Sync` above).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SerialGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes the access unique.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SerialGuard<'_, T> {
    fn drop(&mut self) {
        if self._mutex.is_none() {
            // A plain store on x86: no fence.
            self.lock.held.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_serial_lock_refuses_a_second_guard_until_the_first_goes() {
        // SAFETY: used by this thread only.
        let lock = unsafe { SerialLock::new_serial(1) };
        let mut g = lock.lock();
        *g += 1;
        assert!(lock.try_lock().is_none());
        drop(g);
        assert_eq!(*lock.try_lock().expect("free again"), 2);
    }

    #[test]
    #[should_panic(expected = "taken again")]
    fn a_serial_lock_taken_twice_panics_instead_of_deadlocking() {
        // SAFETY: used by this thread only.
        let lock = unsafe { SerialLock::new_serial(()) };
        let _g = lock.lock();
        let _h = lock.lock();
    }

    #[test]
    fn a_mutex_lock_excludes_other_threads() {
        let lock = Arc::new(SerialLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = Arc::clone(&lock);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        // Read and write in two steps: a lost update shows up in the sum.
                        let mut g = lock.lock();
                        let v = *g;
                        std::hint::black_box(&v);
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("no panic");
        }
        assert_eq!(*lock.lock(), 40_000);
        let g = lock.lock();
        assert!(lock.try_lock().is_none(), "held by this thread");
        drop(g);
    }
}
