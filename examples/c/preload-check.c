/* preload-check: an unmodified MPI program that exercises every collective topo-run's
 * PMPI library intercepts (MPI_Bcast, MPI_Reduce, MPI_Allreduce, MPI_Barrier,
 * MPI_Allgather, MPI_Gather, MPI_Scatter, MPI_Scan, MPI_Exscan, MPI_Reduce_scatter_block,
 * MPI_Reduce_scatter, MPI_Alltoall, MPI_Alltoallv, MPI_Allgatherv) and checks each result against a reference computed locally.
 *
 * Covered: every predefined C integer, floating point, logical and byte type with every
 * predefined operation the standard defines on it; counts 0, 1, 7, 1031 and 65539 (and
 * 2^20+3 for int and double); roots first, middle and last; MPI_IN_PLACE (Allreduce,
 * Scan, Exscan, and Reduce at the root); Scan and Exscan with the same matrix (Exscan's
 * rank 0 result, undefined, not read); MPI_COMM_WORLD, a duplicate of it and a split that keeps its order
 * (both congruent, so topo-run's path), and calls topo-run must hand to MPI: a split in
 * reversed order, a split into halves, a user-defined (non-commutative) operation,
 * MPI_MINLOC on MPI_2INT; errors MPI must report (bad root, negative count, null datatype,
 * null op, a derived type not committed) under MPI_ERRORS_RETURN; broadcasts of derived types (topo-run packs them): a
 * strided vector, and ranks passing different datatypes with the same type signature;
 * 2000 back-to-back calls. MPI_Allgather: counts 0, 1, primes and the 8 KiB boundary
 * (the Allgather's in-place block size) +-1 (and a total of 16 MiB), in place and not, on world and a duplicate; send
 * and receive types that differ with the same signature (contiguous, strided vector,
 * MPI_DOUBLE_INT against an equivalent struct); back to back with Allreduce. MPI_Gather
 * and MPI_Scatter: the same counts to and from the first, middle and last root, in place
 * at the root and not, on world, a duplicate and world in reversed order; a strided vector
 * at the root against 4 MPI_INT or a contiguous type elsewhere. MPI_Reduce_scatter_block and
 * MPI_Reduce_scatter (counts varying with the rank, zero for every third) of the same
 * counts, in place and not, on world, a duplicate and world reversed. MPI_Alltoall: the
 * same counts (and 16 MiB in all), in place and not, on world, a duplicate and world
 * reversed; a strided vector or a contiguous type received against MPI_INT or a contiguous
 * type sent; an Alltoall every 4th back-to-back call. MPI_Alltoallv: blocks that differ by
 * pair (none for some), received in reversed rank order with gaps, in place and not, on
 * world, a duplicate and world reversed; a strided vector type received on odd ranks.
 * MPI_Allgatherv: blocks that differ by rank (none for some), packed in rank order or
 * reversed with gaps, in place and not, up to 24 MiB in all, on world, a duplicate and
 * world reversed; a strided vector type received on odd ranks.
 *
 * Last lines: "digest: HEX" (rank 0; the same with and without topo-run) and
 * "N passed, M failed". Exit status 1 on any failure.
 *
 *   mpicc -O2 -o preload-check preload-check.c
 *   srun --mpi=pmix topo-run -- ./preload-check [--quick] [--brief] [--thread-multiple] [--die RANK]
 *
 * --quick: fewer counts. --brief (with or without --quick): every path once more than
 * repeated, for MPIs that busy-poll on oversubscribed cores (each call there costs
 * scheduler slices): the type and operation matrix at count 1031 only, the 2^20+3 case
 * for double only, 400 back-to-back calls. --thread-multiple:
 * MPI_Init_thread(MPI_THREAD_MULTIPLE).
 * --die RANK: that rank kills itself (SIGKILL) in the middle of a loop of Allreduces, to
 * test that the others stop with a message instead of waiting forever. --on-dup: that
 * loop runs on a duplicate of world (with TOPO_RUN_MAX_COMMS=1, a context on the node's
 * lanes).
 */
#include "check.h"

#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { O_MAX, O_MIN, O_SUM, O_PROD, O_LAND, O_LOR, O_LXOR, O_BAND, O_BOR, O_BXOR, O_N };
static const char *op_names[O_N] = {"MAX", "MIN", "SUM", "PROD", "LAND",
                                    "LOR", "LXOR", "BAND", "BOR", "BXOR"};
static MPI_Op mpi_ops[O_N];

/* The value rank r contributes at index i for operation op: small integers, so that sums
 * and products fit every type and floating point sums are exact. */
static long long gen(int r, long i, int op) {
    switch (op) {
    case O_PROD: return (i % 7 == r % 7) ? 2 : 1;
    case O_SUM: return (r * 3 + i) % 5;
    case O_LAND: case O_LOR: case O_LXOR: return (i % 3 == r % 3) || (op == O_LAND && i % 4 != 0);
    case O_BAND: case O_BOR: case O_BXOR: return (r * 37 + i * 11) & 0x7f;
    default: return (r * 7 + i * 13) % 100;
    }
}

#define COMBINE_INT(op, a, b)                                                              \
    ((op) == O_MAX ? ((a) > (b) ? (a) : (b)) : (op) == O_MIN ? ((a) < (b) ? (a) : (b))    \
     : (op) == O_SUM ? (a) + (b) : (op) == O_PROD ? (a) * (b)                             \
     : (op) == O_LAND ? ((a) && (b)) : (op) == O_LOR ? ((a) || (b))                       \
     : (op) == O_LXOR ? (!(a) != !(b)) : (op) == O_BAND ? ((a) & (b))                     \
     : (op) == O_BOR ? ((a) | (b)) : ((a) ^ (b)))
#define COMBINE_FLT(op, a, b)                                                              \
    ((op) == O_MAX ? ((a) > (b) ? (a) : (b)) : (op) == O_MIN ? ((a) < (b) ? (a) : (b))    \
     : (op) == O_SUM ? (a) + (b) : (a) * (b))
#define COMBINE_LOG(op, a, b)                                                              \
    ((op) == O_LAND ? ((a) && (b)) : (op) == O_LOR ? ((a) || (b)) : (!(a) != !(b)))
#define COMBINE_BYTE(op, a, b)                                                             \
    ((op) == O_BAND ? ((a) & (b)) : (op) == O_BOR ? ((a) | (b)) : ((a) ^ (b)))

static const int ops_INT[] = {O_MAX, O_MIN, O_SUM, O_PROD, O_LAND, O_LOR, O_LXOR, O_BAND, O_BOR, O_BXOR, -1};
static const int ops_FLT[] = {O_MAX, O_MIN, O_SUM, O_PROD, -1};
static const int ops_LOG[] = {O_LAND, O_LOR, O_LXOR, -1};
static const int ops_BYTE[] = {O_BAND, O_BOR, O_BXOR, -1};

