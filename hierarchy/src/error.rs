//! The one error type of the crate: every way an input can be wrong, with the
//! offending item named so that the message alone tells the user what to fix.

use thiserror::Error;

/// Which input an [`Error`](enum@Error) is about. The launcher maps each kind to its own exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A PMIx locality string.
    Locality,
    /// A Slurm hostlist expression.
    Hostlist,
    /// A network map (syntax or structure).
    NetworkMap,
    /// A node of the job is absent from the network map.
    NodeNotInMap,
    /// A job description (`ranks:` or `layout:`).
    Job,
    /// A level list such as `--levels numa,node`.
    Levels,
    /// An encoded plan (the `TOPO_RUN_PLAN` variable).
    Plan,
    /// A runtime setting (queue sizes, algorithm rules, ...).
    Settings,
}

/// Everything that can be wrong with the inputs of the hierarchy model.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// A locality string that does not follow the PMIx format.
    #[error("malformed locality string {string:?}: bad token {token:?}: {reason}")]
    Locality {
        string: String,
        token: String,
        reason: String,
    },

    /// A hostlist expression that Slurm would not accept either.
    #[error("malformed hostlist {expr:?}: {reason}")]
    Hostlist { expr: String, reason: String },

    /// The network map could not be parsed.
    #[error("network map{}: {reason}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
    MapSyntax { line: Option<usize>, reason: String },

    /// A node appears below two switches.
    #[error(
        "network map: node {node:?} is attached to two switches, {first:?} and {second:?}; \
         a node must hang off exactly one leaf switch"
    )]
    MapNodeTwoParents {
        node: String,
        first: String,
        second: String,
    },

    /// A switch is listed as the child of two switches.
    #[error(
        "network map: switch {switch:?} has two parents, {first:?} and {second:?}; \
         the map must be a tree"
    )]
    MapSwitchTwoParents {
        switch: String,
        first: String,
        second: String,
    },

    /// Switches that are (indirectly) their own parent.
    #[error("network map: switches form a cycle: {}", cycle.join(" -> "))]
    MapCycle { cycle: Vec<String> },

    /// A switch that lists both nodes and child switches.
    #[error(
        "network map: switch {switch:?} lists both nodes and switches; \
         put the nodes under a leaf switch of their own"
    )]
    MapMixedChildren { switch: String },

    /// A switch names a child switch that is never defined.
    #[error("network map: switch {parent:?} lists child switch {child:?}, which is not defined")]
    MapUnknownSwitch { parent: String, child: String },

    /// The same switch is defined twice.
    #[error("network map: switch {switch:?} is defined twice")]
    MapDuplicateSwitch { switch: String },

    /// Nodes of the job that the network map does not know.
    #[error(
        "node {node:?} of the job is not in the network map{}; add it below a leaf switch \
         in the map, or run without a network map",
        if *others > 0 { format!(" (nor are {others} other nodes)") } else { String::new() }
    )]
    NodeNotInMap { node: String, others: usize },

    /// The job description is invalid.
    #[error("job description: {reason}")]
    Job { reason: String },

    /// A level list names an unknown level or is otherwise invalid.
    #[error("invalid level list {list:?}: {reason}")]
    Levels { list: String, reason: String },

    /// An encoded plan that cannot be trusted.
    #[error("corrupted topo-run plan: {reason}")]
    Plan { reason: String },

    /// A runtime setting with a value topo-run cannot use.
    #[error("invalid setting {key}={value:?}: {reason}")]
    Settings {
        key: String,
        value: String,
        reason: String,
    },

    /// A rules file (`--rules`) that cannot be used.
    #[error("line {line}: {reason}")]
    RulesFile { line: usize, reason: String },
}

impl Error {
    /// The input this error is about.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Locality { .. } => ErrorKind::Locality,
            Error::Hostlist { .. } => ErrorKind::Hostlist,
            Error::MapSyntax { .. }
            | Error::MapNodeTwoParents { .. }
            | Error::MapSwitchTwoParents { .. }
            | Error::MapCycle { .. }
            | Error::MapMixedChildren { .. }
            | Error::MapUnknownSwitch { .. }
            | Error::MapDuplicateSwitch { .. } => ErrorKind::NetworkMap,
            Error::NodeNotInMap { .. } => ErrorKind::NodeNotInMap,
            Error::Job { .. } => ErrorKind::Job,
            Error::Levels { .. } => ErrorKind::Levels,
            Error::Plan { .. } => ErrorKind::Plan,
            Error::Settings { .. } | Error::RulesFile { .. } => ErrorKind::Settings,
        }
    }

    pub(crate) fn job(reason: impl Into<String>) -> Self {
        Error::Job {
            reason: reason.into(),
        }
    }

    pub(crate) fn plan(reason: impl Into<String>) -> Self {
        Error::Plan {
            reason: reason.into(),
        }
    }

    pub(crate) fn map_syntax(line: Option<usize>, reason: impl Into<String>) -> Self {
        Error::MapSyntax {
            line,
            reason: reason.into(),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
