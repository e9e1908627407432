/* The values of MPI's C macros that Rust cannot see, built with mpicc so that they
 * match the MPI library the interposer is linked against. */
#include <mpi.h>

void *const topo_preload_in_place = MPI_IN_PLACE;
void *const topo_preload_bottom = MPI_BOTTOM;
