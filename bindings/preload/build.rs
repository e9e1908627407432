// Compiles the C shim that gives Rust the values of MPI's C macros (MPI_IN_PLACE,
// MPI_BOTTOM), with the MPI compiler wrapper, so they match the MPI library linked.
fn main() {
    println!("cargo:rerun-if-changed=src/consts.c");
    let mut b = cc::Build::new();
    b.file("src/consts.c");
    let mpicc = std::env::var("MPICC").unwrap_or_else(|_| "mpicc".into());
    b.compiler(mpicc);
    b.compile("topo_preload_consts");
}
