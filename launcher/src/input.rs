//! Reading the launcher's input files, with one error type for the files that cannot be
//! read (exit code 3).

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use anyhow::Context;
use topo_hierarchy::NetworkMap;

/// An input file that cannot be opened or read (exit code 3).
#[derive(Debug)]
pub struct ReadError {
    pub path: PathBuf,
    pub what: &'static str,
    pub source: io::Error,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot read {} {}: {}",
            self.what,
            self.path.display(),
            self.source
        )
    }
}
impl std::error::Error for ReadError {}

/// Opens `path`, the `what` of the error message (`"network map"`).
pub fn open(path: &Path, what: &'static str) -> Result<File, ReadError> {
    File::open(path).map_err(|source| ReadError {
        path: path.to_path_buf(),
        what,
        source,
    })
}

/// Reads all of `path` as text.
pub fn read_text(path: &Path, what: &'static str) -> Result<String, ReadError> {
    let mut text = String::new();
    open(path, what)?
        .read_to_string(&mut text)
        .map_err(|source| ReadError {
            path: path.to_path_buf(),
            what,
            source,
        })?;
    Ok(text)
}

/// Reads and parses a network map file.
pub fn read_map(path: &Path) -> anyhow::Result<NetworkMap> {
    NetworkMap::from_reader(open(path, "network map")?)
        .with_context(|| format!("{}", path.display()))
}
