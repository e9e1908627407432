/* check.h: what the C test programs of the PMPI library share. Each case ends in
 * result(), which counts it as passed only if every rank says so; the values a rank
 * received go into digest through hash(), and rank 0 prints both at the end (report()),
 * so that a run under topo-run can be compared with a run without it.
 *
 * The cross-rank agreement goes to PMPI_Allreduce, MPI's own, so that the library under
 * test never checks itself. */
#ifndef TOPO_RUN_CHECK_H
#define TOPO_RUN_CHECK_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size, quick, passed, failed;
static uint64_t digest = 1469598103934665603ull; /* FNV-1a */

/* Adds the 8 bytes of v to the digest. */
static void hash(long long v) {
    for (int i = 0; i < 8; i++) {
        digest ^= (uint64_t)((v >> (8 * i)) & 0xff);
        digest *= 1099511628211ull;
    }
}

/* One case: passed if ok on every rank; rank 0 names a failure on stderr. */
static void result(int ok, const char *what) {
    int all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (all) {
        passed++;
    } else {
        failed++;
        if (rank == 0) fprintf(stderr, "FAIL %s\n", what);
    }
}

/* The world rank of each rank of `comm` (collective over it; `n` gets its size, `r` this
 * rank's rank in it). The caller frees the array. */
static inline int *world_ranks(MPI_Comm comm, int *r, int *n) {
    MPI_Comm_rank(comm, r);
    MPI_Comm_size(comm, n);
    int *world_of = malloc(sizeof(int) * *n);
    MPI_Allgather(&rank, 1, MPI_INT, world_of, 1, MPI_INT, comm);
    return world_of;
}

/* The last lines, on rank 0: "digest: HEX" and "N passed, M failed". Returns the exit
 * status (1 on any failure). */
static int report(void) {
    if (rank == 0) {
        printf("digest: %016llx\n", (unsigned long long)digest);
        printf("%d passed, %d failed\n", passed, failed);
    }
    return failed ? 1 : 0;
}

#endif