/* One checker per type: bcast, reduce and allreduce of `count` elements on `comm`. */
#define DEFINE_TYPE(name, ctype, mpitype, kind)                                            \
    static void bcast_##name(MPI_Comm comm, long count, int root) {                        \
        int me, n;                                                                         \
        MPI_Comm_rank(comm, &me);                                                          \
        MPI_Comm_size(comm, &n);                                                           \
        ctype *buf = malloc((count + 1) * sizeof(ctype));                                  \
        for (long i = 0; i < count; i++)                                                   \
            buf[i] = (ctype)(me == root ? gen(root, i, O_MAX) : 0x55);                     \
        MPI_Bcast(buf, (int)count, mpitype, root, comm);                                   \
        int ok = 1;                                                                        \
        for (long i = 0; i < count; i++) {                                                 \
            ok &= buf[i] == (ctype)gen(root, i, O_MAX);                                    \
            hash((long long)buf[i]);                                                       \
        }                                                                                  \
        char what[160];                                                                    \
        snprintf(what, sizeof what, "MPI_Bcast %s count %ld root %d", #mpitype, count,     \
                 root);                                                                    \
        result(ok, what);                                                                  \
        free(buf);                                                                         \
    }                                                                                      \
    /* all: 0 MPI_Reduce to root, 1 MPI_Allreduce, 2 MPI_Scan, 3 MPI_Exscan. */           \
    static void reduce_##name(MPI_Comm comm, long count, int op, int root, int all,         \
                              int in_place) {                                              \
        int me, n;                                                                         \
        MPI_Comm_rank(comm, &me);                                                          \
        MPI_Comm_size(comm, &n);                                                           \
        ctype *send = malloc((count + 1) * sizeof(ctype));                                 \
        ctype *recv = malloc((count + 1) * sizeof(ctype));                                 \
        for (long i = 0; i < count; i++) {                                                 \
            send[i] = (ctype)gen(me, i, op);                                               \
            recv[i] = in_place ? send[i] : (ctype)0x33;                                    \
        }                                                                                  \
        const void *sp = in_place && (all || me == root) ? MPI_IN_PLACE : (void *)send;    \
        if (all == 1)                                                                      \
            MPI_Allreduce(sp, recv, (int)count, mpitype, mpi_ops[op], comm);               \
        else if (all == 2)                                                                 \
            MPI_Scan(sp, recv, (int)count, mpitype, mpi_ops[op], comm);                    \
        else if (all == 3)                                                                 \
            MPI_Exscan(sp, recv, (int)count, mpitype, mpi_ops[op], comm);                  \
        else                                                                               \
            MPI_Reduce(sp, recv, (int)count, mpitype, mpi_ops[op], root, comm);            \
        /* The ranks combined: all of them, or those up to this one (Exscan's before it). */ \
        int last = all == 2 ? me : all == 3 ? me - 1 : n - 1;                              \
        int ok = 1;                                                                        \
        if ((all || me == root) && last >= 0) {                                            \
            for (long i = 0; i < count; i++) {                                             \
                ctype want = (ctype)gen(0, i, op);                                         \
                for (int r = 1; r <= last; r++) {                                          \
                    ctype v = (ctype)gen(r, i, op);                                        \
                    want = (ctype)COMBINE_##kind(op, want, v);                             \
                }                                                                          \
                ok &= recv[i] == want;                                                     \
                hash((long long)recv[i]);                                                  \
            }                                                                              \
        }                                                                                  \
        static const char *calls[4] = {"MPI_Reduce", "MPI_Allreduce", "MPI_Scan",          \
                                       "MPI_Exscan"};                                      \
        char what[200];                                                                    \
        snprintf(what, sizeof what, "%s %s %s count %ld root %d%s", calls[all], #mpitype,  \
                 op_names[op], count, all ? -1 : root, in_place ? " in place" : "");       \
        result(ok, what);                                                                  \
        free(send);                                                                        \
        free(recv);                                                                        \
    }                                                                                      \
    static void check_##name(MPI_Comm comm, const long *counts) {                          \
        int n;                                                                             \
        MPI_Comm_size(comm, &n);                                                           \
        int roots[3] = {0, n / 2, n - 1};                                                  \
        for (const long *c = counts; *c >= 0; c++) {                                       \
            for (int k = 0; k < 3; k++) bcast_##name(comm, *c, roots[k]);                  \
            for (const int *op = ops_##kind; *op >= 0; op++) {                             \
                for (int ip = 0; ip < 2; ip++) {                                           \
                    for (int all = 1; all <= 3; all++) reduce_##name(comm, *c, *op, 0, all, ip); \
                    for (int k = 0; k < 3; k++) reduce_##name(comm, *c, *op, roots[k], 0, ip); \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    }

#define TYPES(X)                                                                           \
    X(schar, signed char, MPI_SIGNED_CHAR, INT)                                            \
    X(uchar, unsigned char, MPI_UNSIGNED_CHAR, INT)                                        \
    X(short, short, MPI_SHORT, INT)                                                        \
    X(ushort, unsigned short, MPI_UNSIGNED_SHORT, INT)                                     \
    X(int, int, MPI_INT, INT)                                                              \
    X(unsigned, unsigned, MPI_UNSIGNED, INT)                                               \
    X(long, long, MPI_LONG, INT)                                                           \
    X(ulong, unsigned long, MPI_UNSIGNED_LONG, INT)                                        \
    X(llong, long long, MPI_LONG_LONG, INT)                                                \
    X(ullong, unsigned long long, MPI_UNSIGNED_LONG_LONG, INT)                             \
    X(i8, int8_t, MPI_INT8_T, INT)                                                         \
    X(i16, int16_t, MPI_INT16_T, INT)                                                      \
    X(i32, int32_t, MPI_INT32_T, INT)                                                      \
    X(i64, int64_t, MPI_INT64_T, INT)                                                      \
    X(u8, uint8_t, MPI_UINT8_T, INT)                                                       \
    X(u16, uint16_t, MPI_UINT16_T, INT)                                                    \
    X(u32, uint32_t, MPI_UINT32_T, INT)                                                    \
    X(u64, uint64_t, MPI_UINT64_T, INT)                                                    \
    X(float, float, MPI_FLOAT, FLT)                                                        \
    X(double, double, MPI_DOUBLE, FLT)                                                     \
    X(ldouble, long double, MPI_LONG_DOUBLE, FLT)                                          \
    X(bool, _Bool, MPI_C_BOOL, LOG)                                                        \
    X(byte, unsigned char, MPI_BYTE, BYTE)

TYPES(DEFINE_TYPE)

/* MPI_CHAR: broadcast only (no reduction is defined on it). */
static void check_char(MPI_Comm comm) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    char buf[301];
    for (int i = 0; i < 301; i++) buf[i] = me == n - 1 ? (char)('a' + i % 26) : 0;
    MPI_Bcast(buf, 301, MPI_CHAR, n - 1, comm);
    int ok = 1;
    for (int i = 0; i < 301; i++) ok &= buf[i] == (char)('a' + i % 26), hash(buf[i]);
    result(ok, "MPI_Bcast MPI_CHAR");
}

/* An associative, non-commutative user operation: concatenation of decimal digits, each
 * element a (value, 10^digits) pair, so that MPI's order (rank 0 first) shows. */
static void digits(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    long long *a = in, *b = inout;
    for (int i = 0; i < *len; i++) {
        b[2 * i] = a[2 * i] * b[2 * i + 1] + b[2 * i];
        b[2 * i + 1] = a[2 * i + 1] * b[2 * i + 1];
    }
}

static void handed_to_mpi(void) {
    /* A user-defined non-commutative operation keeps MPI's order: rank 0 first. */
    MPI_Op user;
    MPI_Datatype pair;
    MPI_Op_create(digits, 0, &user);
    MPI_Type_contiguous(2, MPI_LONG_LONG, &pair);
    MPI_Type_commit(&pair);
    long long v[6], out[6] = {0};
    for (int i = 0; i < 3; i++) v[2 * i] = (rank + i) % 9 + 1, v[2 * i + 1] = 10;
    MPI_Allreduce(v, out, 3, pair, user, MPI_COMM_WORLD);
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        long long want = 0;
        for (int r = 0; r < size; r++) want = want * 10 + (r + i) % 9 + 1;
        ok &= out[2 * i] == want;
        hash(out[2 * i]);
    }
    result(ok, "MPI_Allreduce user non-commutative op");
    MPI_Type_free(&pair);
    MPI_Op_free(&user);

    /* MPI_MINLOC on MPI_2INT. */
    struct { int v, i; } p = {100 - (rank % 3), rank}, q = {0, 0};
    MPI_Allreduce(&p, &q, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD);
    int best = 1000, at = -1;
    for (int r = 0; r < size; r++)
        if (100 - (r % 3) < best) best = 100 - (r % 3), at = r;
    result(q.v == best && q.i == at, "MPI_Allreduce MPI_MINLOC MPI_2INT");
    hash(q.v * 1000 + q.i);

    /* A strided vector type (a derived datatype with gaps). */
    MPI_Datatype vec;
    MPI_Type_vector(4, 1, 3, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int buf[12];
    for (int i = 0; i < 12; i++) buf[i] = rank == size - 1 ? i : -1;
    MPI_Bcast(buf, 1, vec, size - 1, MPI_COMM_WORLD);
    ok = 1;
    for (int i = 0; i < 12; i++) ok &= buf[i] == (i % 3 == 0 ? i : (rank == size - 1 ? i : -1));
    result(ok, "MPI_Bcast strided vector type");
    MPI_Type_free(&vec);

    /* Communicators that are not congruent to world: reversed order and halves. */
    MPI_Comm rev, half;
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev);
    int rr;
    MPI_Comm_rank(rev, &rr);
    result(rr == size - 1 - rank, "reversed split has reversed ranks");
    const long counts[] = {1, 1031, -1};
    check_int(rev, counts);
    check_double(rev, counts);
    MPI_Barrier(rev);
    MPI_Comm_free(&rev);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    check_int(half, counts);
    MPI_Barrier(half);
    MPI_Comm_free(&half);
}

/* Errors MPI reports must still be reported, through the communicator's handler. */
static void errors(void) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    int x[4] = {1, 2, 3, 4}, y[4];
    result(MPI_Bcast(x, 4, MPI_INT, size, c) != MPI_SUCCESS, "MPI_Bcast with root = size fails");
#ifndef MPICH_VERSION
    /* MPICH 4.0.2 does not check the count: a negative one fails an assertion inside it
     * (yaksa), which aborts the job, with or without topo-run. */
    result(MPI_Allreduce(x, y, -1, MPI_INT, MPI_SUM, c) != MPI_SUCCESS,
           "MPI_Allreduce with count -1 fails");
#endif
    result(MPI_Allreduce(x, y, 4, MPI_DATATYPE_NULL, MPI_SUM, c) != MPI_SUCCESS,
           "MPI_Allreduce with MPI_DATATYPE_NULL fails");
    result(MPI_Reduce(x, y, 4, MPI_INT, MPI_OP_NULL, 0, c) != MPI_SUCCESS,
           "MPI_Reduce with MPI_OP_NULL fails");
    result(MPI_Barrier(MPI_COMM_NULL) != MPI_SUCCESS, "MPI_Barrier(MPI_COMM_NULL) fails");
    /* A derived type that was never committed: MPI_ERR_TYPE on every rank. */
    MPI_Datatype vec;
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
    int rc = MPI_Bcast(x, 1, vec, 0, c), cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    result(cls == MPI_ERR_TYPE, "MPI_Bcast with a datatype not committed fails with MPI_ERR_TYPE");
    MPI_Type_free(&vec);
    MPI_Comm_free(&c);
}

