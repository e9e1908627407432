/* What Rust cannot take from MPI's header the same way under every MPI ABI, built with
 * mpicc so that it matches the MPI library the interposer is linked against: the values
 * of C macros (MPI_IN_PLACE, MPI_BOTTOM, MPI_COMBINER_NAMED), the Fortran handle
 * conversions (functions in Open MPI, macros in MPICH), and which handles are unusable
 * (a null pointer in Open MPI, where handles are pointers; 0 in MPICH, where they are
 * integers and 0 names nothing). */
#include <mpi.h>

void *const topo_preload_in_place = MPI_IN_PLACE;
void *const topo_preload_bottom = MPI_BOTTOM;
const int topo_preload_combiner_named = MPI_COMBINER_NAMED;

MPI_Comm topo_preload_comm_f2c(MPI_Fint f) { return PMPI_Comm_f2c(f); }
MPI_Datatype topo_preload_type_f2c(MPI_Fint f) { return PMPI_Type_f2c(f); }
MPI_Op topo_preload_op_f2c(MPI_Fint f) { return PMPI_Op_f2c(f); }

int topo_preload_comm_unusable(MPI_Comm c) { return c == MPI_COMM_NULL || c == (MPI_Comm)0; }
int topo_preload_type_unusable(MPI_Datatype t) {
    return t == MPI_DATATYPE_NULL || t == (MPI_Datatype)0;
}
