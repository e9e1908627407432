/* preload-threads: an unmodified MPI program at MPI_THREAD_MULTIPLE whose threads run
 * collectives at the same time, each on a communicator of its own (MPI forbids concurrent
 * collectives on one communicator, not on different ones): four threads per rank, on a
 * duplicate of world, the even and the odd ranks, world in reversed order (key -rank) and
 * each half. Each thread mixes blocking and nonblocking collectives: MPI_Allreduce,
 * MPI_Reduce to every root, MPI_Bcast from every root, MPI_Allgather, MPI_Barrier,
 * MPI_Iallreduce completed by MPI_Wait, MPI_Ibcast completed by an MPI_Test loop, and an
 * MPI_Iallreduce left in flight across a blocking MPI_Allreduce; at 1, 7 and 1031 ints,
 * several passes, every result checked against a reference computed locally. The
 * communicators are created by the main thread (collectives on world), and the first
 * blocking collective of each thread sets its context up while the others do the same.
 *
 * Last line: "N passed, M failed" (rank 0). Exit status 1 on any failure, 2 if MPI does
 * not provide MPI_THREAD_MULTIPLE.
 *
 *   mpicc -O2 -pthread -o preload-threads preload-threads.c
 *   srun --mpi=pmix topo-run -- ./preload-threads [--quick]
 */
#include "check.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4

/* The value world rank `w` contributes at index i in pass p. */
static int val(int w, long i, int p) { return (int)((w * 131L + i * 7L + p * 17L) % 100003L); }

struct job {
    MPI_Comm comm;
    const char *what;
    int ok;
};

static long sum_of(const int *world_of, int n, long i, int p) {
    long s = 0;
    for (int k = 0; k < n; k++) s += val(world_of[k], i, p);
    return s;
}

static int max_of(const int *world_of, int n, long i, int p) {
    int m = val(world_of[0], i, p);
    for (int k = 1; k < n; k++)
        if (val(world_of[k], i, p) > m) m = val(world_of[k], i, p);
    return m;
}

static void *run(void *arg) {
    struct job *job = arg;
    MPI_Comm comm = job->comm;
    int r, n;
    int *world_of = world_ranks(comm, &r, &n);
    const long counts[] = {1, 7, 1031};
    int ok = 1, passes = quick ? 3 : 10;
    for (int p = 0; p < passes; p++) {
        for (int c = 0; c < 3; c++) {
            long count = counts[c];
            int *mine = malloc(sizeof(int) * count), *out = malloc(sizeof(int) * count);
            int *late = malloc(sizeof(int) * count), *all = malloc(sizeof(int) * count * n);
            for (long i = 0; i < count; i++) mine[i] = val(rank, i, p);

            MPI_Allreduce(mine, out, (int)count, MPI_INT, MPI_SUM, comm);
            for (long i = 0; i < count; i++) ok &= out[i] == sum_of(world_of, n, i, p);

            for (int root = 0; root < n; root++) {
                memset(out, 0, sizeof(int) * count);
                MPI_Reduce(mine, out, (int)count, MPI_INT, MPI_MAX, root, comm);
                if (r == root)
                    for (long i = 0; i < count; i++) ok &= out[i] == max_of(world_of, n, i, p);
                for (long i = 0; i < count; i++) out[i] = r == root ? mine[i] : -1;
                MPI_Bcast(out, (int)count, MPI_INT, root, comm);
                for (long i = 0; i < count; i++) ok &= out[i] == val(world_of[root], i, p);
            }

            MPI_Allgather(mine, (int)count, MPI_INT, all, (int)count, MPI_INT, comm);
            for (int k = 0; k < n; k++)
                for (long i = 0; i < count; i++) ok &= all[k * count + i] == val(world_of[k], i, p);
            MPI_Barrier(comm);

            MPI_Request req;
            MPI_Iallreduce(mine, out, (int)count, MPI_INT, MPI_SUM, comm, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            for (long i = 0; i < count; i++) ok &= out[i] == sum_of(world_of, n, i, p);

            int root = p % n, done = 0;
            for (long i = 0; i < count; i++) out[i] = r == root ? mine[i] : -1;
            MPI_Ibcast(out, (int)count, MPI_INT, root, comm, &req);
            while (!done) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            for (long i = 0; i < count; i++) ok &= out[i] == val(world_of[root], i, p);

            /* A nonblocking collective in flight across a blocking one on the same
             * communicator. */
            MPI_Iallreduce(mine, late, (int)count, MPI_INT, MPI_MAX, comm, &req);
            MPI_Allreduce(mine, out, (int)count, MPI_INT, MPI_SUM, comm);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            for (long i = 0; i < count; i++)
                ok &= late[i] == max_of(world_of, n, i, p) && out[i] == sum_of(world_of, n, i, p);
            free(mine);
            free(out);
            free(late);
            free(all);
        }
    }
    free(world_of);
    job->ok = ok;
    return NULL;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided != MPI_THREAD_MULTIPLE) {
        if (rank == 0) fprintf(stderr, "MPI does not provide MPI_THREAD_MULTIPLE\n");
        MPI_Finalize();
        return 2;
    }
    struct job jobs[THREADS] = {
        {MPI_COMM_NULL, "a duplicate of world", 0},
        {MPI_COMM_NULL, "the even and the odd ranks", 0},
        {MPI_COMM_NULL, "world in reversed order", 0},
        {MPI_COMM_NULL, "each half", 0},
    };
    MPI_Comm_dup(MPI_COMM_WORLD, &jobs[0].comm);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &jobs[1].comm);
    MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &jobs[2].comm);
    MPI_Comm_split(MPI_COMM_WORLD, rank < size / 2, rank, &jobs[3].comm);
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, run, &jobs[t]);
    for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
    char what[128];
    for (int t = 0; t < THREADS; t++) {
        snprintf(what, sizeof what, "%s, in a thread of its own", jobs[t].what);
        result(jobs[t].ok, what);
        MPI_Comm_free(&jobs[t].comm);
    }
    /* World's collectives from the main thread afterwards still agree. */
    int one = 1, n = 0;
    MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    hash(n);
    result(n == size, "an allreduce on world after the threads");
    int rc = report();
    MPI_Finalize();
    return rc;
}
