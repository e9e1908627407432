//! topo-run's helper programs (`topo-run-tune`, `topo-run-simulate`): installed beside
//! `topo-run`, or in `../libexec/topo-run/` from it.

use std::path::{Path, PathBuf};

/// A helper is not installed where topo-run looks for it.
#[derive(Debug, thiserror::Error)]
#[error(
    "{name} not found (looked in {}); install it beside topo-run (cargo build --release \
     builds it into target/release; scripts/install.sh into libexec/topo-run)",
    .looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
)]
pub struct HelperMissing {
    /// The helper's file name.
    pub name: &'static str,
    /// Where it was looked for.
    pub looked: Vec<PathBuf>,
}

/// Where helper `name` may be, for the launcher at `exe`.
pub fn candidates(exe: &Path, name: &str) -> Vec<PathBuf> {
    let Some(dir) = exe.parent() else {
        return Vec::new();
    };
    vec![dir.join(name), dir.join("../libexec/topo-run").join(name)]
}

/// Helper `name`, for this launcher.
pub fn find(name: &'static str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let looked = candidates(&exe, name);
    match looked.iter().find(|p| p.is_file()) {
        Some(p) => Ok(p.clone()),
        None => Err(HelperMissing { name, looked }.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_are_looked_for_beside_topo_run_and_in_libexec() {
        let c = candidates(Path::new("/opt/topo-run/bin/topo-run"), "topo-run-tune");
        assert_eq!(
            c,
            [
                PathBuf::from("/opt/topo-run/bin/topo-run-tune"),
                PathBuf::from("/opt/topo-run/bin/../libexec/topo-run/topo-run-tune"),
            ]
        );
    }
}