/* Broadcasts where ranks pass different datatypes with the same type signature, as MPI
 * allows: every rank must take the same path (topo-run packs the derived ones). */
static void mixed_types(void) {
    int last = size - 1, ok = 1, buf[12];
    MPI_Datatype four, vec;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_vector(4, 1, 3, MPI_INT, &vec);
    MPI_Type_commit(&four);
    MPI_Type_commit(&vec);

    /* 3 x contiguous(4 ints) at the root, 12 MPI_INT elsewhere. */
    for (int i = 0; i < 12; i++) buf[i] = rank == last ? 100 + i : -1;
    if (rank == last) MPI_Bcast(buf, 3, four, last, MPI_COMM_WORLD);
    else MPI_Bcast(buf, 12, MPI_INT, last, MPI_COMM_WORLD);
    for (int i = 0; i < 12; i++) ok &= buf[i] == 100 + i, hash(buf[i]);
    result(ok, "MPI_Bcast: a contiguous type at the root, MPI_INT elsewhere");

    /* A strided vector at the root, 4 MPI_INT elsewhere; and the other way round. */
    for (int i = 0; i < 12; i++) buf[i] = rank == 0 ? i : -1;
    if (rank == 0) MPI_Bcast(buf, 1, vec, 0, MPI_COMM_WORLD);
    else MPI_Bcast(buf, 4, MPI_INT, 0, MPI_COMM_WORLD);
    ok = 1;
    for (int i = 0; i < 12; i++) {
        int want = rank == 0 ? i : (i < 4 ? 3 * i : -1);
        ok &= buf[i] == want;
        hash(buf[i]);
    }
    for (int i = 0; i < 12; i++) buf[i] = rank == 0 ? 50 + i : -1;
    if (rank == 0) MPI_Bcast(buf, 4, MPI_INT, 0, MPI_COMM_WORLD);
    else MPI_Bcast(buf, 1, vec, 0, MPI_COMM_WORLD);
    for (int i = 0; i < 12; i++) {
        int want = rank == 0 ? 50 + i : (i % 3 == 0 ? 50 + i / 3 : -1);
        ok &= buf[i] == want;
        hash(buf[i]);
    }
    result(ok, "MPI_Bcast: a strided vector on some ranks, MPI_INT on the others");

    /* MPI_DOUBLE_INT (a pair type with padding) on even ranks, an equivalent struct on
     * odd ranks. */
    struct { double d; int i; } p[3];
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {0, sizeof(double)};
    MPI_Datatype types[2] = {MPI_DOUBLE, MPI_INT}, st, str;
    MPI_Type_create_struct(2, bl, disp, types, &st);
    MPI_Type_create_resized(st, 0, sizeof p[0], &str);
    MPI_Type_commit(&str);
    for (int k = 0; k < 3; k++) p[k].d = rank == 0 ? 1.5 * k : -1, p[k].i = rank == 0 ? k : -1;
    MPI_Bcast(p, 3, rank % 2 ? str : MPI_DOUBLE_INT, 0, MPI_COMM_WORLD);
    ok = 1;
    for (int k = 0; k < 3; k++) ok &= p[k].d == 1.5 * k && p[k].i == k, hash(p[k].i);
    result(ok, "MPI_Bcast: MPI_DOUBLE_INT on some ranks, an equivalent struct on the others");

    MPI_Type_free(&str);
    MPI_Type_free(&st);
    MPI_Type_free(&vec);
    MPI_Type_free(&four);
}

