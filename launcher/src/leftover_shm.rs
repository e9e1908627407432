//! Shared-memory files that topo-run jobs left behind, and their removal.
//!
//! The runtime's node leader builds each segment under a temporary name
//! (`topo-run.<launch>.<node>[.c<N>].<pid>.new`), locks it (a shared `flock`), publishes it
//! under its final name and removes that name once every local rank has attached. Every
//! process that maps a segment holds its lock until it unmaps it. A job killed between the
//! creation and the removal leaves the file behind, and names are per launch, so nothing
//! would ever reuse and so reclaim it.
//!
//! A file of those names whose lock nobody holds has no live user: its creator died. (A
//! temporary is locked a moment after it is created, so one counts only when it is also
//! older than [`TEMP_GRACE`].) The first task of every node removes such files when it
//! launches a program, and `topo-run doctor` reports them (and removes them with
//! `--remove-leftovers`). Files of other users cannot be opened and are left alone.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use nix::fcntl::{Flock, FlockArg};

/// The directory of the node segments (`TOPO_RUN_SHM_DIR`, default `/dev/shm`), as the
/// runtime chooses it.
pub fn shm_dir() -> PathBuf {
    std::env::var_os("TOPO_RUN_SHM_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/dev/shm"))
}

/// How old an unlocked temporary must be to count as left behind.
pub const TEMP_GRACE: Duration = Duration::from_secs(60);

/// A segment or temporary that no live process uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    pub path: PathBuf,
    pub bytes: u64,
}

/// Whether `name` is a segment's (`Some(false)`) or a temporary's (`Some(true)`) name; the
/// doctor's own probe files and everything else are not.
fn segment_name(name: &str) -> Option<bool> {
    let rest = name.strip_prefix("topo-run.")?;
    if rest.is_empty() || rest.starts_with("doctor.") {
        return None;
    }
    Some(name.ends_with(".new"))
}

/// `path`, if it is left behind: its lock, taken exclusively (so that no process can
/// start using it while the caller looks at it), and what it is.
fn examine(path: &Path, temporary: bool, now: SystemTime) -> Option<(Leftover, Flock<File>)> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    if temporary {
        let age = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or_default();
        if age < TEMP_GRACE {
            return None;
        }
    }
    // Another user's file (mode 0600) cannot be opened: not ours to judge.
    let file = File::open(path).ok()?;
    let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).ok()?;
    // Still the file under that name (not one created meanwhile under a reused name).
    let held = lock.metadata().ok()?;
    let now_there = std::fs::symlink_metadata(path).ok()?;
    if (held.dev(), held.ino()) != (now_there.dev(), now_there.ino()) {
        return None;
    }
    let leftover = Leftover {
        path: path.to_path_buf(),
        bytes: held.len(),
    };
    Some((leftover, lock))
}

/// Every left-behind segment and temporary in `dir`, by name.
pub fn find(dir: &Path) -> Vec<Leftover> {
    scan(dir, false).0
}

/// Removes every left-behind segment and temporary in `dir`: those removed, and those
/// that could not be, with the reason.
pub fn remove(dir: &Path) -> (Vec<Leftover>, Vec<(Leftover, String)>) {
    scan(dir, true)
}

fn scan(dir: &Path, remove: bool) -> (Vec<Leftover>, Vec<(Leftover, String)>) {
    let (mut found, mut failed) = (Vec::new(), Vec::new());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (found, failed);
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(temporary) = name.to_str().and_then(segment_name) else {
            continue;
        };
        let Some((leftover, lock)) = examine(&entry.path(), temporary, now) else {
            continue;
        };
        if remove {
            // Removed while its lock is held, so nobody attached meanwhile.
            if let Err(e) = std::fs::remove_file(&leftover.path) {
                failed.push((leftover, e.to_string()));
                continue;
            }
        }
        drop(lock);
        found.push(leftover);
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    (found, failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    fn dir(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("topo-run-leftover-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn make(d: &Path, name: &str, bytes: usize, age: Duration) -> File {
        let f = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(d.join(name))
            .unwrap();
        f.set_len(bytes as u64).unwrap();
        f.set_modified(SystemTime::now() - age).unwrap();
        f
    }

    fn names(v: &[Leftover]) -> Vec<String> {
        v.iter()
            .map(|l| l.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn names_of_segments_and_temporaries() {
        assert_eq!(segment_name("topo-run.1234.0.node1"), Some(false));
        assert_eq!(segment_name("topo-run.1234.0.node1.c3"), Some(false));
        assert_eq!(
            segment_name("topo-run.1234.0.node1.c3.4242.new"),
            Some(true)
        );
        assert_eq!(segment_name("topo-run.doctor.4242"), None);
        assert_eq!(segment_name("topo-run."), None);
        assert_eq!(segment_name("psm2.shm"), None);
        assert_eq!(segment_name("vader_segment.node1.0"), None);
    }

    #[test]
    fn only_unlocked_files_of_topo_runs_names_are_left_behind() {
        let d = dir("find");
        let old = Duration::from_secs(3600);
        drop(make(&d, "topo-run.1.0.dead", 4096, Duration::ZERO));
        drop(make(&d, "topo-run.1.0.dead.c2.77.new", 100, old));
        // A fresh temporary: its creator may not have locked it yet.
        drop(make(&d, "topo-run.2.0.young.88.new", 100, Duration::ZERO));
        // A segment in use: its user holds the shared lock.
        let live = make(&d, "topo-run.3.0.live", 4096, old);
        let live = Flock::lock(live, FlockArg::LockSharedNonblock).unwrap();
        // Not segments.
        drop(make(&d, "topo-run.doctor.99", 10, old));
        drop(make(&d, "other-program.shm", 10, old));
        std::fs::create_dir(d.join("topo-run.4.0.dir")).unwrap();

        let found = find(&d);
        assert_eq!(
            names(&found),
            ["topo-run.1.0.dead", "topo-run.1.0.dead.c2.77.new"]
        );
        assert_eq!(found[0].bytes, 4096);
        // Looking removes nothing.
        assert!(d.join("topo-run.1.0.dead").exists());

        let (removed, failed) = remove(&d);
        assert_eq!(names(&removed), names(&found));
        assert!(failed.is_empty());
        assert!(!d.join("topo-run.1.0.dead").exists());
        assert!(!d.join("topo-run.1.0.dead.c2.77.new").exists());
        for kept in [
            "topo-run.2.0.young.88.new",
            "topo-run.3.0.live",
            "topo-run.doctor.99",
            "other-program.shm",
        ] {
            assert!(d.join(kept).exists(), "{kept} must stay");
        }
        // Once its user lets go, the live one is left behind too.
        drop(live);
        assert_eq!(names(&find(&d)), ["topo-run.3.0.live"]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_missing_directory_has_nothing() {
        let d = std::env::temp_dir().join("topo-run-leftover-missing-dir-xyz");
        assert!(find(&d).is_empty());
        assert_eq!(remove(&d), (Vec::new(), Vec::new()));
    }
}
