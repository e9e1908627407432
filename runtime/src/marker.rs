//! A mark in the program file that says "this program calls topo-runtime itself".
//!
//! `topo-run` reads it (ELF section [`SECTION`]) before it execs a program, and does not
//! preload the PMPI library into a program that carries it: such a program already has
//! topo-run's collectives where it asks for them, and its calls to MPI's own collectives
//! (benchmarks compare against them) must stay MPI's own.

/// The name of the ELF section that holds `MARK`.
pub const SECTION: &str = ".topo_runtime";

/// The mark. [`keep`] references it from `Topo::from_env`, so the linker keeps it in every
/// program that sets topo-run's collectives up.
#[used]
#[unsafe(link_section = ".topo_runtime")]
static MARK: [u8; 16] = *b"topo-runtime v1\0";

/// Keeps `MARK` in the linked program.
pub fn keep() {
    std::hint::black_box(&MARK);
}
