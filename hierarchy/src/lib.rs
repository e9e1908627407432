//! The pure model of topo-run's process-group hierarchy.
//!
//! Inputs: for every rank its node and its PMIx locality string ([`LocalityString`]), and
//! optionally the network's switch tree ([`NetworkMap`]). Output: the groups at every level,
//! bottom-up from caches to NUMA nodes, sockets, nodes, switches and the world
//! ([`Hierarchy`]), and each rank's part of it as the text the launcher exports
//! ([`RankPlan`]).
//!
//! No unsafe code, no FFI, no I/O beyond `from_reader`.
#![forbid(unsafe_code)]

mod build;
mod digest;
mod error;
pub mod hostlist;
mod indexlist;
mod intranode;
mod job;
mod jobspec;
mod level;
mod locality;
mod netmap;
mod plan;
pub mod ranges;
pub mod remap;
mod restrict;
pub mod rules_file;
pub mod settings;
mod shape;
mod yaml;

pub use build::{Group, Hierarchy, build};
pub use digest::Digest;
pub use error::{Error, ErrorKind, Result};
pub use indexlist::IndexList;
pub use job::{Job, MAX_NODES, MAX_RANKS, NodeId};
pub use jobspec::{
    Binding, Distribution, MAX_JOB_FILE_BYTES, Mapping, job_from_reader, job_from_str,
};
pub use level::{IntraLevel, LevelFilter, LevelName};
pub use locality::{LocalityString, ObjectKind};
pub use netmap::{MapFormat, NetworkMap, SwitchId};
pub use plan::{MAX_PLAN_MEMBERS, PLAN_ENV, PLAN_VERSION, PlanGroup, RankPlan};
pub use restrict::{Restricted, domains_at, restrict, union_of_levels};
pub use rules_file::RulesFile;
pub use settings::Settings;
pub use shape::MachineShape;
