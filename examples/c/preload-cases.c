/* preload-cases: legal MPI programs that exercise the PMPI library's ordering, progress
 * and communicator rules, one case per argument. Each case checks its results on every
 * rank; the last lines are "digest: HEX" and "N passed, M failed" (check.h).
 *
 *   mpicc -O2 -o preload-cases preload-cases.c
 *   srun --mpi=pmix topo-run -- ./preload-cases mpi-progress comm-reuse
 *
 * mpi-progress: rank 0 starts an MPI_Iallreduce with a user-defined operation (which MPI
 *   runs) and enters MPI_Barrier (topo-run's), while the other ranks first wait on that
 *   Iallreduce. It completes only if topo-run's waits drive MPI's progress.
 * comm-reuse: communicators congruent to world and not congruent (a reversed split) are
 *   created and freed in turn, many times, so that MPI reuses their handles; every
 *   collective on each must give the right result.
 */
#include "check.h"

#include <stdlib.h>
#include <string.h>

static void sum_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    long long *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] += a[i];
}

static void mpi_progress(void) {
    const int n = 1 << 20;
    long long *mine = malloc(n * sizeof *mine), *sum = malloc(n * sizeof *sum);
    for (int i = 0; i < n; i++) mine[i] = rank + 1;
    MPI_Op op;
    MPI_Op_create(sum_op, 1, &op);
    MPI_Request req;
    MPI_Iallreduce(mine, sum, n, MPI_LONG_LONG, op, MPI_COMM_WORLD, &req);
    if (rank == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    int ok = 1;
    long long want = (long long)size * (size + 1) / 2;
    for (int i = 0; i < n; i++) ok &= sum[i] == want;
    hash(sum[0]);
    result(ok, "mpi-progress: rank 0 in MPI_Barrier while the others wait on a user-op MPI_Iallreduce");
    MPI_Op_free(&op);
    free(mine);
    free(sum);
}

static void comm_reuse(void) {
    int ok = 1;
    for (int i = 0; i < 40; i++) {
        MPI_Comm c;
        if (i % 2 == 0) {
            MPI_Comm_dup(MPI_COMM_WORLD, &c);
        } else {
            /* Reversed: rank r of c is world rank size-1-r. */
            MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &c);
        }
        int crank;
        MPI_Comm_rank(c, &crank);
        long long v = crank + 1, s = 0;
        MPI_Allreduce(&v, &s, 1, MPI_LONG_LONG, MPI_SUM, c);
        ok &= s == (long long)size * (size + 1) / 2;
        /* The root is rank 0 of c: world rank size-1 on the reversed ones. */
        long long b = crank == 0 ? 1000 + i : -1;
        MPI_Bcast(&b, 1, MPI_LONG_LONG, 0, c);
        ok &= b == 1000 + i;
        long long first = crank, r = -1;
        MPI_Reduce(&first, &r, 1, MPI_LONG_LONG, MPI_MAX, 0, c);
        if (crank == 0) ok &= r == size - 1;
        MPI_Barrier(c);
        hash(s + b);
        MPI_Comm_free(&c);
    }
    result(ok, "comm-reuse: collectives on congruent and reversed communicators whose handles MPI reuses");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "mpi-progress")) {
            mpi_progress();
        } else if (!strcmp(argv[i], "comm-reuse")) {
            comm_reuse();
        } else if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else {
            if (rank == 0) fprintf(stderr, "preload-cases: unknown case %s\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    int rc = report();
    MPI_Finalize();
    return rc;
}