/* The value rank r contributes at index i of an Allgather. */
static int ag_val(int r, long i) { return (int)((r * 7919L + i * 31L) % 1000003L); }

/* MPI_Allgather of `count` ints per rank, out of place and in place. */
static void allgather_ints(MPI_Comm comm, long count) {
    int *send = malloc((count + 1) * sizeof(int));
    int *recv = malloc((count * size + 1) * sizeof(int));
    for (long i = 0; i < count; i++) send[i] = ag_val(rank, i);
    for (long i = 0; i < count * size; i++) recv[i] = -1;
    MPI_Allgather(send, (int)count, MPI_INT, recv, (int)count, MPI_INT, comm);
    int ok = 1;
    for (int r = 0; r < size; r++)
        for (long i = 0; i < count; i++) ok &= recv[r * count + i] == ag_val(r, i);
    for (long i = 0; i < count * size; i += 1 + count / 64) hash(recv[i]);
    char what[96];
    snprintf(what, sizeof what, "MPI_Allgather MPI_INT count %ld", count);
    result(ok, what);

    for (long i = 0; i < count * size; i++) recv[i] = -2;
    for (long i = 0; i < count; i++) recv[rank * count + i] = ag_val(rank, i) + 1;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, (int)count, MPI_INT, comm);
    ok = 1;
    for (int r = 0; r < size; r++)
        for (long i = 0; i < count; i++) ok &= recv[r * count + i] == ag_val(r, i) + 1;
    for (long i = 0; i < count * size; i += 1 + count / 64) hash(recv[i]);
    snprintf(what, sizeof what, "MPI_Allgather MPI_IN_PLACE MPI_INT count %ld", count);
    result(ok, what);
    free(send);
    free(recv);
}

/* Allgathers whose send and receive types differ with the same signature. */
static void allgather_types(void) {
    MPI_Datatype four, vec;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_vector(4, 1, 2, MPI_INT, &vec); /* 4 ints, every other one: extent 7 ints */
    MPI_Type_commit(&four);
    MPI_Type_commit(&vec);
    int send[4], *recv = malloc(7 * size * sizeof(int)), ok = 1;
    for (int i = 0; i < 4; i++) send[i] = ag_val(rank, i);

    /* 4 MPI_INT sent, one contiguous(4) received per rank; then the other way round. */
    for (int i = 0; i < 4 * size; i++) recv[i] = -1;
    MPI_Allgather(send, 4, MPI_INT, recv, 1, four, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 4; i++) ok &= recv[r * 4 + i] == ag_val(r, i), hash(recv[r * 4 + i]);
    for (int i = 0; i < 4 * size; i++) recv[i] = -1;
    MPI_Allgather(send, 1, four, recv, 4, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 4; i++) ok &= recv[r * 4 + i] == ag_val(r, i);
    result(ok, "MPI_Allgather: MPI_INT sent, a contiguous type received, and back");

    /* A strided vector received (block r at 7 r ints), in place and not; ranks alternate
     * between the vector and 4 MPI_INT on the send side. */
    ok = 1;
    for (int i = 0; i < 7 * size; i++) recv[i] = -1;
    MPI_Allgather(send, rank % 2 ? 1 : 4, rank % 2 ? four : MPI_INT, recv, 1, vec, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 7; i++) {
            int want = i % 2 == 0 ? ag_val(r, i / 2) : -1;
            if (r == size - 1 && i > 6) break;
            ok &= recv[r * 7 + i] == want;
            hash(recv[r * 7 + i]);
        }
    for (int i = 0; i < 7 * size; i++) recv[i] = -3;
    for (int i = 0; i < 4; i++) recv[rank * 7 + 2 * i] = ag_val(rank, i) + 5;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, 1, vec, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 7; i++) {
            int want = i % 2 == 0 ? ag_val(r, i / 2) + 5 : -3;
            ok &= recv[r * 7 + i] == want;
        }
    result(ok, "MPI_Allgather: a strided vector received, in place and not");

    /* MPI_DOUBLE_INT on even ranks, an equivalent struct on odd ranks. */
    struct { double d; int i; } mine, all[64];
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {0, sizeof(double)};
    MPI_Datatype types[2] = {MPI_DOUBLE, MPI_INT}, st, str;
    MPI_Type_create_struct(2, bl, disp, types, &st);
    MPI_Type_create_resized(st, 0, sizeof mine, &str);
    MPI_Type_commit(&str);
    if (size <= 64) {
        mine.d = 0.5 * rank;
        mine.i = ag_val(rank, 9);
        MPI_Datatype t = rank % 2 ? str : MPI_DOUBLE_INT;
        MPI_Allgather(&mine, 1, t, all, 1, t, MPI_COMM_WORLD);
        ok = 1;
        for (int r = 0; r < size; r++) ok &= all[r].d == 0.5 * r && all[r].i == ag_val(r, 9), hash(all[r].i);
        result(ok, "MPI_Allgather: MPI_DOUBLE_INT on some ranks, an equivalent struct on the others");
    }
    MPI_Type_free(&str);
    MPI_Type_free(&st);
    MPI_Type_free(&vec);
    MPI_Type_free(&four);
    free(recv);
}

/* MPI_Gather of `count` ints per rank to each of three roots, then MPI_Scatter of the
 * gathered blocks back, out of place and in place at the root. */
/* MPI_Reduce_scatter_block (`count` per rank) and MPI_Reduce_scatter (counts that vary
 * with the rank, zero for every third) of int sums on `comm`, in place and not. */
static void reduce_scatter_ints(MPI_Comm comm, long count) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *counts = malloc(n * sizeof(int)), *at = malloc(n * sizeof(int));
    long total = 0;
    for (int r = 0; r < n; r++) {
        counts[r] = r % 3 == 2 ? 0 : (int)(count + r);
        at[r] = (int)total;
        total += counts[r];
    }
    long most = total > count * n ? total : count * n;
    int *send = malloc((most + 1) * sizeof(int)), *recv = malloc((most + 1) * sizeof(int));
    for (int v = 0; v < 2; v++) {
        for (int ip = 0; ip < 2; ip++) {
            /* v 0: the block form, every block `count`; v 1: the counts above. */
            long all = v ? total : count * n, mine = v ? counts[me] : count, from = v ? at[me] : count * me;
            for (long i = 0; i < all; i++) send[i] = ag_val(me, i), recv[i] = ip ? send[i] : -1;
            const void *sp = ip ? MPI_IN_PLACE : (void *)send;
            if (v)
                MPI_Reduce_scatter(sp, recv, counts, MPI_INT, MPI_SUM, comm);
            else
                MPI_Reduce_scatter_block(sp, recv, (int)count, MPI_INT, MPI_SUM, comm);
            int ok = 1;
            for (long i = 0; i < mine; i++) {
                long long want = 0;
                for (int r = 0; r < n; r++) want += ag_val(r, from + i);
                ok &= recv[i] == (int)want;
                hash(recv[i]);
            }
            /* In place, the rest of the buffer keeps the contribution (as Open MPI's does). */
            for (long i = mine; ip && i < all; i++) ok &= recv[i] == ag_val(me, i);
            char what[160];
            snprintf(what, sizeof what, "%s count %ld%s", v ? "MPI_Reduce_scatter" : "MPI_Reduce_scatter_block",
                     count, ip ? " in place" : "");
            result(ok, what);
        }
    }
    free(send);
    free(recv);
    free(counts);
    free(at);
}

