/* comm-churn: communicators made and freed in a loop, as BLACS and many solvers make them:
 * N times MPI_Comm_split of world (KIND: dup, the ranks in world's order, congruent;
 * reversed, key -rank; parity, the even and the odd ranks), then CALLS MPI_Allreduce of
 * 8 bytes on it (0: none), then MPI_Comm_free. The loop runs through the program's own
 * calls (through libtopo_preload.so when topo-run preloads it) and through MPI's own
 * entry points (PMPI_*), interleaved, 5 times each; the table gives the medians of the
 * slowest rank's time per communicator, the ratio topo/native, and the difference (what
 * topo-run's context costs per communicator). Last, what the process holds after the
 * loops against before them: open file descriptors, files in /dev/shm and resident memory
 * (constant: nothing grows with the number of communicators made).
 *
 *   mpicc -O2 -o comm-churn benchmarks/comm-churn.c
 *   srun --mpi=pmix --cpu-bind=cores topo-run -- ./comm-churn [N] [CALLS] [KIND]
 *
 * N communicators per timing (default 1000), CALLS collectives on each (default 1), KIND
 * dup (default), reversed or parity.
 */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Entries of a directory (without . and ..). */
static int entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* This process's resident memory in KiB. */
static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = atol(line + 6);
    if (f) fclose(f);
    return kib;
}

/* Seconds per communicator of the slowest rank, for `n` rounds. */
static double loop(int native, int n, int calls, int color, int key) {
    double s = 1, r;
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        MPI_Comm c;
        if (native) {
            PMPI_Comm_split(MPI_COMM_WORLD, color, key, &c);
            for (int k = 0; k < calls; k++) PMPI_Allreduce(&s, &r, 1, MPI_DOUBLE, MPI_SUM, c);
            PMPI_Comm_free(&c);
        } else {
            MPI_Comm_split(MPI_COMM_WORLD, color, key, &c);
            for (int k = 0; k < calls; k++) MPI_Allreduce(&s, &r, 1, MPI_DOUBLE, MPI_SUM, c);
            MPI_Comm_free(&c);
        }
    }
    double t = (MPI_Wtime() - t0) / n, slowest;
    PMPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 1000, calls = argc > 2 ? atoi(argv[2]) : 1;
    const char *kind = argc > 3 ? argv[3] : "dup";
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int color = 0, key = rank;
    if (!strcmp(kind, "reversed")) key = size - rank;
    else if (!strcmp(kind, "parity")) color = rank % 2;
    else if (strcmp(kind, "dup")) {
        if (rank == 0) fprintf(stderr, "comm-churn: KIND is dup, reversed or parity\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    enum { REPS = 5 };
    double a[REPS], b[REPS];
    loop(0, n / 10 + 1, calls, color, key);
    loop(1, n / 10 + 1, calls, color, key);
    int fds0 = entries("/proc/self/fd"), shm0 = entries("/dev/shm");
    long rss0 = rss_kib();
    for (int k = 0; k < REPS; k++) {
        a[k] = loop(0, n, calls, color, key);
        b[k] = loop(1, n, calls, color, key);
    }
    int fds1 = entries("/proc/self/fd"), shm1 = entries("/dev/shm");
    long rss1 = rss_kib();
    qsort(a, REPS, sizeof *a, cmp);
    qsort(b, REPS, sizeof *b, cmp);
    if (rank == 0) {
        printf("kind,calls,topo_us,native_us,ratio,setup_us\n");
        printf("%s,%d,%.2f,%.2f,%.2f,%.2f\n", kind, calls, a[REPS / 2] * 1e6, b[REPS / 2] * 1e6,
               a[REPS / 2] / b[REPS / 2], (a[REPS / 2] - b[REPS / 2]) * 1e6);
        printf("rank 0 after %d communicators: fds %d -> %d, /dev/shm files %d -> %d, "
               "resident %ld -> %ld KiB\n",
               2 * REPS * n, fds0, fds1, shm0, shm1, rss0, rss1);
    }
    MPI_Finalize();
    return 0;
}
