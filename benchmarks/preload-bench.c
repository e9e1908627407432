/* preload-bench: what an unmodified C program gains from the PMPI library. In one job it
 * times MPI_Bcast, MPI_Reduce, MPI_Allreduce, MPI_Reduce_scatter (every rank's block the
 * size given, so the contribution is ranks times it) and MPI_Barrier (ten back to back),
 * and MPI_Ibcast (of MPI_BYTE),
 * MPI_Iallreduce, MPI_Ibarrier, MPI_Ireduce_scatter_block (blocks of the size given) and
 * MPI_Iscan (after one MPI_Scan, at which topo-run's context agrees on the Scan's form),
 * MPI_Iexscan (after one MPI_Exscan), MPI_Igather, MPI_Iscatter, MPI_Igatherv,
 * MPI_Iscatterv, MPI_Iallgatherv, MPI_Ialltoall, MPI_Ialltoallv (every rank's block, and
 * every block of an Alltoall, the size given; the v-forms with every count the same; root
 * 0) and MPI_Ireduce_scatter (blocks of the size given)
 * each followed at once by MPI_Wait (the pure nonblocking
 * time, nothing to overlap), as the program calls them (through
 * libtopo_preload.so when topo-run preloads it) and the same calls made to MPI's own
 * entry points (PMPI_*), interleaved, after a warm-up. Each sample is the slowest rank's
 * time of one call; the table gives medians and the ratio topo/native (below 1: faster).
 *
 *   mpicc -O2 -o preload-bench benchmarks/preload-bench.c
 *   srun --mpi=pmix --cpu-bind=cores topo-run -- ./preload-bench [ITERS] [COMM] [OP]
 *
 * COMM: world (the default) or dup (a duplicate of world, made first). OP: one operation
 * by its name in the table (for example reduce_scatter); all of them without it.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The communicator the operations run on, and every rank's count and displacement for
 * MPI_Reduce_scatter and the v-forms. */
static MPI_Comm on;
static int *counts, *displs;

/* The number of operations in the table. */
#define OPS 19

