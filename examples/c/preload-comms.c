/* preload-comms: an unmodified MPI program whose collectives run on communicators of
 * every kind a program makes: a duplicate of world, the node's (MPI_Comm_split_type
 * SHARED), the even and the odd ranks, each half, world in reversed order (key -rank),
 * a group's half (MPI_Comm_create_group), a 2-D Cartesian grid and its rows and columns
 * (MPI_Cart_create, MPI_Cart_sub), and an intercommunicator's merge
 * (MPI_Intercomm_merge). On each: MPI_Allreduce, MPI_Reduce to every root, MPI_Bcast from
 * every root, MPI_Allgather and MPI_Barrier, at 1, 7 and 1031 ints, twice (the first
 * blocking call on a communicator sets topo-run's context up), each result checked
 * against a reference computed locally. Then what the library hands to MPI without
 * entering it: a communicator of one rank freed and its handle (which MPI reuses) given to
 * a duplicate of world; and a split whose first collective is an MPI_MINLOC reduction.
 * Then MPI_Comm_split and MPI_Comm_free in a loop with no collective in between.
 *
 * Last lines: "digest: HEX" (rank 0; the same with and without topo-run) and
 * "N passed, M failed". Exit status 1 on any failure.
 *
 *   mpicc -O2 -o preload-comms preload-comms.c
 *   srun --mpi=pmix topo-run -- ./preload-comms [--quick]
 */
#include "check.h"

#include <stdlib.h>
#include <string.h>

/* The value world rank `w` contributes at index i. */
static int val(int w, long i) { return (int)((w * 131L + i * 7L) % 100003L); }

