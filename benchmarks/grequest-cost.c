/* grequest-cost: what a generalized request costs against Open MPI's own small Ibcast.
 *
 * A PMPI library that runs a nonblocking collective itself must return a request that the
 * program's MPI_Wait and MPI_Test accept: a generalized request. This times, each after a
 * barrier, 20,000 times: PMPI_Grequest_start + PMPI_Grequest_complete + PMPI_Wait (the
 * request alone, no work), PMPI_Ibcast + PMPI_Wait of 8 bytes and PMPI_Bcast of 8 bytes
 * (MPI's own), and prints each rank's medians in microseconds.
 *
 *   mpicc -O2 -o grequest-cost benchmarks/grequest-cost.c
 *   srun -N1 -n2 --mpi=pmix --cpu-bind=cores ./grequest-cost
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int query(void *state, MPI_Status *status) {
    (void)state;
    MPI_Status_set_elements(status, MPI_BYTE, 0);
    MPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int release(void *state) {
    (void)state;
    return MPI_SUCCESS;
}

static int cancel(void *state, int complete) {
    (void)state, (void)complete;
    return MPI_SUCCESS;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_us(double *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return v[n / 2] * 1e6;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    enum { N = 20000 };
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double *greq = malloc(N * sizeof *greq), *ibcast = malloc(N * sizeof *ibcast),
           *bcast = malloc(N * sizeof *bcast);
    char buf[8] = {0};
    for (int i = 0; i < N; i++) {
        MPI_Request r;
        PMPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        PMPI_Grequest_start(query, release, cancel, NULL, &r);
        PMPI_Grequest_complete(r);
        PMPI_Wait(&r, MPI_STATUS_IGNORE);
        greq[i] = MPI_Wtime() - t;
        PMPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        PMPI_Ibcast(buf, 8, MPI_BYTE, 0, MPI_COMM_WORLD, &r);
        PMPI_Wait(&r, MPI_STATUS_IGNORE);
        ibcast[i] = MPI_Wtime() - t;
        PMPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        PMPI_Bcast(buf, 8, MPI_BYTE, 0, MPI_COMM_WORLD);
        bcast[i] = MPI_Wtime() - t;
    }
    printf("rank %d: generalized request (start, complete, wait) %.3f us; MPI_Ibcast + "
           "MPI_Wait of 8 bytes %.3f us; MPI_Bcast of 8 bytes %.3f us (medians of %d)\n",
           rank, median_us(greq, N), median_us(ibcast, N), median_us(bcast, N), N);
    free(greq), free(ibcast), free(bcast);
    MPI_Finalize();
    return 0;
}
