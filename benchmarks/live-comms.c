/* live-comms: many communicators alive at once, each with collectives, as programs that
 * keep a communicator per block row, per pool or per solver level hold them. N times
 * MPI_Comm_split of world (KIND: dup, the ranks in world's order; reversed, key -rank;
 * parity, the even and the odd ranks), all kept; on each, in turn, a first 8-byte
 * MPI_Allreduce (which sets topo-run's context up), then MPI_Bcast, MPI_Reduce,
 * MPI_Allgather, MPI_Barrier and MPI_Iallreduce, every result checked. Then, on all of
 * them again, ROUNDS more rounds of the same calls. The same through MPI's own entry points
 * (PMPI_*), in the same job: the table gives, for 1, 16 and N live communicators, the
 * slowest rank's mean time of the split and the first collective (where topo-run sets its
 * context up: in the split for a communicator congruent to world, else in the first
 * blocking collective) and of one later round of all six calls, and what /dev/shm holds on rank 0's node (used bytes,
 * statvfs) against before the communicators existed.
 *
 *   mpicc -O2 -o live-comms benchmarks/live-comms.c
 *   srun --mpi=pmix --cpu-bind=cores topo-run -- ./live-comms [N] [KIND] [ROUNDS]
 *
 * N live communicators (default 1000), KIND dup (default), reversed or parity, ROUNDS
 * (default 2). The last line is "live-comms: ok" when every result was right.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

static int rank, size, failures;

/* Bytes in use in /dev/shm. */
static long long shm_used(void) {
    struct statvfs v;
    if (statvfs("/dev/shm", &v) != 0) return -1;
    return (long long)(v.f_blocks - v.f_bfree) * (long long)v.f_frsize;
}

static void check(int ok, const char *what, int i) {
    if (!ok && failures++ < 5) fprintf(stderr, "rank %d: %s wrong on communicator %d\n", rank, what, i);
}

#define CALL(native, f, ...) ((native) ? P##f(__VA_ARGS__) : f(__VA_ARGS__))

/* The six calls on communicator `c` (the `i`-th), every result checked. */
static void round_on(int native, MPI_Comm c, int i) {
    int me, n;
    MPI_Comm_rank(c, &me);
    MPI_Comm_size(c, &n);
    long long v = me + i, sum = 0;
    CALL(native, MPI_Allreduce, &v, &sum, 1, MPI_LONG_LONG, MPI_SUM, c);
    check(sum == (long long)n * (n - 1) / 2 + (long long)n * i, "MPI_Allreduce", i);
    int root = i % n;
    long long b = me == root ? 1000 + i : -1;
    CALL(native, MPI_Bcast, &b, 1, MPI_LONG_LONG, root, c);
    check(b == 1000 + i, "MPI_Bcast", i);
    long long red = 0;
    CALL(native, MPI_Reduce, &v, &red, 1, MPI_LONG_LONG, MPI_MAX, root, c);
    check(me != root || red == n - 1 + i, "MPI_Reduce", i);
    int mine = me * 7 + i, *all = malloc(sizeof(int) * n);
    CALL(native, MPI_Allgather, &mine, 1, MPI_INT, all, 1, MPI_INT, c);
    for (int r = 0; r < n; r++) check(all[r] == r * 7 + i, "MPI_Allgather", i);
    free(all);
    CALL(native, MPI_Barrier, c);
    MPI_Request req;
    long long isum = 0;
    CALL(native, MPI_Iallreduce, &v, &isum, 1, MPI_LONG_LONG, MPI_SUM, c, &req);
    CALL(native, MPI_Wait, &req, MPI_STATUS_IGNORE);
    check(isum == sum, "MPI_Iallreduce", i);
}

