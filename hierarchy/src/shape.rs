//! A regular machine shape (sockets, NUMA nodes, caches, cores, threads) and the locality
//! string of any set of its processing units, as hwloc and OpenPMIx would report it.
//!
//! Logical numbering follows hwloc: cores are numbered across the machine, the threads of a
//! core are consecutive PUs, and every object covers a contiguous range of cores.

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::indexlist::IndexList;
use crate::locality::{LocalityString, ObjectKind};

/// The hardware of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineShape {
    /// Packages per node.
    pub sockets: u32,
    /// NUMA nodes per package (2 for Intel sub-NUMA clustering, 4 for AMD NPS4).
    #[serde(default = "one")]
    pub numa_per_socket: u32,
    /// Cores per NUMA node.
    pub cores_per_numa: u32,
    /// L3 caches per package (8 for an AMD package with eight CCX; 1 on most Intel parts).
    #[serde(default = "one")]
    pub l3_per_socket: u32,
    /// Cores sharing one L2 cache (1 on most x86 parts, 2 or 4 on some others).
    #[serde(default = "one")]
    pub cores_per_l2: u32,
    /// Hardware threads per core.
    #[serde(default = "one")]
    pub threads_per_core: u32,
}

fn one() -> u32 {
    1
}

/// Object sizes in cores, one entry per object kind that is a range of cores.
struct Spans {
    socket: u32,
    numa: u32,
    l3: u32,
    l2: u32,
}

impl MachineShape {
    /// Checks that every count is positive and that the caches divide the packages evenly.
    pub fn validate(&self) -> Result<()> {
        let fields = [
            ("sockets", self.sockets),
            ("numa_per_socket", self.numa_per_socket),
            ("cores_per_numa", self.cores_per_numa),
            ("l3_per_socket", self.l3_per_socket),
            ("cores_per_l2", self.cores_per_l2),
            ("threads_per_core", self.threads_per_core),
        ];
        if let Some((name, _)) = fields.iter().find(|(_, v)| *v == 0) {
            return Err(Error::job(format!("hardware: {name} must be at least 1")));
        }
        let pus = u64::from(self.sockets)
            * u64::from(self.numa_per_socket)
            * u64::from(self.cores_per_numa)
            * u64::from(self.threads_per_core);
        if pus > 1 << 20 {
            return Err(Error::job(
                "hardware: more than 2^20 hardware threads per node",
            ));
        }
        let cps = self.cores_per_socket();
        if !cps.is_multiple_of(self.l3_per_socket) {
            return Err(Error::job(format!(
                "hardware: {cps} cores per socket do not split into {} L3 caches",
                self.l3_per_socket
            )));
        }
        if !cps.is_multiple_of(self.cores_per_l2) {
            return Err(Error::job(format!(
                "hardware: {cps} cores per socket do not split into L2 caches of {} cores",
                self.cores_per_l2
            )));
        }
        Ok(())
    }

    /// Cores per package.
    pub fn cores_per_socket(&self) -> u32 {
        self.numa_per_socket * self.cores_per_numa
    }

    /// Cores per node.
    pub fn cores(&self) -> u32 {
        self.sockets * self.cores_per_socket()
    }

    /// Hardware threads per node.
    pub fn pus(&self) -> u32 {
        self.cores() * self.threads_per_core
    }

    /// Number of NUMA nodes per node.
    pub fn numas(&self) -> u32 {
        self.sockets * self.numa_per_socket
    }

    /// Number of L3 caches per node.
    pub fn l3s(&self) -> u32 {
        self.sockets * self.l3_per_socket
    }

    fn spans(&self) -> Spans {
        Spans {
            socket: self.cores_per_socket(),
            numa: self.cores_per_numa,
            l3: self.cores_per_socket() / self.l3_per_socket,
            l2: self.cores_per_l2,
        }
    }

    /// The locality string of a process bound to the PUs `pus` (logical indices).
    pub fn locality(&self, pus: &IndexList) -> LocalityString {
        let s = self.spans();
        let tpc = self.threads_per_core;
        let cores = IndexList::from_indices(pus.iter().map(|p| p / tpc));
        let by = |span: u32| IndexList::from_indices(cores.iter().map(|c| c / span));
        let mut loc = LocalityString::new();
        loc.set(ObjectKind::Package, by(s.socket));
        loc.set(ObjectKind::L3, by(s.l3));
        loc.set(ObjectKind::L2, by(s.l2));
        loc.set(ObjectKind::L1, cores.clone());
        loc.set(ObjectKind::Core, cores.clone());
        loc.set(ObjectKind::Pu, pus.clone());
        loc.set(ObjectKind::Numa, by(s.numa));
        loc
    }

    /// The PUs of cores `first..=last`.
    pub fn pus_of_cores(&self, first: u32, last: u32) -> IndexList {
        let t = self.threads_per_core;
        IndexList::from_range(first * t, last * t + t - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_locality_matches_pmix_style() {
        let shape = MachineShape {
            sockets: 2,
            numa_per_socket: 1,
            cores_per_numa: 18,
            l3_per_socket: 1,
            cores_per_l2: 1,
            threads_per_core: 1,
        };
        let loc = shape.locality(&shape.pus_of_cores(18, 18));
        assert_eq!(loc.to_string(), "SK1:L31:L218:L118:CR18:HT18:NM1");
        let smt = MachineShape {
            threads_per_core: 2,
            ..shape
        };
        assert_eq!(
            smt.locality(&smt.pus_of_cores(1, 1)).to_string(),
            "SK0:L30:L21:L11:CR1:HT2-3:NM0"
        );
        assert_eq!(
            smt.locality(&IndexList::from_range(3, 3)).to_string(),
            "SK0:L30:L21:L11:CR1:HT3:NM0"
        );
    }
}