/* A nonblocking call through the library or MPI's own entry point, then its wait. */
#define NB(native, call, ...)                                                                \
    do {                                                                                     \
        MPI_Request q;                                                                       \
        if (native) P##call(__VA_ARGS__, &q), PMPI_Wait(&q, MPI_STATUS_IGNORE);              \
        else call(__VA_ARGS__, &q), MPI_Wait(&q, MPI_STATUS_IGNORE);                         \
    } while (0)

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One timed call: the slowest rank's time in microseconds. */
static double timed(int op, int native, double *s, double *r, int count) {
    int n;
    MPI_Comm_size(on, &n);
    for (int q = 0; q < n; q++) counts[q] = count, displs[q] = q * count;
    PMPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    switch (op) {
    case 0:
        if (native) PMPI_Bcast(r, count, MPI_DOUBLE, 0, on);
        else MPI_Bcast(r, count, MPI_DOUBLE, 0, on);
        break;
    case 1:
        if (native) PMPI_Reduce(s, r, count, MPI_DOUBLE, MPI_SUM, 0, on);
        else MPI_Reduce(s, r, count, MPI_DOUBLE, MPI_SUM, 0, on);
        break;
    case 2:
        if (native) PMPI_Allreduce(s, r, count, MPI_DOUBLE, MPI_SUM, on);
        else MPI_Allreduce(s, r, count, MPI_DOUBLE, MPI_SUM, on);
        break;
    case 3:
        NB(native, MPI_Ibcast, r, count * 8, MPI_BYTE, 0, on);
        break;
    case 4:
        NB(native, MPI_Iallreduce, s, r, count, MPI_DOUBLE, MPI_SUM, on);
        break;
    case 5:
        NB(native, MPI_Ibarrier, on);
        break;
    case 6: {
        if (native) PMPI_Reduce_scatter(s, r, counts, MPI_DOUBLE, MPI_SUM, on);
        else MPI_Reduce_scatter(s, r, counts, MPI_DOUBLE, MPI_SUM, on);
        break;
    }
    case 8:
        NB(native, MPI_Ireduce_scatter_block, s, r, count, MPI_DOUBLE, MPI_SUM, on);
        break;
    case 9:
        NB(native, MPI_Iscan, s, r, count, MPI_DOUBLE, MPI_SUM, on);
        break;
    case 10:
        NB(native, MPI_Iexscan, s, r, count, MPI_DOUBLE, MPI_SUM, on);
        break;
    case 11:
        NB(native, MPI_Ireduce_scatter, s, r, counts, MPI_DOUBLE, MPI_SUM, on);
        break;
    case 12:
        NB(native, MPI_Igather, s, count, MPI_DOUBLE, r, count, MPI_DOUBLE, 0, on);
        break;
    case 13:
        NB(native, MPI_Iscatter, s, count, MPI_DOUBLE, r, count, MPI_DOUBLE, 0, on);
        break;
    case 14:
        NB(native, MPI_Igatherv, s, count, MPI_DOUBLE, r, counts, displs, MPI_DOUBLE, 0, on);
        break;
    case 15:
        NB(native, MPI_Iscatterv, s, counts, displs, MPI_DOUBLE, r, count, MPI_DOUBLE, 0, on);
        break;
    case 16:
        NB(native, MPI_Iallgatherv, s, count, MPI_DOUBLE, r, counts, displs, MPI_DOUBLE, on);
        break;
    case 17:
        NB(native, MPI_Ialltoall, s, count, MPI_DOUBLE, r, count, MPI_DOUBLE, on);
        break;
    case 18:
        NB(native, MPI_Ialltoallv, s, counts, displs, MPI_DOUBLE, r, counts, displs, MPI_DOUBLE,
           on);
        break;
    default:
        /* Ten back to back: one barrier is too short to time alone. */
        for (int k = 0; k < 10; k++) {
            if (native) PMPI_Barrier(on);
            else MPI_Barrier(on);
        }
    }
    t = (MPI_Wtime() - t) * 1e6;
    double worst;
    PMPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 200;
    if (iters < 1) iters = 1;
    /* COMM: world (the default), or dup, a duplicate of world made through the program's
     * own MPI_Comm_dup (with TOPO_RUN_MAX_COMMS=1 its context is on the node's lanes). */
    on = MPI_COMM_WORLD;
    if (argc > 2 && !strcmp(argv[2], "dup")) MPI_Comm_dup(MPI_COMM_WORLD, &on);
    const char *names[OPS] = {"bcast",    "reduce",         "allreduce",   "ibcast",
                              "iallreduce", "ibarrier",     "reduce_scatter", "barrier x10",
                              "ireduce_scatter_block", "iscan", "iexscan", "ireduce_scatter",
                              "igather", "iscatter", "igatherv", "iscatterv", "iallgatherv",
                              "ialltoall", "ialltoallv"};
    const char *only = argc > 3 ? argv[3] : NULL;
    counts = malloc(size * sizeof(int)), displs = malloc(size * sizeof(int));
    const int max = 1 << 21; /* doubles: 16 MiB */
    double *s = malloc(max * sizeof(double)), *r = malloc(max * sizeof(double));
    double *a = malloc(iters * sizeof(double)), *b = malloc(iters * sizeof(double));
    for (int i = 0; i < max; i++) s[i] = rank + i % 7, r[i] = 0;
    if (rank == 0) printf("op,bytes,ranks,topo_us,native_us,ratio\n");
    for (int op = 0; op < OPS; op++) {
        if (only && strcmp(names[op], only)) continue;
        /* The Scan's hierarchical form is agreed at a blocking Scan (a start does not wait). */
        if (op == 9) MPI_Scan(s, r, 1, MPI_DOUBLE, MPI_SUM, on);
        if (op == 10) MPI_Exscan(s, r, 1, MPI_DOUBLE, MPI_SUM, on);
        /* A barrier has no size: one row; a Reduce_scatter's contribution, a Gather's result
         * and an Alltoall's buffers are ranks blocks. */
        int blockwise = op == 6 || op == 8 || op >= 11;
        long most = op == 5 || op == 7 ? 8 : blockwise ? 8L * max / size : 8L * max;
        for (long bytes = 8; bytes <= most; bytes *= 8) {
            int count = (int)(bytes / 8);
            int n = bytes >= (1 << 20) ? (iters + 9) / 10 : iters;
            for (int w = 0; w < 5; w++) timed(op, 0, s, r, count), timed(op, 1, s, r, count);
            for (int i = 0; i < n; i++) {
                /* Alternate which goes first, so that neither always follows the other. */
                if (i % 2) {
                    a[i] = timed(op, 0, s, r, count);
                    b[i] = timed(op, 1, s, r, count);
                } else {
                    b[i] = timed(op, 1, s, r, count);
                    a[i] = timed(op, 0, s, r, count);
                }
            }
            double ta = median(a, n), tb = median(b, n);
            if (rank == 0)
                printf("%s,%ld,%d,%.2f,%.2f,%.2f\n", names[op], bytes, size, ta, tb, ta / tb);
        }
    }
    free(s), free(r), free(a), free(b), free(counts), free(displs);
    MPI_Finalize();
    return 0;
}
