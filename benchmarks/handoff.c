/* handoff: what the PMPI library adds to a call it hands to MPI. One 8-byte MPI_Allreduce
 * (MPI_SUM on a double) is called N times through the program's entry point (through
 * libtopo_preload.so when topo-run preloads it) and N times through MPI's own (PMPI_*),
 * interleaved, 15 times each; the table gives the medians of rank 0's time per call,
 * and the difference.
 *
 *   mpicc -O2 -o handoff benchmarks/handoff.c
 *   srun --mpi=pmix --cpu-bind=cores topo-run -- ./handoff [CALLS] [CASE]
 *
 * CALLS per timing (default 1000000); CASE:
 *   self    a duplicate of MPI_COMM_SELF (one rank: no context, and MPI's own call costs
 *           tens of nanoseconds, so the difference stands out of the noise);
 *   minloc  MPI_MINLOC on MPI_DOUBLE_INT over world (an operation topo-run does not run;
 *           MPI's own call is a real exchange between the ranks, so the difference is
 *           noisier).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { REPEATS = 15 };

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    const char *which = argc > 2 ? argv[2] : "self";

    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Op op = MPI_SUM;
    MPI_Datatype dt = MPI_DOUBLE;
    double d[2] = {1.0, 0.0};
    struct {
        double v;
        int i;
    } p[2] = {{1.0, rank}, {0.0, 0}};
    void *send = &d[0], *recv = &d[1];
    if (strcmp(which, "self") == 0) {
        MPI_Comm_dup(MPI_COMM_SELF, &comm);
    } else if (strcmp(which, "minloc") == 0) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        op = MPI_MINLOC;
        dt = MPI_DOUBLE_INT;
        send = &p[0];
        recv = &p[1];
    } else {
        if (rank == 0) fprintf(stderr, "handoff: unknown case %s (self, minloc)\n", which);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    double t[2][REPEATS];
    for (int k = 0; k < REPEATS; k++) {
        for (int native = 0; native < 2; native++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (long i = 0; i < n; i++) {
                if (native) PMPI_Allreduce(send, recv, 1, dt, op, comm);
                else MPI_Allreduce(send, recv, 1, dt, op, comm);
            }
            t[native][k] = (MPI_Wtime() - t0) / (double)n * 1e9;
        }
    }
    qsort(t[0], REPEATS, sizeof(double), cmp);
    qsort(t[1], REPEATS, sizeof(double), cmp);
    if (rank == 0) {
        printf("case,library_ns,native_ns,added_ns\n");
        printf("%s,%.1f,%.1f,%.1f\n", which, t[0][REPEATS / 2], t[1][REPEATS / 2],
               t[0][REPEATS / 2] - t[1][REPEATS / 2]);
    }
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
