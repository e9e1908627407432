/* What Rust cannot take from MPI's header the same way under every MPI ABI, built with
 * mpicc so that it matches the MPI library the interposer is linked against: the values
 * of C macros (MPI_IN_PLACE, MPI_BOTTOM, MPI_COMBINER_NAMED, MPI_PACKED), the Fortran handle
 * conversions (functions in Open MPI, macros in MPICH), and which handles are unusable
 * (a null pointer in Open MPI, where handles are pointers; 0 in MPICH, where they are
 * integers and 0 names nothing). */
#include <mpi.h>

void *const topo_preload_in_place = MPI_IN_PLACE;
void *const topo_preload_bottom = MPI_BOTTOM;
const int topo_preload_combiner_named = MPI_COMBINER_NAMED;

/* Whether the MPI library is Open MPI (its header defines OPEN_MPI). */
#ifdef OPEN_MPI
const int topo_preload_open_mpi = 1;
#else
const int topo_preload_open_mpi = 0;
#endif

MPI_Datatype topo_preload_packed(void) { return MPI_PACKED; }

MPI_Comm topo_preload_comm_f2c(MPI_Fint f) { return PMPI_Comm_f2c(f); }
MPI_Datatype topo_preload_type_f2c(MPI_Fint f) { return PMPI_Type_f2c(f); }
MPI_Op topo_preload_op_f2c(MPI_Fint f) { return PMPI_Op_f2c(f); }
MPI_Fint topo_preload_request_c2f(MPI_Request r) { return PMPI_Request_c2f(r); }
MPI_Fint topo_preload_comm_c2f(MPI_Comm c) { return PMPI_Comm_c2f(c); }

int topo_preload_comm_unusable(MPI_Comm c) { return c == MPI_COMM_NULL || c == (MPI_Comm)0; }
int topo_preload_type_unusable(MPI_Datatype t) {
    return t == MPI_DATATYPE_NULL || t == (MPI_Datatype)0;
}

/* The standard name of predefined datatype t, found by its handle (NULL for any other
 * handle). A program may rename a predefined type with MPI_Type_set_name, so
 * MPI_Type_get_name cannot tell what it is; the handle can. The names are those the Rust
 * side classifies (classify.rs); a type this MPI does not define is left out. Where two
 * names share a handle (MPICH's MPI_LONG_LONG_INT and MPI_LONG_LONG), the first wins;
 * both are classified alike. */
const char *topo_preload_type_name(MPI_Datatype t) {
#define NAMED(T) \
    if (t == T) return #T;
    NAMED(MPI_INT)
    NAMED(MPI_LONG)
    NAMED(MPI_SHORT)
    NAMED(MPI_UNSIGNED_SHORT)
    NAMED(MPI_UNSIGNED)
    NAMED(MPI_UNSIGNED_LONG)
    NAMED(MPI_LONG_LONG_INT)
    NAMED(MPI_LONG_LONG)
    NAMED(MPI_UNSIGNED_LONG_LONG)
    NAMED(MPI_SIGNED_CHAR)
    NAMED(MPI_UNSIGNED_CHAR)
    NAMED(MPI_INT8_T)
    NAMED(MPI_INT16_T)
    NAMED(MPI_INT32_T)
    NAMED(MPI_INT64_T)
    NAMED(MPI_UINT8_T)
    NAMED(MPI_UINT16_T)
    NAMED(MPI_UINT32_T)
    NAMED(MPI_UINT64_T)
    NAMED(MPI_FLOAT)
    NAMED(MPI_DOUBLE)
    NAMED(MPI_LONG_DOUBLE)
    NAMED(MPI_C_BOOL)
    NAMED(MPI_C_FLOAT_COMPLEX)
    NAMED(MPI_C_DOUBLE_COMPLEX)
    NAMED(MPI_C_LONG_DOUBLE_COMPLEX)
    NAMED(MPI_BYTE)
    NAMED(MPI_CHAR)
    NAMED(MPI_WCHAR)
    NAMED(MPI_PACKED)
    NAMED(MPI_AINT)
    NAMED(MPI_OFFSET)
    NAMED(MPI_COUNT)
    NAMED(MPI_2INT)
    NAMED(MPI_SHORT_INT)
    NAMED(MPI_LONG_INT)
    NAMED(MPI_FLOAT_INT)
    NAMED(MPI_DOUBLE_INT)
    NAMED(MPI_LONG_DOUBLE_INT)
#ifdef MPI_CXX_BOOL
    NAMED(MPI_CXX_BOOL)
#endif
#ifdef MPI_CXX_FLOAT_COMPLEX
    NAMED(MPI_CXX_FLOAT_COMPLEX)
    NAMED(MPI_CXX_DOUBLE_COMPLEX)
    NAMED(MPI_CXX_LONG_DOUBLE_COMPLEX)
#endif
    /* Fortran types, usable from C; MPICH built without Fortran defines some as
     * MPI_DATATYPE_NULL, which no valid handle equals. */
    NAMED(MPI_INTEGER)
    NAMED(MPI_REAL)
    NAMED(MPI_DOUBLE_PRECISION)
    NAMED(MPI_LOGICAL)
    NAMED(MPI_COMPLEX)
    NAMED(MPI_DOUBLE_COMPLEX)
    NAMED(MPI_CHARACTER)
    NAMED(MPI_2REAL)
    NAMED(MPI_2DOUBLE_PRECISION)
    NAMED(MPI_2INTEGER)
#ifdef MPI_INTEGER1
    NAMED(MPI_INTEGER1)
#endif
#ifdef MPI_INTEGER2
    NAMED(MPI_INTEGER2)
#endif
#ifdef MPI_INTEGER4
    NAMED(MPI_INTEGER4)
#endif
#ifdef MPI_INTEGER8
    NAMED(MPI_INTEGER8)
#endif
#ifdef MPI_INTEGER16
    NAMED(MPI_INTEGER16)
#endif
#ifdef MPI_REAL2
    NAMED(MPI_REAL2)
#endif
#ifdef MPI_REAL4
    NAMED(MPI_REAL4)
#endif
#ifdef MPI_REAL8
    NAMED(MPI_REAL8)
#endif
#ifdef MPI_REAL16
    NAMED(MPI_REAL16)
#endif
#ifdef MPI_LOGICAL1
    NAMED(MPI_LOGICAL1)
#endif
#ifdef MPI_LOGICAL2
    NAMED(MPI_LOGICAL2)
#endif
#ifdef MPI_LOGICAL4
    NAMED(MPI_LOGICAL4)
#endif
#ifdef MPI_LOGICAL8
    NAMED(MPI_LOGICAL8)
#endif
#ifdef MPI_COMPLEX8
    NAMED(MPI_COMPLEX8)
#endif
#ifdef MPI_COMPLEX16
    NAMED(MPI_COMPLEX16)
#endif
#ifdef MPI_COMPLEX32
    NAMED(MPI_COMPLEX32)
#endif
#ifdef MPI_2COMPLEX
    NAMED(MPI_2COMPLEX)
#endif
#ifdef MPI_2DOUBLE_COMPLEX
    NAMED(MPI_2DOUBLE_COMPLEX)
#endif
#undef NAMED
    return 0;
}
