//! Shared helpers of the example programs.

use anyhow::Context;
use mpi::datatype::Equivalence;
use mpi::environment::Universe;

/// Initialises MPI. With `multiple` it asks for `MPI_THREAD_MULTIPLE`, which lets
/// topo-run's progress thread (`topo-run --progress-thread`) run the network steps too,
/// and fails if MPI cannot provide it.
pub fn init_mpi(multiple: bool) -> anyhow::Result<Universe> {
    if !multiple {
        return mpi::initialize().context("MPI_Init failed");
    }
    let (universe, level) = mpi::initialize_with_threading(mpi::Threading::Multiple)
        .context("MPI_Init_thread failed")?;
    anyhow::ensure!(
        level == mpi::Threading::Multiple,
        "--thread-multiple: MPI provides only {level:?}"
    );
    Ok(universe)
}

/// How a program's collectives run, for its first line of output: the path, the progress
/// thread if it runs, and how many local ranks share this rank's cache.
pub fn describe(topo: &topo_runtime::Topo) -> String {
    let mut line = match topo.fallback() {
        None => match topo.single_copy() {
            Some(t) => format!("hierarchical collectives, single copy from {t} bytes"),
            None => "hierarchical collectives, single copy off".to_string(),
        },
        Some(f) => format!("MPI's collectives ({f:?})"),
    };
    if topo_runtime::progress_thread::running() {
        line += ", progress thread";
    }
    match topo.near_peers() {
        Some((n, Some(ns))) => {
            line += &format!(
                "; {n} local rank(s) share this rank's cache (a line took {ns:.0} ns one way \
                 at setup)"
            );
        }
        Some((n, None)) => line += &format!("; {n} local rank(s) share this rank's cache"),
        None => {}
    }
    line
}

/// An element type the examples test, built from small integers so that every reduction
/// is exact, whatever the order of operations.
pub trait Value: Equivalence + Copy + PartialEq + std::fmt::Debug + Send + 'static {
    /// Its name in reports.
    const NAME: &'static str;
    /// Whether bitwise and logical operations apply.
    const INTEGER: bool;
    /// Inputs are below this, so that sums over up to 8 ranks never overflow. (Open MPI
    /// 4.1.4's vectorised `uint8_t` sum saturates where its scalar loop wraps, so an
    /// overflowing `u8` sum differs between MPI's own code paths.)
    const SPAN: i64;
    /// The value of a small integer.
    fn from_i64(v: i64) -> Self;
}

macro_rules! value {
    ($t:ty, $int:expr, $span:expr) => {
        impl Value for $t {
            const NAME: &'static str = stringify!($t);
            const INTEGER: bool = $int;
            const SPAN: i64 = $span;
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
    };
}

value!(i32, true, 100);
value!(i64, true, 100);
value!(u8, true, 30);
value!(f32, false, 100);
value!(f64, false, 100);