/* MPI_Alltoall of `count` ints per block on `comm`, in place and not: rank s's block for
 * rank d holds a2a_val(s, d, i). */
static int a2a_val(int s, int d, long i) { return (int)((s * 7919L + d * 104729L + i * 31L) % 1000003L); }

static void alltoall_ints(MPI_Comm comm, long count) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *send = malloc((count * n + 1) * sizeof(int)), *recv = malloc((count * n + 1) * sizeof(int));
    for (int ip = 0; ip < 2; ip++) {
        for (int d = 0; d < n; d++)
            for (long i = 0; i < count; i++) {
                send[d * count + i] = a2a_val(me, d, i);
                recv[d * count + i] = ip ? send[d * count + i] : -1;
            }
        MPI_Alltoall(ip ? MPI_IN_PLACE : (void *)send, (int)count, MPI_INT, recv, (int)count, MPI_INT, comm);
        int ok = 1;
        for (int s = 0; s < n; s++)
            for (long i = 0; i < count; i++) ok &= recv[s * count + i] == a2a_val(s, me, i), hash(recv[s * count + i]);
        char what[128];
        snprintf(what, sizeof what, "MPI_Alltoall count %ld%s", count, ip ? " in place" : "");
        result(ok, what);
    }
    free(send);
    free(recv);
}

/* MPI_Alltoallv on `comm`: rank s sends rank d (s + 2 d + k) % 5 * k ints (none for some
 * pairs), from its buffer in rank order and into the receiver's in reversed rank order with
 * a gap of one int after each block (left alone); then in place, with counts the same both
 * ways of a pair; then with a strided vector type (4 ints, every other one) received on
 * odd ranks against 4 MPI_INT each on even ones. */
static int a2av_len(int s, int d, int k) { return (s + 2 * d + k) % 5 * k; }
static int a2av_sym(int s, int d, int k) { return a2av_len(s < d ? s : d, s < d ? d : s, k); }

static void alltoallv_ints(MPI_Comm comm, int k) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *sc = malloc(n * sizeof(int)), *sd = malloc(n * sizeof(int));
    int *rc = malloc(n * sizeof(int)), *rd = malloc(n * sizeof(int));
    for (int ip = 0; ip < 2; ip++) {
        int (*len)(int, int, int) = ip ? a2av_sym : a2av_len;
        long st = 0, rt = 0;
        for (int d = 0; d < n; d++) sc[d] = len(me, d, k), sd[d] = (int)st, st += sc[d];
        for (int s = n - 1; s >= 0; s--) rc[s] = len(s, me, k), rd[s] = (int)rt, rt += rc[s] + 1;
        int *send = malloc((st + 1) * sizeof(int)), *recv = malloc((rt + 1) * sizeof(int));
        for (long i = 0; i < rt; i++) recv[i] = -9;
        for (int d = 0; d < n; d++)
            for (int i = 0; i < sc[d]; i++) {
                send[sd[d] + i] = a2a_val(me, d, i);
                /* In place, the block for d sits where d's block will land. */
                if (ip) recv[rd[d] + i] = a2a_val(me, d, i);
            }
        if (ip)
            MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, recv, rc, rd, MPI_INT, comm);
        else
            MPI_Alltoallv(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, comm);
        int ok = 1;
        for (int s = 0; s < n; s++) {
            for (int i = 0; i < rc[s]; i++) ok &= recv[rd[s] + i] == a2a_val(s, me, i), hash(recv[rd[s] + i]);
            ok &= recv[rd[s] + rc[s]] == -9;
        }
        char what[128];
        snprintf(what, sizeof what, "MPI_Alltoallv k=%d%s", k, ip ? " in place" : "");
        result(ok, what);
        free(send);
        free(recv);
    }
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

/* MPI_Allgatherv on `comm`: rank r contributes (r * 3 + k) % 4 * k ints (none for some),
 * received in rank order from the start (`packed`) or in reversed rank order with a gap of
 * one int after each block (left alone); in place and not; then a strided vector received
 * on odd ranks against MPI_INT elsewhere. */
static void allgatherv_ints(MPI_Comm comm, int k, int packed) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *rc = malloc(n * sizeof(int)), *rd = malloc(n * sizeof(int));
    long at = 0;
    for (int i = 0; i < n; i++) {
        int r = packed ? i : n - 1 - i;
        rc[r] = (r * 3 + k) % 4 * k, rd[r] = (int)at, at += rc[r] + (packed ? 0 : 1);
    }
    int *send = malloc((rc[me] + 1) * sizeof(int)), *recv = malloc((at + 1) * sizeof(int));
    for (int ip = 0; ip < 2; ip++) {
        for (long i = 0; i <= at; i++) recv[i] = -9;
        for (int i = 0; i < rc[me]; i++) send[i] = a2a_val(me, 0, i), recv[rd[me] + i] = ip ? send[i] : -9;
        if (ip)
            MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, rc, rd, MPI_INT, comm);
        else
            MPI_Allgatherv(send, rc[me], MPI_INT, recv, rc, rd, MPI_INT, comm);
        int ok = 1;
        for (int s = 0; s < n; s++) {
            for (int i = 0; i < rc[s]; i++) ok &= recv[rd[s] + i] == a2a_val(s, 0, i), hash(recv[rd[s] + i]);
            if (!packed) ok &= recv[rd[s] + rc[s]] == -9;
        }
        char what[128];
        snprintf(what, sizeof what, "MPI_Allgatherv k=%d%s%s", k, packed ? "" : " reversed with gaps",
                 ip ? " in place" : "");
        result(ok, what);
    }
    free(send);
    free(recv);
    free(rc);
    free(rd);
}

