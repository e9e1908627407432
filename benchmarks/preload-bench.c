/* preload-bench: what an unmodified C program gains from the PMPI library. In one job it
 * times MPI_Bcast, MPI_Reduce, MPI_Allreduce, MPI_Reduce_scatter (every rank's block the
 * size given, so the contribution is ranks times it) and MPI_Barrier (ten back to back),
 * and MPI_Ibcast (of MPI_BYTE),
 * MPI_Iallreduce, MPI_Ibarrier, MPI_Ireduce_scatter_block (blocks of the size given) and
 * MPI_Iscan (after one MPI_Scan, at which topo-run's context agrees on the Scan's form)
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

/* The communicator the operations run on, and every rank's count for MPI_Reduce_scatter. */
static MPI_Comm on;
static int *counts;

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
    case 3: {
        MPI_Request q;
        if (native) PMPI_Ibcast(r, count * 8, MPI_BYTE, 0, on, &q), PMPI_Wait(&q, MPI_STATUS_IGNORE);
        else MPI_Ibcast(r, count * 8, MPI_BYTE, 0, on, &q), MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    }
    case 4: {
        MPI_Request q;
        if (native) PMPI_Iallreduce(s, r, count, MPI_DOUBLE, MPI_SUM, on, &q), PMPI_Wait(&q, MPI_STATUS_IGNORE);
        else MPI_Iallreduce(s, r, count, MPI_DOUBLE, MPI_SUM, on, &q), MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    }
    case 5: {
        MPI_Request q;
        if (native) PMPI_Ibarrier(on, &q), PMPI_Wait(&q, MPI_STATUS_IGNORE);
        else MPI_Ibarrier(on, &q), MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    }
    case 6: {
        int n;
        MPI_Comm_size(on, &n);
        for (int q = 0; q < n; q++) counts[q] = count;
        if (native) PMPI_Reduce_scatter(s, r, counts, MPI_DOUBLE, MPI_SUM, on);
        else MPI_Reduce_scatter(s, r, counts, MPI_DOUBLE, MPI_SUM, on);
        break;
    }
    case 8: {
        MPI_Request q;
        if (native)
            PMPI_Ireduce_scatter_block(s, r, count, MPI_DOUBLE, MPI_SUM, on, &q), PMPI_Wait(&q, MPI_STATUS_IGNORE);
        else MPI_Ireduce_scatter_block(s, r, count, MPI_DOUBLE, MPI_SUM, on, &q), MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    }
    case 9: {
        MPI_Request q;
        if (native) PMPI_Iscan(s, r, count, MPI_DOUBLE, MPI_SUM, on, &q), PMPI_Wait(&q, MPI_STATUS_IGNORE);
        else MPI_Iscan(s, r, count, MPI_DOUBLE, MPI_SUM, on, &q), MPI_Wait(&q, MPI_STATUS_IGNORE);
        break;
    }
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
    const char *names[10] = {"bcast",    "reduce",         "allreduce",   "ibcast",
                             "iallreduce", "ibarrier",     "reduce_scatter", "barrier x10",
                             "ireduce_scatter_block", "iscan"};
    const char *only = argc > 3 ? argv[3] : NULL;
    counts = malloc(size * sizeof(int));
    const int max = 1 << 21; /* doubles: 16 MiB */
    double *s = malloc(max * sizeof(double)), *r = malloc(max * sizeof(double));
    double *a = malloc(iters * sizeof(double)), *b = malloc(iters * sizeof(double));
    for (int i = 0; i < max; i++) s[i] = rank + i % 7, r[i] = 0;
    if (rank == 0) printf("op,bytes,ranks,topo_us,native_us,ratio\n");
    for (int op = 0; op < 10; op++) {
        if (only && strcmp(names[op], only)) continue;
        /* The Scan's hierarchical form is agreed at a blocking Scan (a start does not wait). */
        if (op == 9) MPI_Scan(s, r, 1, MPI_DOUBLE, MPI_SUM, on);
        /* A barrier has no size: one row; a Reduce_scatter's contribution is ranks blocks. */
        long most = op == 5 || op == 7 ? 8 : op == 6 || op == 8 ? 8L * max / size : 8L * max;
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
    free(s), free(r), free(a), free(b), free(counts);
    MPI_Finalize();
    return 0;
}