static double slowest(double t) {
    double s;
    PMPI_Allreduce(&t, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return s;
}

/* One pass: make `n` communicators, time the first collective on each and one round of
 * all, with /dev/shm's use at 1, 16 and n live ones; then free them. */
static void pass(int native, int n, int color_of_parity, int reversed, int rounds, double first[3],
                 double later[3], long long shm[3]) {
    MPI_Comm *c = malloc(sizeof(MPI_Comm) * n);
    int marks[3] = {1, 16 < n ? 16 : n, n}, m = 0;
    double t_first = 0, t;
    for (int i = 0; i < n; i++) {
        int color = color_of_parity ? rank % 2 : 0, key = reversed ? -rank : rank;
        PMPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        CALL(native, MPI_Comm_split, MPI_COMM_WORLD, color, key, &c[i]);
        long long v = 1, s = 0;
        CALL(native, MPI_Allreduce, &v, &s, 1, MPI_LONG_LONG, MPI_SUM, c[i]);
        t_first += MPI_Wtime() - t;
        int cn;
        MPI_Comm_size(c[i], &cn);
        check(s == cn, "the first MPI_Allreduce", i);
        round_on(native, c[i], i);
        while (m < 3 && i + 1 == marks[m]) {
            PMPI_Barrier(MPI_COMM_WORLD);
            shm[m] = shm_used();
            first[m] = slowest(t_first / (i + 1));
            m++;
        }
    }
    for (int k = 0; k < 3; k++) later[k] = 0;
    for (int r = 0; r < rounds; r++) {
        /* A round over the first 1, 16 and all communicators, timed apart. */
        int from = 0;
        for (int k = 0; k < 3; k++) {
            PMPI_Barrier(MPI_COMM_WORLD);
            t = MPI_Wtime();
            for (int i = from; i < marks[k]; i++) round_on(native, c[i], i);
            later[k] += MPI_Wtime() - t;
            from = marks[k];
        }
    }
    /* Per communicator, over the rounds: the first 1, then 16, then all of them. */
    double acc = 0;
    for (int k = 0; k < 3; k++) {
        acc += later[k];
        later[k] = rounds ? slowest(acc / rounds / marks[k]) : 0;
    }
    for (int i = 0; i < n; i++) CALL(native, MPI_Comm_free, &c[i]);
    free(c);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    const char *kind = argc > 2 ? argv[2] : "dup";
    int rounds = argc > 3 ? atoi(argv[3]) : 2;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (n < 1 || (strcmp(kind, "dup") && strcmp(kind, "reversed") && strcmp(kind, "parity"))) {
        if (rank == 0) fprintf(stderr, "usage: live-comms [N >= 1] [dup|reversed|parity] [ROUNDS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int parity = !strcmp(kind, "parity"), reversed = !strcmp(kind, "reversed");
    PMPI_Barrier(MPI_COMM_WORLD);
    long long before = shm_used();
    double first[2][3], later[2][3];
    long long shm[2][3];
    for (int native = 1; native >= 0; native--)
        pass(native, n, parity, reversed, rounds, first[native], later[native], shm[native]);
    int marks[3] = {1, 16 < n ? 16 : n, n};
    if (rank == 0) {
        printf("live-comms: %d ranks, %s, %d rounds; slowest rank, per communicator\n", size, kind, rounds);
        printf("%-6s %-13s %-13s %-14s %-14s %-16s %s\n", "live", "setup topo", "setup MPI",
               "round topo", "round MPI", "/dev/shm topo", "/dev/shm MPI");
        for (int k = 0; k < 3; k++)
            printf("%-6d %-10.1f us %-10.1f us %-11.1f us %-11.1f us %-+12lld KiB %+lld KiB\n", marks[k],
                   first[0][k] * 1e6, first[1][k] * 1e6, later[0][k] * 1e6, later[1][k] * 1e6,
                   (shm[0][k] - before) / 1024, (shm[1][k] - before) / 1024);
    }
    int all;
    PMPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf(all ? "live-comms: %d wrong results\n" : "live-comms: ok\n", all);
    MPI_Finalize();
    return all != 0;
}