static void allgatherv_types(void) {
    MPI_Datatype vec;
    MPI_Type_vector(4, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    int send[4], *recv = malloc(7 * size * sizeof(int) + 4), odd = rank % 2, ok = 1;
    for (int i = 0; i < 4; i++) send[i] = a2a_val(rank, 1, i);
    for (int r = 0; r < size; r++) rc[r] = odd ? 1 : 4, rd[r] = odd ? r : 4 * r;
    for (int i = 0; i < 7 * size; i++) recv[i] = -1;
    MPI_Allgatherv(send, 4, MPI_INT, recv, rc, rd, odd ? vec : MPI_INT, MPI_COMM_WORLD);
    for (int s = 0; s < size; s++)
        for (int i = 0; i < 4; i++) {
            int at = odd ? 7 * s + 2 * i : 4 * s + i;
            ok &= recv[at] == a2a_val(s, 1, i);
            if (odd && i < 3) ok &= recv[at + 1] == -1;
            hash(recv[at]);
        }
    result(ok, "MPI_Allgatherv: a strided vector received on odd ranks, MPI_INT elsewhere");
    MPI_Type_free(&vec);
    free(rc);
    free(rd);
    free(recv);
}

/* The v-forms where rank 0 carries nothing and passes NULL buffers (legal): its
 * Allgatherv block is empty, and in the Alltoallv it sends and receives nothing while the
 * other ranks exchange one int each. */
static void v_null_buffers(void) {
    int *c = calloc(size, sizeof(int)), *d = calloc(size, sizeof(int));
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    int all[2 * 64 + 1], mine[2] = {rank * 10 + 1, rank * 10 + 2}, ok = 1;
    for (int r = 0; r < size; r++) rc[r] = r ? 2 : 0, rd[r] = r ? 2 * (r - 1) : 0;
    for (int i = 0; i <= 2 * 64; i++) all[i] = -1;
    if (size <= 64) {
        MPI_Allgatherv(rank ? mine : NULL, rank ? 2 : 0, MPI_INT, all, rc, rd, MPI_INT, MPI_COMM_WORLD);
        for (int r = 1; r < size; r++) ok &= all[2 * (r - 1)] == r * 10 + 1 && all[2 * (r - 1) + 1] == r * 10 + 2;
        int sv[64], got[64];
        for (int r = 0; r < size; r++) c[r] = rank && r ? 1 : 0, d[r] = r, sv[r] = rank * 100 + r, got[r] = -1;
        MPI_Alltoallv(rank ? sv : NULL, c, d, MPI_INT, rank ? got : NULL, c, d, MPI_INT, MPI_COMM_WORLD);
        for (int r = 1; rank && r < size; r++) ok &= got[r] == r * 100 + rank;
    }
    result(ok, "MPI_Allgatherv and MPI_Alltoallv with NULL buffers on a rank that carries nothing");
    free(c);
    free(d);
    free(rc);
    free(rd);
}

static void alltoallv_types(void) {
    MPI_Datatype vec;
    MPI_Type_vector(4, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    int *send = malloc(4 * size * sizeof(int) + 4), *recv = malloc(7 * size * sizeof(int) + 4);
    int odd = rank % 2;
    for (int d = 0; d < size; d++) {
        sc[d] = 4, sd[d] = 4 * d;
        for (int i = 0; i < 4; i++) send[4 * d + i] = a2a_val(rank, d, i);
        /* Odd ranks receive one vector per rank, block s at 7 s ints; even ranks 4 ints. */
        rc[d] = odd ? 1 : 4, rd[d] = odd ? d : 4 * d;
    }
    for (int i = 0; i < 7 * size; i++) recv[i] = -1;
    MPI_Alltoallv(send, sc, sd, MPI_INT, recv, rc, rd, odd ? vec : MPI_INT, MPI_COMM_WORLD);
    int ok = 1;
    for (int s = 0; s < size; s++)
        for (int i = 0; i < 4; i++) {
            int at = odd ? 7 * s + 2 * i : 4 * s + i;
            ok &= recv[at] == a2a_val(s, rank, i);
            if (odd && i < 3) ok &= recv[at + 1] == -1;
            hash(recv[at]);
        }
    result(ok, "MPI_Alltoallv: a strided vector received on odd ranks, MPI_INT elsewhere");
    MPI_Type_free(&vec);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(send);
    free(recv);
}

/* Alltoalls whose send and receive types differ with the same signature: a strided vector
 * received (block r at 7 r ints), in place and not, 4 MPI_INT or one contiguous(4) sent. */
static void alltoall_types(void) {
    MPI_Datatype four, vec;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_vector(4, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&four);
    MPI_Type_commit(&vec);
    int *send = malloc(4 * size * sizeof(int) + 4), *recv = malloc(7 * size * sizeof(int) + 4), ok = 1;
    for (int d = 0; d < size; d++)
        for (int i = 0; i < 4; i++) send[d * 4 + i] = a2a_val(rank, d, i);
    for (int i = 0; i < 7 * size; i++) recv[i] = -1;
    MPI_Alltoall(send, rank % 2 ? 1 : 4, rank % 2 ? four : MPI_INT, recv, 1, vec, MPI_COMM_WORLD);
    for (int s = 0; s < size; s++)
        for (int i = 0; i < 7; i++) {
            int want = i % 2 == 0 ? a2a_val(s, rank, i / 2) : -1;
            ok &= recv[s * 7 + i] == want;
            hash(recv[s * 7 + i]);
        }
    for (int i = 0; i < 7 * size; i++) recv[i] = -3;
    for (int d = 0; d < size; d++)
        for (int i = 0; i < 4; i++) recv[d * 7 + 2 * i] = a2a_val(rank, d, i) + 5;
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, 1, vec, MPI_COMM_WORLD);
    for (int s = 0; s < size; s++)
        for (int i = 0; i < 7; i++) ok &= recv[s * 7 + i] == (i % 2 == 0 ? a2a_val(s, rank, i / 2) + 5 : -3);
    /* A contiguous(4) received, 4 MPI_INT sent. */
    for (int i = 0; i < 4 * size; i++) recv[i] = -1;
    MPI_Alltoall(send, 4, MPI_INT, recv, 1, four, MPI_COMM_WORLD);
    for (int s = 0; s < size; s++)
        for (int i = 0; i < 4; i++) ok &= recv[s * 4 + i] == a2a_val(s, rank, i);
    result(ok, "MPI_Alltoall: a strided vector or contiguous type received, in place and not, mixed send types");
    MPI_Type_free(&four);
    MPI_Type_free(&vec);
    free(send);
    free(recv);
}

static void gather_scatter_ints(MPI_Comm comm, long count) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int roots[3] = {0, n / 2, n - 1};
    int *send = malloc((count + 1) * sizeof(int));
    int *all = malloc((count * n + 1) * sizeof(int));
    int *back = malloc((count + 1) * sizeof(int));
    for (int k = 0; k < 3; k++) {
        int root = roots[k];
        if (k > 0 && root == roots[k - 1]) continue;
        char what[128];
        for (long i = 0; i < count; i++) send[i] = ag_val(me, i) + k;
        for (long i = 0; i < count * n; i++) all[i] = -1;
        MPI_Gather(send, (int)count, MPI_INT, all, (int)count, MPI_INT, root, comm);
        int ok = 1;
        if (me == root)
            for (int r = 0; r < n; r++)
                for (long i = 0; i < count; i++) ok &= all[r * count + i] == ag_val(r, i) + k;
        if (me == root)
            for (long i = 0; i < count * n; i += 1 + count / 64) hash(all[i]);
        snprintf(what, sizeof what, "MPI_Gather MPI_INT count %ld root %d", count, root);
        result(ok, what);

        /* Scatter the blocks back: each rank gets its own. */
        for (long i = 0; i < count; i++) back[i] = -2;
        MPI_Scatter(all, (int)count, MPI_INT, back, (int)count, MPI_INT, root, comm);
        ok = 1;
        for (long i = 0; i < count; i++) ok &= back[i] == ag_val(me, i) + k;
        snprintf(what, sizeof what, "MPI_Scatter MPI_INT count %ld root %d", count, root);
        result(ok, what);

        /* In place at the root: its block stays where it is. */
        if (me == root) {
            for (long i = 0; i < count * n; i++) all[i] = -3;
            for (long i = 0; i < count; i++) all[me * count + i] = ag_val(me, i) + k;
            MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, (int)count, MPI_INT, root, comm);
        } else {
            MPI_Gather(send, (int)count, MPI_INT, NULL, 0, MPI_DATATYPE_NULL, root, comm);
        }
        ok = 1;
        if (me == root)
            for (int r = 0; r < n; r++)
                for (long i = 0; i < count; i++) ok &= all[r * count + i] == ag_val(r, i) + k;
        snprintf(what, sizeof what, "MPI_Gather MPI_IN_PLACE count %ld root %d", count, root);
        result(ok, what);
        for (long i = 0; i < count; i++) back[i] = -4;
        if (me == root)
            MPI_Scatter(all, (int)count, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm);
        else
            MPI_Scatter(NULL, 0, MPI_DATATYPE_NULL, back, (int)count, MPI_INT, root, comm);
        ok = 1;
        for (long i = 0; i < count; i++)
            ok &= (me == root ? all[me * count + i] : back[i]) == ag_val(me, i) + k;
        snprintf(what, sizeof what, "MPI_Scatter MPI_IN_PLACE count %ld root %d", count, root);
        result(ok, what);
    }
    free(send);
    free(all);
    free(back);
}

