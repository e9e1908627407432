/* back-to-back: small collectives called back to back, as IMB and many applications call
 * them: N calls of 8 bytes between two clock readings, no barrier in between, so a root
 * may run ahead of its receivers. Each operation is timed through the program's own calls
 * (through libtopo_preload.so when topo-run preloads it) and through MPI's own entry
 * points (PMPI_*), interleaved, 9 times each after a warm-up; the table gives the medians
 * of the slowest rank's time per call and the ratio topo/native (below 1: faster).
 * Nonblocking calls are each followed at once by MPI_Wait. The rooted ones and the v-forms
 * (igather, igatherv, iscatterv, iallgatherv, ialltoallv: every rank's block, and every
 * block of an Ialltoallv, the size of one call, every count the same) take root 0.
 *
 *   mpicc -O2 -o back-to-back benchmarks/back-to-back.c
 *   srun --mpi=pmix --cpu-bind=cores topo-run -- ./back-to-back [CALLS] [OP] [COMM] [BYTES]
 *
 * CALLS per timing (default 20000); OP runs one operation only (its index in the table;
 * -1 all); COMM is the communicator the calls run on: world (the default), or dup (a
 * duplicate of world, made first; with TOPO_RUN_MAX_COMMS=1 its context has no segment of
 * its own and its blocking calls claim one of the node's lanes; with TOPO_RUN_LANES=0 too
 * it has no context, and every call is handed to MPI). BYTES (a multiple of 4, up to 64)
 * makes every call but the barriers carry that many bytes of MPI_INT (MPI_SUM for the
 * reductions); without it, one MPI_DOUBLE (8 bytes).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum {
    IBCAST, IBARRIER, IALLREDUCE, BCAST, ALLREDUCE, BARRIER, IREDUCE, REDUCE,
    IGATHER, IGATHERV, ISCATTERV, IALLGATHERV, IALLTOALLV, OPS
};
static const char *names[OPS] = {"ibcast",    "ibarrier",  "iallreduce", "bcast",
                                 "allreduce", "barrier",   "ireduce",    "reduce",
                                 "igather",   "igatherv",  "iscatterv",  "iallgatherv",
                                 "ialltoallv"};

/* The communicator the operations run on, each call's elements, and every rank's count
 * and displacement (in elements) for the v-forms. */
static MPI_Comm on = MPI_COMM_NULL;
static int count = 1;
static MPI_Datatype type;
static int *counts, *displs;

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One call of `op`, through the library (native = 0) or MPI's own entry point. */
static void call(int op, int native, double *s, double *r) {
    MPI_Request q;
    MPI_Comm w = on;
    switch (op) {
    case IBCAST:
        if (native) PMPI_Ibcast(r, count, type, 0, w, &q);
        else MPI_Ibcast(r, count, type, 0, w, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    case IBARRIER:
        if (native) PMPI_Ibarrier(w, &q);
        else MPI_Ibarrier(w, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    case IALLREDUCE:
        if (native) PMPI_Iallreduce(s, r, count, type, MPI_SUM, w, &q);
        else MPI_Iallreduce(s, r, count, type, MPI_SUM, w, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    case BCAST:
        if (native) PMPI_Bcast(r, count, type, 0, w);
        else MPI_Bcast(r, count, type, 0, w);
        break;
    case ALLREDUCE:
        if (native) PMPI_Allreduce(s, r, count, type, MPI_SUM, w);
        else MPI_Allreduce(s, r, count, type, MPI_SUM, w);
        break;
    case BARRIER:
        if (native) PMPI_Barrier(w);
        else MPI_Barrier(w);
        break;
    case IREDUCE:
        if (native) PMPI_Ireduce(s, r, count, type, MPI_SUM, 0, w, &q);
        else MPI_Ireduce(s, r, count, type, MPI_SUM, 0, w, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    case REDUCE:
        if (native) PMPI_Reduce(s, r, count, type, MPI_SUM, 0, w);
        else MPI_Reduce(s, r, count, type, MPI_SUM, 0, w);
        break;
    case IGATHER:
        if (native) PMPI_Igather(s, count, type, r, count, type, 0, w, &q);
        else MPI_Igather(s, count, type, r, count, type, 0, w, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    case IGATHERV:
        if (native) PMPI_Igatherv(s, count, type, r, counts, displs, type, 0, w, &q);
        else MPI_Igatherv(s, count, type, r, counts, displs, type, 0, w, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    case ISCATTERV:
        if (native) PMPI_Iscatterv(s, counts, displs, type, r, count, type, 0, w, &q);
        else MPI_Iscatterv(s, counts, displs, type, r, count, type, 0, w, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    case IALLGATHERV:
        if (native) PMPI_Iallgatherv(s, count, type, r, counts, displs, type, w, &q);
        else MPI_Iallgatherv(s, count, type, r, counts, displs, type, w, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    case IALLTOALLV:
        if (native) PMPI_Ialltoallv(s, counts, displs, type, r, counts, displs, type, w, &q);
        else MPI_Ialltoallv(s, counts, displs, type, r, counts, displs, type, w, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    }
}

/* The slowest rank's time per call of `n` calls back to back, in microseconds. */
static double timed(int op, int native, int n, double *s, double *r) {
    PMPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    for (int i = 0; i < n; i++) call(op, native, s, r);
    double us = (MPI_Wtime() - t) / n * 1e6, slowest;
    PMPI_Allreduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 20000, only = argc > 2 ? atoi(argv[2]) : -1, rank;
    on = MPI_COMM_WORLD;
    if (argc > 3 && argv[3][0] == 'd') MPI_Comm_dup(MPI_COMM_WORLD, &on);
    int bytes = argc > 4 ? atoi(argv[4]) : 8;
    type = MPI_DOUBLE;
    if (argc > 4) {
        if (bytes < 4 || bytes > 64 || bytes % 4) {
            fprintf(stderr, "back-to-back: BYTES must be a multiple of 4 from 4 to 64\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        count = bytes / 4;
        type = MPI_INT;
    }
    MPI_Barrier(on); /* a context set up at its first blocking collective has one now */
    enum { REPS = 9 };
    int size;
    MPI_Comm_size(on, &size);
    /* Room for every rank's block of up to 64 bytes on both sides. */
    double *s = calloc((size_t)size * 8, sizeof *s), *r = calloc((size_t)size * 8, sizeof *r);
    counts = malloc(size * sizeof *counts);
    displs = malloc(size * sizeof *displs);
    if (!s || !r || !counts || !displs) {
        fprintf(stderr, "back-to-back: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    s[0] = 1;
    for (int q = 0; q < size; q++) counts[q] = count, displs[q] = q * count;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) printf("op,bytes,topo_us,native_us,ratio\n");
    for (int op = 0; op < OPS; op++) {
        if (only >= 0 && op != only) continue;
        double a[REPS], b[REPS];
        timed(op, 0, n / 4, s, r);
        timed(op, 1, n / 4, s, r);
        for (int k = 0; k < REPS; k++) {
            a[k] = timed(op, 0, n, s, r);
            b[k] = timed(op, 1, n, s, r);
        }
        qsort(a, REPS, sizeof *a, cmp);
        qsort(b, REPS, sizeof *b, cmp);
        if (rank == 0)
            printf("%s,%d,%.3f,%.3f,%.2f\n", names[op], bytes, a[REPS / 2], b[REPS / 2],
                   a[REPS / 2] / b[REPS / 2]);
    }
    free(s);
    free(r);
    free(counts);
    free(displs);
    MPI_Finalize();
    return 0;
}