/* Every collective on `comm`, whose rank r is world rank `world_of[r]`. */
static void on(MPI_Comm comm, const char *what) {
    int r, n;
    int *world_of = world_ranks(comm, &r, &n);
    const long counts[] = {1, 7, 1031};
    int ok = 1;
    for (int pass = 0; pass < 2; pass++) {
        for (int c = 0; c < 3; c++) {
            long count = counts[c];
            int *mine = malloc(sizeof(int) * count), *out = malloc(sizeof(int) * count);
            int *all = malloc(sizeof(int) * count * n);
            for (long i = 0; i < count; i++) mine[i] = val(rank, i);
            MPI_Allreduce(mine, out, (int)count, MPI_INT, MPI_SUM, comm);
            for (long i = 0; i < count; i++) {
                long want = 0;
                for (int k = 0; k < n; k++) want += val(world_of[k], i);
                ok &= out[i] == want;
                hash(out[i]);
            }
            for (int root = 0; root < n; root++) {
                memset(out, 0, sizeof(int) * count);
                MPI_Reduce(mine, out, (int)count, MPI_INT, MPI_MAX, root, comm);
                if (r == root) {
                    for (long i = 0; i < count; i++) {
                        int want = val(world_of[0], i);
                        for (int k = 1; k < n; k++)
                            if (val(world_of[k], i) > want) want = val(world_of[k], i);
                        ok &= out[i] == want;
                        hash(out[i]);
                    }
                }
                for (long i = 0; i < count; i++) out[i] = r == root ? mine[i] : -1;
                MPI_Bcast(out, (int)count, MPI_INT, root, comm);
                for (long i = 0; i < count; i++) ok &= out[i] == val(world_of[root], i);
            }
            MPI_Allgather(mine, (int)count, MPI_INT, all, (int)count, MPI_INT, comm);
            for (int k = 0; k < n; k++)
                for (long i = 0; i < count; i++) ok &= all[k * count + i] == val(world_of[k], i);
            MPI_Barrier(comm);
            free(mine);
            free(out);
            free(all);
        }
    }
    free(world_of);
    result(ok, what);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    on(c, "a duplicate of world");
    MPI_Comm_free(&c);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &c);
    on(c, "the node's communicator (MPI_Comm_split_type SHARED)");
    MPI_Comm_free(&c);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &c);
    on(c, "the even and the odd ranks");
    MPI_Comm_free(&c);
    MPI_Comm_split(MPI_COMM_WORLD, rank < size / 2, rank, &c);
    on(c, "each half");
    MPI_Comm_free(&c);
    MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &c);
    on(c, "world in reversed order");
    MPI_Comm_free(&c);

    /* A group's half, made only by its members (MPI_Comm_create_group). */
    MPI_Group world_group, half;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    int range[1][3] = {{rank < size / 2 ? 0 : size / 2, rank < size / 2 ? size / 2 - 1 : size - 1, 1}};
    MPI_Group_range_incl(world_group, 1, range, &half);
    MPI_Comm_create_group(MPI_COMM_WORLD, half, 7, &c);
    on(c, "a group's half (MPI_Comm_create_group)");
    MPI_Comm_free(&c);
    MPI_Group_free(&half);
    MPI_Group_free(&world_group);

    /* A 2-D grid, its rows and its columns. */
    int dims[2] = {0, 0}, periods[2] = {0, 0};
    MPI_Dims_create(size, 2, dims);
    MPI_Comm grid, line;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &grid);
    on(grid, "a Cartesian grid (MPI_Cart_create, reordering allowed)");
    int keep_row[2] = {0, 1}, keep_col[2] = {1, 0};
    MPI_Cart_sub(grid, keep_row, &line);
    on(line, "a grid's row (MPI_Cart_sub)");
    MPI_Comm_free(&line);
    MPI_Cart_sub(grid, keep_col, &line);
    on(line, "a grid's column (MPI_Cart_sub)");
    MPI_Comm_free(&line);
    MPI_Comm_free(&grid);

    /* An intercommunicator between the even and the odd ranks, merged, odd ranks first. */
    if (size >= 2) {
        MPI_Comm part, inter;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &part);
        MPI_Intercomm_create(part, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 11, &inter);
        MPI_Intercomm_merge(inter, rank % 2 == 0, &c);
        on(c, "an intercommunicator's merge (MPI_Intercomm_merge)");
        MPI_Comm_free(&c);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&part);
    }

    /* Calls on a communicator of one rank go to MPI without entering the library once it
     * has seen one; a communicator MPI then creates in the same handle takes topo-run's
     * path again. (A rank that still handed its calls to MPI would leave the others
     * waiting: under TOPO_RUN_STATS=1, as the tests run it, node leaders count every call
     * and so always look the communicator up.) */
    for (int i = 0; i < 3; i++) {
        MPI_Comm alone;
        MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &alone);
        int ok = 1;
        for (int k = 0; k < 100; k++) {
            int x = val(rank, k), y = -1;
            MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, alone);
            ok &= y == x;
        }
        result(ok, "a communicator of one rank");
        MPI_Comm_free(&alone);
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        on(c, "a duplicate of world made after freeing a communicator of one rank");
        MPI_Comm_free(&c);
    }
    /* A reversed split whose first collective is an MPI_MINLOC reduction (an operation of
     * MPI's, which does not set topo-run's context up on any rank), then every other. */
    {
        MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &c);
        struct {
            int v, i;
        } in = {val(rank, 3) % 17, rank}, out = {-1, -1};
        MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MINLOC, c);
        int want = 17, at = -1;
        for (int w = 0; w < size; w++)
            if (val(w, 3) % 17 < want) {
                want = val(w, 3) % 17;
                at = w;
            }
        result(out.v == want && out.i == at, "MPI_MINLOC as a split's first collective");
        hash(out.v);
        hash(out.i);
        on(c, "world in reversed order after an MPI_MINLOC reduction");
        MPI_Comm_free(&c);
    }

    /* Split and free in a loop, no collective in between: nothing of topo-run's runs. */
    int loops = quick ? 200 : 2000;
    for (int i = 0; i < loops; i++) {
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &c);
        MPI_Comm_free(&c);
    }
    result(1, "split and free in a loop");
    int rc = report();
    MPI_Finalize();
    return rc;
}
