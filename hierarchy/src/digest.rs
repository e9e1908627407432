//! The digest of a job's inputs. Every rank computes it from the same inputs; the runtime
//! compares it across ranks, so two nodes that read different maps fail loudly.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

use crate::job::Job;
use crate::level::LevelFilter;
use crate::netmap::NetworkMap;

/// 128 bits of SHA-256 over a canonical form of the inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest(pub [u8; 16]);

impl Digest {
    /// Digest of the inputs every rank of a running job can see: the placement (each
    /// rank's node), the network map, the level filter and `settings` (any further text the
    /// caller includes, such as algorithm settings).
    ///
    /// Locality strings are not included: under Slurm a task learns the binding of its own
    /// node's tasks only, so ranks on different nodes could not agree on them. All tasks
    /// of a node derive their localities from the same Slurm binding list.
    pub fn of_job(
        job: &Job,
        map: Option<&NetworkMap>,
        filter: &LevelFilter,
        settings: &str,
    ) -> Self {
        let mut h = Sha256::new();
        h.update(b"topo-run job digest v2\n");
        h.update(format!("size {}\nnodes {}\n", job.size(), job.node_count()));
        for n in job.nodes() {
            h.update(n.as_bytes());
            h.update(b"\n");
        }
        // Runs of consecutive ranks on one node, so a million ranks hash quickly.
        let mut r = 0;
        while r < job.size() {
            let node = job.node_of(r);
            let start = r;
            while r < job.size() && job.node_of(r) == node {
                r += 1;
            }
            h.update(format!("{node} {}\n", r - start));
        }
        h.update(b"map\n");
        if let Some(map) = map {
            h.update(map.canonical());
        }
        h.update(format!(
            "\nlevels {}\nsettings {settings}\n",
            filter.canonical()
        ));
        let full = h.finalize();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        Digest(out)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl FromStr for Digest {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("digest {s:?} is not 32 hexadecimal digits"));
        }
        let mut out = [0u8; 16];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
        }
        Ok(Digest(out))
    }
}