/* MPI_Gatherv and MPI_Scatterv on `comm` at three roots: rank r contributes
 * (r * 3 + k) % 4 * k ints (none for some), placed at the root in rank order from the
 * start (`packed`) or in reversed rank order with a gap of one int after each block (left
 * alone); Scatterv sends the blocks back; then both in place at the root. */
static void gatherv_scatterv_ints(MPI_Comm comm, int k, int packed) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int roots[3] = {0, n / 2, n - 1};
    int *rc = malloc(n * sizeof(int)), *rd = malloc(n * sizeof(int));
    long at = 0;
    for (int i = 0; i < n; i++) {
        int r = packed ? i : n - 1 - i;
        rc[r] = (r * 3 + k) % 4 * k, rd[r] = (int)at, at += rc[r] + (packed ? 0 : 1);
    }
    int *send = malloc((rc[me] + 1) * sizeof(int)), *all = malloc((at + 1) * sizeof(int));
    int *back = malloc((rc[me] + 1) * sizeof(int));
    for (int j = 0; j < 3; j++) {
        int root = roots[j];
        if (j > 0 && root == roots[j - 1]) continue;
        for (int ip = 0; ip < 2; ip++) {
            char what[160];
            for (long i = 0; i <= at; i++) all[i] = -9;
            for (int i = 0; i < rc[me]; i++) send[i] = a2a_val(me, j, i);
            if (me == root && ip) {
                for (int i = 0; i < rc[me]; i++) all[rd[me] + i] = send[i];
                MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, rc, rd, MPI_INT, root, comm);
            } else {
                MPI_Gatherv(send, rc[me], MPI_INT, all, rc, rd, MPI_INT, root, comm);
            }
            int ok = 1;
            if (me == root)
                for (int s = 0; s < n; s++) {
                    for (int i = 0; i < rc[s]; i++) ok &= all[rd[s] + i] == a2a_val(s, j, i), hash(all[rd[s] + i]);
                    if (!packed) ok &= all[rd[s] + rc[s]] == -9;
                }
            snprintf(what, sizeof what, "MPI_Gatherv k=%d root %d%s%s", k, root,
                     packed ? "" : " reversed with gaps", ip ? " in place" : "");
            result(ok, what);
            for (int i = 0; i <= rc[me]; i++) back[i] = -7;
            if (me == root && ip) {
                MPI_Scatterv(all, rc, rd, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm);
                for (int i = 0; i < rc[me]; i++) back[i] = all[rd[me] + i];
            } else {
                MPI_Scatterv(all, rc, rd, MPI_INT, back, rc[me], MPI_INT, root, comm);
            }
            ok = back[rc[me]] == -7;
            for (int i = 0; i < rc[me]; i++) ok &= back[i] == a2a_val(me, j, i);
            snprintf(what, sizeof what, "MPI_Scatterv k=%d root %d%s%s", k, root,
                     packed ? "" : " reversed with gaps", ip ? " in place" : "");
            result(ok, what);
        }
    }
    free(send);
    free(all);
    free(back);
    free(rc);
    free(rd);
}

/* Gatherv and Scatterv whose types differ with the same signature: a strided vector at
 * the root (block r at 7 r ints, rank r's count (r % 3) vectors of 4 ints: none for some),
 * MPI_INT or contiguous(4) at the others, alternating; and NULL buffers at the ranks that
 * carry nothing. */
static void gatherv_scatterv_types(void) {
    MPI_Datatype four, vec;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_vector(4, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&four);
    MPI_Type_commit(&vec);
    int root = size / 2, n = rank % 3, ok = 1;
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    int *all = malloc(14 * size * sizeof(int)), send[8], back[8];
    for (int r = 0; r < size; r++) rc[r] = r % 3, rd[r] = 2 * r;
    for (int i = 0; i < 8; i++) send[i] = ag_val(rank, i) + 5, back[i] = -2;
    for (int i = 0; i < 14 * size; i++) all[i] = -1;
    int odd = rank % 2;
    MPI_Gatherv(n ? send : NULL, odd ? n : 4 * n, odd ? four : MPI_INT, all, rc, rd, vec, root,
                MPI_COMM_WORLD);
    if (rank == root)
        for (int r = 0; r < size; r++)
            for (int v = 0; v < r % 3; v++)
                for (int i = 0; i < 4; i++) {
                    int got = all[14 * r + 7 * v + 2 * i];
                    ok &= got == ag_val(r, 4 * v + i) + 5;
                    hash(got);
                }
    result(ok, "MPI_Gatherv: strided vectors received at the root, mixed send types, NULL where empty");
    ok = 1;
    MPI_Scatterv(all, rc, rd, vec, n ? back : NULL, odd ? n : 4 * n, odd ? four : MPI_INT, root,
                 MPI_COMM_WORLD);
    for (int i = 0; i < 4 * n; i++) ok &= back[i] == ag_val(rank, i) + 5;
    for (int i = 4 * n; i < 8; i++) ok &= back[i] == -2;
    result(ok, "MPI_Scatterv: strided vectors sent from the root, mixed receive types, NULL where empty");
    MPI_Type_free(&vec);
    MPI_Type_free(&four);
    free(rc);
    free(rd);
    free(all);
}

/* Gathers and Scatters whose send and receive types differ with the same signature: a
 * strided vector at the root (block r at 7 r ints), 4 MPI_INT or one contiguous(4) at the
 * others, alternating. */
static void gather_scatter_types(void) {
    MPI_Datatype four, vec;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_vector(4, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&four);
    MPI_Type_commit(&vec);
    int root = size - 1, send[4], back[4], *all = malloc(7 * size * sizeof(int)), ok = 1;
    for (int i = 0; i < 4; i++) send[i] = ag_val(rank, i) + 9;
    for (int i = 0; i < 7 * size; i++) all[i] = -1;
    MPI_Gather(send, rank % 2 ? 1 : 4, rank % 2 ? four : MPI_INT, all, 1, vec, root,
               MPI_COMM_WORLD);
    if (rank == root)
        for (int r = 0; r < size; r++)
            for (int i = 0; i < 7 && r * 7 + i < 7 * size; i++) {
                ok &= all[r * 7 + i] == (i % 2 == 0 ? ag_val(r, i / 2) + 9 : -1);
                hash(all[r * 7 + i]);
            }
    result(ok, "MPI_Gather: a strided vector received at the root, mixed send types");
    ok = 1;
    for (int i = 0; i < 4; i++) back[i] = -2;
    MPI_Scatter(all, 1, vec, back, rank % 2 ? 1 : 4, rank % 2 ? four : MPI_INT, root,
                MPI_COMM_WORLD);
    for (int i = 0; i < 4; i++) ok &= back[i] == ag_val(rank, i) + 9;
    result(ok, "MPI_Scatter: a strided vector sent from the root, mixed receive types");
    MPI_Type_free(&vec);
    MPI_Type_free(&four);
    free(all);
}

