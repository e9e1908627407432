/* mpi-hello: a plain MPI program for the launcher's end-to-end tests.
 *
 * Every rank reports its rank, size and host, and checks an Allreduce and a Bcast
 * against the expected values. Prints "OK rank R of N on HOST" and exits 0 on success;
 * prints "FAIL ..." and exits 1 otherwise. It also prints whether TOPO_RUN_PLAN is set. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, len, ok = 1;
    char host[MPI_MAX_PROCESSOR_NAME];
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "FAIL MPI_Init\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);

    long mine = rank + 1, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (sum != (long)size * (size + 1) / 2) ok = 0;

    int token = rank == size - 1 ? 4242 : -1;
    MPI_Bcast(&token, 1, MPI_INT, size - 1, MPI_COMM_WORLD);
    if (token != 4242) ok = 0;

    const char *plan = getenv("TOPO_RUN_PLAN");
    printf("%s rank %d of %d on %s plan=%s args=%d\n", ok ? "OK" : "FAIL", rank, size, host,
           plan ? "yes" : "no", argc - 1);
    for (int i = 1; i < argc; i++) printf("arg[%d]=<%s>\n", i, argv[i]);
    MPI_Finalize();
    return ok ? 0 : 1;
}
