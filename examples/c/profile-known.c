/* A program whose collective calls are known in advance, to check topo-run's profile
 * (`topo-run --profile FILE`) against them: tests/e2e/preload.sh runs it with 2 x 2 ranks
 * and compares the file with the calls below.
 *
 * Per rank:
 *   on MPI_COMM_WORLD   100 MPI_Allreduce of one double (8 bytes)
 *                         3 MPI_Allreduce of one double with a user-defined operation
 *                        10 MPI_Bcast of 4096 bytes from rank 0
 *                         5 MPI_Barrier
 *                         4 MPI_Iallreduce of one double, each waited for
 *                         2 MPI_Alltoall of one int per rank (4 bytes)
 *                         1 MPI_Reduce of one int (4 bytes) to rank 0: the verdict
 *   on a split           7 MPI_Allreduce of two doubles (16 bytes): ranks of one parity,
 *                        in reversed order
 *   on MPI_COMM_SELF     6 MPI_Bcast of one double (8 bytes), handed to MPI (one rank)
 *
 * Prints "N passed, 0 failed" (rank 0) when every result is right. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < *len; i++) ((double *)inout)[i] += ((double *)in)[i];
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, bad = 0, checks = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double expect = size * (size - 1) / 2.0;

    for (int i = 0; i < 100; i++) {
        double x = rank, y = 0;
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        bad += y != expect;
        checks++;
    }
    MPI_Op op;
    MPI_Op_create(user_sum, 1, &op);
    for (int i = 0; i < 3; i++) {
        double x = rank, y = 0;
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
        bad += y != expect;
        checks++;
    }
    MPI_Op_free(&op);
    char buf[4096];
    for (int i = 0; i < 10; i++) {
        for (int j = 0; j < 4096; j++) buf[j] = rank == 0 ? (char)(i + j) : 0;
        MPI_Bcast(buf, 4096, MPI_CHAR, 0, MPI_COMM_WORLD);
        for (int j = 0; j < 4096; j++) bad += buf[j] != (char)(i + j);
        checks++;
    }
    for (int i = 0; i < 5; i++) MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 4; i++) {
        double x = rank, y = 0;
        MPI_Request req;
        MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        bad += y != expect;
        checks++;
    }
    int *out = malloc(sizeof(int) * size), *in = malloc(sizeof(int) * size);
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < size; j++) out[j] = rank * 100 + j;
        MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, MPI_COMM_WORLD);
        for (int j = 0; j < size; j++) bad += in[j] != j * 100 + rank;
        checks++;
    }
    free(out);
    free(in);

    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    int hsize;
    MPI_Comm_size(half, &hsize);
    double hexpect = 0;
    for (int r = rank % 2; r < size; r += 2) hexpect += r;
    for (int i = 0; i < 7; i++) {
        double x[2] = {rank, 1}, y[2] = {0, 0};
        MPI_Allreduce(x, y, 2, MPI_DOUBLE, MPI_SUM, half);
        bad += y[0] != hexpect || y[1] != hsize;
        checks++;
    }
    MPI_Comm_free(&half);

    for (int i = 0; i < 6; i++) {
        double x = rank + i;
        MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_SELF);
        bad += x != rank + i;
        checks++;
    }

    int all_bad = 0;
    MPI_Reduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%d passed, %d failed\n", all_bad ? 0 : checks, all_bad);
    MPI_Finalize();
    return all_bad != 0;
}