int main(int argc, char **argv) {
    int die = -1, multiple = 0, brief = 0, on_dup = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--brief") == 0) quick = brief = 1;
        else if (strcmp(argv[i], "--thread-multiple") == 0) multiple = 1;
        else if (strcmp(argv[i], "--die") == 0 && i + 1 < argc) die = atoi(argv[++i]);
        else if (strcmp(argv[i], "--on-dup") == 0) on_dup = 1;
    }
    if (multiple) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (die >= 0) {
        double v[1024] = {0}, s[1024];
        MPI_Comm on = MPI_COMM_WORLD;
        if (on_dup) MPI_Comm_dup(MPI_COMM_WORLD, &on);
        for (int i = 0; i < 100000; i++) {
            if (rank == die && i == 500) raise(SIGKILL);
            MPI_Allreduce(v, s, 1024, MPI_DOUBLE, MPI_SUM, on);
        }
        MPI_Finalize();
        return 0;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Op ops[O_N] = {MPI_MAX, MPI_MIN, MPI_SUM, MPI_PROD, MPI_LAND,
                       MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
    memcpy(mpi_ops, ops, sizeof ops);

    const long full[] = {0, 1, 7, 1031, 65539, -1};
    const long small[] = {0, 1, 1031, -1};
    const long one[] = {1031, -1};
    const long *counts = brief ? one : quick ? small : full;
#define RUN(name, ctype, mpitype, kind) check_##name(MPI_COMM_WORLD, counts);
    TYPES(RUN)
    check_char(MPI_COMM_WORLD);
    const long big[] = {(1 << 20) + 3, -1};
    if (!brief) check_int(MPI_COMM_WORLD, big);
    check_double(MPI_COMM_WORLD, big);

    /* Congruent communicators take the same path as world. */
    MPI_Comm dup, same;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    allgather_ints(dup, 7);
    check_int(dup, small);
    check_double(dup, small);
    check_bool(dup, small);
    MPI_Barrier(dup);
    MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &same);
    check_long(same, small);
    MPI_Comm_free(&same);

    /* Allgather: 0, 1, primes, the 8 KiB in-place block boundary +-1, 16 MiB in all. */
    const long ag_full[] = {0, 1, 7, 1031, 2047, 2048, 2049, 65539, -1};
    const long ag_small[] = {0, 1, 1031, 2049, -1};
    for (const long *c = quick ? ag_small : ag_full; *c >= 0; c++) allgather_ints(MPI_COMM_WORLD, *c);
    allgather_ints(MPI_COMM_WORLD, (16L << 20) / (long)sizeof(int) / size);
    allgather_types();

    /* Gather and Scatter: the same counts, on world, a duplicate and world reversed. */
    for (const long *c = quick ? ag_small : ag_full; *c >= 0; c++) gather_scatter_ints(MPI_COMM_WORLD, *c);
    gather_scatter_ints(MPI_COMM_WORLD, (16L << 20) / (long)sizeof(int) / size);
    gather_scatter_ints(dup, 1031);
    MPI_Comm reversed;
    MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &reversed);
    gather_scatter_ints(reversed, 7);
    gather_scatter_ints(reversed, 2049);
    /* Reduce_scatter(_block): the same counts, on world, a duplicate and world reversed. */
    for (const long *c = quick ? ag_small : ag_full; *c >= 0; c++) reduce_scatter_ints(MPI_COMM_WORLD, *c);
    reduce_scatter_ints(dup, 1031);
    reduce_scatter_ints(reversed, 7);
    /* Alltoall: the same counts (16 MiB in all), on world, a duplicate and world reversed. */
    for (const long *c = quick ? ag_small : ag_full; *c >= 0; c++) alltoall_ints(MPI_COMM_WORLD, *c);
    alltoall_ints(MPI_COMM_WORLD, (16L << 20) / (long)sizeof(int) / size / size);
    alltoall_ints(dup, 1031);
    alltoall_ints(reversed, 7);
    /* Alltoallv: blocks of 0 to 4 k ints, k 1, 7, 1031 and 65539 / size^2. */
    const int av[] = {1, 7, 1031};
    for (int i = 0; i < (quick ? 2 : 3); i++) alltoallv_ints(MPI_COMM_WORLD, av[i]);
    alltoallv_ints(MPI_COMM_WORLD, 65539 / size / size + 1);
    alltoallv_ints(dup, 7);
    alltoallv_ints(reversed, 3);
    /* Allgatherv: blocks of 0 to 3 k ints, packed in rank order and reversed with gaps. */
    for (int i = 0; i < (quick ? 2 : 3); i++) allgatherv_ints(MPI_COMM_WORLD, av[i], i % 2);
    allgatherv_ints(MPI_COMM_WORLD, (int)((16L << 20) / (long)sizeof(int) / size / 2), 1);
    allgatherv_ints(dup, 7, 0);
    allgatherv_ints(reversed, 5, 1);
    /* Gatherv and Scatterv: the same blocks, at three roots. */
    for (int i = 0; i < (quick ? 2 : 3); i++) gatherv_scatterv_ints(MPI_COMM_WORLD, av[i], i % 2);
    gatherv_scatterv_ints(MPI_COMM_WORLD, (int)((16L << 20) / (long)sizeof(int) / size / 2), 1);
    gatherv_scatterv_ints(dup, 7, 0);
    gatherv_scatterv_ints(reversed, 5, 1);
    MPI_Comm_free(&reversed);
    gather_scatter_types();
    alltoall_types();
    alltoallv_types();
    allgatherv_types();
    gatherv_scatterv_types();
    v_null_buffers();

    handed_to_mpi();
    mixed_types();
    errors();

    /* Back-to-back small calls catch slot reuse races. */
    int ok = 1, calls = brief ? 400 : 2000;
    for (int i = 0; i < calls; i++) {
        int v = rank + i, s = 0, b = rank == i % size ? i : -1;
        int g[64];
        MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, i % 2 ? dup : MPI_COMM_WORLD);
        MPI_Bcast(&b, 1, MPI_INT, i % size, MPI_COMM_WORLD);
        ok &= s == size * i + size * (size - 1) / 2 && b == i;
        if (size <= 64 && i % 4 == 0) {
            MPI_Allgather(&v, 1, MPI_INT, g, 1, MPI_INT, i % 8 ? dup : MPI_COMM_WORLD);
            for (int r = 0; r < size; r++) ok &= g[r] == r + i;
        }
        if (size <= 64 && i % 4 == 2) {
            int a[64];
            for (int r = 0; r < size; r++) a[r] = rank * 1000 + r + i;
            MPI_Alltoall(a, 1, MPI_INT, g, 1, MPI_INT, i % 8 == 2 ? dup : MPI_COMM_WORLD);
            for (int r = 0; r < size; r++) ok &= g[r] == r * 1000 + rank + i;
        }
        if (i % 100 == 0) MPI_Barrier(MPI_COMM_WORLD);
    }
    result(ok, "back-to-back Allreduce and Bcast (2000, or 400 with --brief), an Allgather and an Alltoall every 4th");
    MPI_Comm_free(&dup);

    int status = report(); /* rank 0's view of every result it received */
    MPI_Finalize();
    return status;
}
