/* preload-nonblocking: an unmodified MPI program that exercises the nonblocking
 * collectives topo-run's PMPI library intercepts (MPI_Ibcast, MPI_Ireduce,
 * MPI_Iallreduce, MPI_Ibarrier, MPI_Iallgather, MPI_Iscan, MPI_Iexscan, MPI_Ialltoall,
 * MPI_Ialltoallv, MPI_Igather(v), MPI_Iscatter(v), MPI_Iallgatherv,
 * MPI_Ireduce_scatter_block, MPI_Ireduce_scatter) and the completion calls applications use
 * on their requests, and checks every result against a reference computed locally.
 *
 * Covered: int, long long, unsigned char, float and double with the predefined
 * operations defined on them; counts 1, 7, 1031 and 65539 (and 2^20+3 for int without
 * --quick); roots first, middle and last; MPI_IN_PLACE; MPI_COMM_WORLD and a duplicate;
 * each request completed by a different call (MPI_Wait, MPI_Test loops, MPI_Waitall,
 * MPI_Waitany, MPI_Waitsome, MPI_Testall, MPI_Testany, MPI_Testsome,
 * MPI_Request_get_status); several collectives in flight completed by one MPI_Waitall,
 * MPI_Waitsome or MPI_Testany loop over an array that mixes them with point-to-point
 * requests and with collectives MPI must run (zero count, a reversed split); the
 * statuses against those of MPI's own nonblocking collectives; collectives on world and
 * on a duplicate started in opposite orders on even and odd ranks, and a blocking
 * collective on the duplicate between them; a request left incomplete while another
 * completes; a wait on a point-to-point request while a collective is in flight whose
 * peer waits for it; blocking calls (MPI_Recv, MPI_Sendrecv, MPI_Probe, MPI_Mprobe,
 * MPI_Ssend, and collectives MPI runs) that a peer answers only after the collective in
 * flight has advanced; MPI_Request_free and MPI_Cancel on a collective's request; an
 * Ibcast with different datatypes of one type signature; MPI_Iallgather of counts 0, 1,
 * primes and 16 MiB in all, in place and not, with a contiguous and a strided vector type
 * on the receive side (freed before completion), two in flight with an Iallreduce;
 * MPI_Iscan and MPI_Iexscan (in place) in flight together on world, a duplicate (after a
 * blocking MPI_Scan) and a reversed split; MPI_Ialltoall of the same counts and 16 MiB in
 * all, two in flight with an Iallreduce, on world, a duplicate and a reversed split;
 * MPI_Ialltoallv with blocks that differ by pair (none for some), two in flight, on world
 * and a duplicate, and into a strided vector type freed before completion (none in place:
 * Open MPI's own fails now and then, see ialltoall_ints); MPI_Igather, MPI_Iscatter,
 * MPI_Igatherv and MPI_Iallgatherv; MPI_Ireduce_scatter_block and MPI_Ireduce_scatter in
 * flight together, and in place, on world, a duplicate and a reversed split; 2000
 * back-to-back calls, and 16 in flight at once; an Ibcast completed by PMPI_Wait and
 * PMPI_Test, which do not pass through the library.
 *
 * Last lines: "digest: HEX" (rank 0; the same with and without topo-run) and
 * "N passed, M failed". Exit status 1 on any failure.
 *
 *   mpicc -O2 -o preload-nonblocking preload-nonblocking.c
 *   srun --mpi=pmix topo-run -- ./preload-nonblocking [--quick] [--die RANK]
 *       [--die-in-recv RANK]
 *
 * --die RANK: that rank kills itself (SIGKILL) in the middle of a loop of Iallreduces, to
 * test that the others stop with a message instead of waiting forever. --die-in-recv RANK
 * (not 0): that rank kills itself while rank 0 is blocked in MPI_Recv from it with an
 * Ibcast in flight.
 */
#include "check.h"

#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Completes one request with the completion call number `how`. */
enum { C_WAIT, C_TEST, C_WAITALL, C_WAITANY, C_WAITSOME, C_TESTALL, C_TESTANY, C_TESTSOME,
       C_GETSTATUS, C_N };
static const char *how_names[C_N] = {"Wait",    "Test",    "Waitall",  "Waitany",
                                     "Waitsome", "Testall", "Testany", "Testsome",
                                     "Request_get_status"};

static int complete(MPI_Request *r, int how) {
    int flag = 0, idx = -1, out = 0, rc = MPI_SUCCESS;
    MPI_Status st;
    switch (how) {
    case C_WAIT: rc = MPI_Wait(r, &st); break;
    case C_TEST: while (!flag && rc == MPI_SUCCESS) rc = MPI_Test(r, &flag, &st); break;
    case C_WAITALL: rc = MPI_Waitall(1, r, &st); break;
    case C_WAITANY: rc = MPI_Waitany(1, r, &idx, &st); if (idx != 0) return 0; break;
    case C_WAITSOME: rc = MPI_Waitsome(1, r, &out, &idx, &st); if (out != 1 || idx != 0) return 0; break;
    case C_TESTALL: while (!flag && rc == MPI_SUCCESS) rc = MPI_Testall(1, r, &flag, &st); break;
    case C_TESTANY:
        while (!flag && rc == MPI_SUCCESS) rc = MPI_Testany(1, r, &idx, &flag, &st);
        if (idx != 0) return 0;
        break;
    case C_TESTSOME:
        while (out == 0 && rc == MPI_SUCCESS) rc = MPI_Testsome(1, r, &out, &idx, &st);
        if (out != 1 || idx != 0) return 0;
        break;
    case C_GETSTATUS:
        while (!flag && rc == MPI_SUCCESS) rc = MPI_Request_get_status(*r, &flag, &st);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(r, &st);
        break;
    }
    return rc == MPI_SUCCESS && *r == MPI_REQUEST_NULL;
}

/* The value rank r contributes at index i: small integers, so that sums and products of
 * up to 8 ranks are exact in every type. */
static long long val(int r, long i) { return ((r * 3 + i) % 7) + 1; }

enum { O_SUM, O_PROD, O_MAX, O_MIN, O_LAND, O_LOR, O_BAND, O_BOR, O_BXOR, O_N };
static const char *op_names[O_N] = {"SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "BAND", "BOR", "BXOR"};
static MPI_Op mpi_ops[O_N];

/* The reference reduction for each type. */
#define REF(T)                                                                   \
    static T ref_##T(int op, long i) {                                           \
        T acc = (T)val(0, i);                                                    \
        for (int r = 1; r < size; r++) {                                         \
            T v = (T)val(r, i);                                                  \
            switch (op) {                                                        \
            case O_SUM: acc = acc + v; break;                                    \
            case O_PROD: acc = acc * v; break;                                   \
            case O_MAX: acc = acc > v ? acc : v; break;                          \
            case O_MIN: acc = acc < v ? acc : v; break;                          \
            case O_LAND: acc = acc && v; break;                                  \
            case O_LOR: acc = acc || v; break;                                   \
            default: acc = ref_bits_##T(op, acc, v); break;                      \
            }                                                                    \
        }                                                                        \
        return acc;                                                              \
    }
#define BITS(T)                                                                  \
    static T ref_bits_##T(int op, T a, T b) {                                    \
        return op == O_BAND ? (T)(a & b) : op == O_BOR ? (T)(a | b) : (T)(a ^ b); \
    }
#define NOBITS(T) \
    static T ref_bits_##T(int op, T a, T b) { (void)op; (void)b; return a; }
typedef long long llong;
typedef unsigned char uchar;
BITS(int) BITS(llong) BITS(uchar) NOBITS(float) NOBITS(double)
REF(int) REF(llong) REF(uchar) REF(float) REF(double)

/* One type's cases: Iallreduce and Ireduce with every op on it, in place and not, and
 * Ibcast, at every count and root, on `comm`, each completed by a different call. */
#define CASES(T, DT, NOPS)                                                                  \
    static void cases_##T(MPI_Comm comm, const char *cname, long *counts, int ncounts,       \
                          int *how) {                                                       \
        char what[200];                                                                     \
        int roots[3] = {0, size / 2, size - 1};                                             \
        for (int c = 0; c < ncounts; c++) {                                                 \
            long n = counts[c];                                                             \
            T *s = malloc(n * sizeof(T)), *d = malloc(n * sizeof(T));                       \
            for (int o = 0; o < NOPS; o++) {                                                \
                for (int inplace = 0; inplace < 2; inplace++) {                             \
                    for (long i = 0; i < n; i++) d[i] = (T)-1, s[i] = (T)val(rank, i);       \
                    if (inplace) memcpy(d, s, n * sizeof(T));                               \
                    MPI_Request r;                                                          \
                    MPI_Iallreduce(inplace ? MPI_IN_PLACE : s, d, (int)n, DT, mpi_ops[o], comm, \
                                   &r);                                                     \
                    int ok = complete(&r, *how);                                            \
                    for (long i = 0; i < n && ok; i++) ok = d[i] == ref_##T(o, i);          \
                    hash((long long)d[n - 1]);                                              \
                    snprintf(what, sizeof what, "Iallreduce %s %s %s n=%ld%s by %s", cname, \
                             #DT, op_names[o], n, inplace ? " in place" : "", how_names[*how]); \
                    result(ok, what);                                                       \
                    *how = (*how + 1) % C_N;                                                \
                    int root = roots[(o + inplace) % 3];                                    \
                    for (long i = 0; i < n; i++) d[i] = (T)-1, s[i] = (T)val(rank, i);       \
                    int ip = inplace && rank == root;                                       \
                    if (ip) memcpy(d, s, n * sizeof(T));                                    \
                    MPI_Ireduce(ip ? MPI_IN_PLACE : s, d, (int)n, DT, mpi_ops[o], root, comm, &r); \
                    ok = complete(&r, *how);                                                \
                    for (long i = 0; i < n && ok && rank == root; i++) ok = d[i] == ref_##T(o, i); \
                    if (rank == root) hash((long long)d[0]);                                \
                    snprintf(what, sizeof what, "Ireduce %s %s %s n=%ld root %d%s by %s", cname, \
                             #DT, op_names[o], n, root, inplace ? " in place" : "",         \
                             how_names[*how]);                                              \
                    result(ok, what);                                                       \
                    *how = (*how + 1) % C_N;                                                \
                }                                                                           \
            }                                                                               \
            for (int k = 0; k < 3; k++) {                                                   \
                int root = roots[k];                                                        \
                for (long i = 0; i < n; i++) d[i] = rank == root ? (T)val(root, i) : (T)0;   \
                MPI_Request r;                                                              \
                MPI_Ibcast(d, (int)n, DT, root, comm, &r);                                  \
                int ok = complete(&r, *how);                                                \
                for (long i = 0; i < n && ok; i++) ok = d[i] == (T)val(root, i);            \
                hash((long long)d[n / 2]);                                                  \
                snprintf(what, sizeof what, "Ibcast %s %s n=%ld root %d by %s", cname, #DT, n, \
                         root, how_names[*how]);                                            \
                result(ok, what);                                                           \
                *how = (*how + 1) % C_N;                                                    \
            }                                                                               \
            free(s);                                                                        \
            free(d);                                                                        \
        }                                                                                   \
    }
CASES(int, MPI_INT, O_N)
CASES(llong, MPI_LONG_LONG, O_N)
CASES(uchar, MPI_UNSIGNED_CHAR, O_N)
CASES(float, MPI_FLOAT, O_LAND)
CASES(double, MPI_DOUBLE, O_LAND)

/* MPI_Iscan (not in place) and MPI_Iexscan (in place) of int sums, both in flight, on
 * `comm`; with `blocking_first`, after a blocking MPI_Scan on it (topo-run then knows
 * whether its hierarchical form serves the communicator; before, it runs the chain). */
static void iscans(MPI_Comm comm, const char *cname, int blocking_first, int how) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    long counts[] = {1, 1031, 65539};
    for (int c = 0; c < 3; c++) {
        long k = counts[c];
        int *s = malloc(k * sizeof(int)), *d = malloc(k * sizeof(int)), *x = malloc(k * sizeof(int));
        for (long i = 0; i < k; i++) s[i] = (int)val(me, i), x[i] = s[i], d[i] = -1;
        if (blocking_first) MPI_Scan(s, d, (int)k, MPI_INT, MPI_SUM, comm);
        MPI_Request r[2];
        MPI_Iscan(s, d, (int)k, MPI_INT, MPI_SUM, comm, &r[0]);
        MPI_Iexscan(MPI_IN_PLACE, x, (int)k, MPI_INT, MPI_SUM, comm, &r[1]);
        int ok = complete(&r[1], how) && complete(&r[0], (how + 1) % C_N);
        for (long i = 0; i < k && ok; i++) {
            long long before = 0;
            for (int q = 0; q < me; q++) before += val(q, i);
            ok = d[i] == before + val(me, i) && (me == 0 || x[i] == before);
        }
        hash((long long)d[k - 1]);
        char what[160];
        snprintf(what, sizeof what, "Iscan and Iexscan in place %s n=%ld%s", cname, k,
                 blocking_first ? " after a blocking Scan" : "");
        result(ok, what);
        free(s);
        free(d);
        free(x);
    }
    (void)n;
}

static int sum_ok(const int *d, int n, int scale) {
    for (int i = 0; i < n; i++) {
        long long want = 0;
        for (int r = 0; r < size; r++) want += val(r, i) * scale;
        if (d[i] != want) return 0;
    }
    return 1;
}

/* Several collectives in flight with point-to-point requests and collectives that MPI
 * runs, in one array, completed by Waitall, Waitsome or Testany loops. */
static void mixed(MPI_Comm dup, MPI_Comm rev, int how) {
    enum { N = 1031 };
    static int a[N], b[N], c[N], e[N], bc[N], z, zr, rbuf, sbuf, rv[N];
    for (int i = 0; i < N; i++) a[i] = (int)val(rank, i), b[i] = 2 * a[i], bc[i] = rank == 1 % size ? i : -1;
    memcpy(rv, a, sizeof rv);
    sbuf = rank;
    MPI_Request r[9];
    int nr = 0;
    MPI_Irecv(&rbuf, 1, MPI_INT, (rank + size - 1) % size, 7, MPI_COMM_WORLD, &r[nr++]);
    MPI_Iallreduce(a, c, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[nr++]);
    MPI_Ibcast(bc, N, MPI_INT, 1 % size, dup, &r[nr++]);
    MPI_Iallreduce(MPI_IN_PLACE, rv, N, MPI_INT, MPI_SUM, rev, &r[nr++]); /* MPI's */
    MPI_Iallreduce(&z, &zr, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[nr++]); /* zero count */
    MPI_Ireduce(b, e, N, MPI_INT, MPI_SUM, size - 1, MPI_COMM_WORLD, &r[nr++]);
    MPI_Ibarrier(dup, &r[nr++]);
    MPI_Isend(&sbuf, 1, MPI_INT, (rank + 1) % size, 7, MPI_COMM_WORLD, &r[nr++]);
    MPI_Ibarrier(MPI_COMM_WORLD, &r[nr++]);
    int ok = 1, left = nr;
    static const char *names[3] = {"Waitall", "Waitsome", "Testany"};
    if (how == 0) {
        ok = MPI_Waitall(nr, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS;
    } else if (how == 1) {
        int idx[9], out;
        while (left > 0 && ok) {
            ok = MPI_Waitsome(nr, r, &out, idx, MPI_STATUSES_IGNORE) == MPI_SUCCESS && out > 0;
            left -= out;
        }
    } else {
        int idx, flag;
        while (left > 0 && ok) {
            ok = MPI_Testany(nr, r, &idx, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS;
            if (flag && idx != MPI_UNDEFINED) left--;
        }
    }
    for (int i = 0; i < nr; i++) ok = ok && r[i] == MPI_REQUEST_NULL;
    ok = ok && rbuf == (rank + size - 1) % size && sum_ok(c, N, 1) && sum_ok(rv, N, 1);
    if (rank == size - 1) ok = ok && sum_ok(e, N, 2);
    for (int i = 0; i < N && ok; i++) ok = bc[i] == i;
    char what[120];
    snprintf(what, sizeof what, "9 requests in flight (ours, point-to-point, MPI's) by %s", names[how]);
    result(ok, what);
    hash(c[N - 1]);
}

/* The statuses of our requests against those of MPI's own nonblocking collectives. */
static void statuses(void) {
    int x = rank, y = 0, n0, n1, c0, c1;
    MPI_Request r;
    MPI_Status s0, s1;
    PMPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
    PMPI_Wait(&r, &s0);
    MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, &s1);
    MPI_Get_count(&s0, MPI_BYTE, &n0);
    MPI_Get_count(&s1, MPI_BYTE, &n1);
    MPI_Test_cancelled(&s0, &c0);
    MPI_Test_cancelled(&s1, &c1);
    int ok = c0 == c1;
#ifndef MPICH_VERSION
    /* The standard leaves a collective's source, tag and count undefined. Open MPI gives
     * the same for every collective, and topo-run's library gives the same as Open MPI;
     * MPICH gives those of some message inside the collective (the tag counts its
     * collectives), which nothing can mimic: built against MPICH, only "not cancelled" is
     * compared. */
    ok = ok && s0.MPI_SOURCE == s1.MPI_SOURCE && s0.MPI_TAG == s1.MPI_TAG && n0 == n1;
#endif
    if (!ok && rank == 0)
        fprintf(stderr, "status: MPI's source %d tag %d count %d cancelled %d; ours %d %d %d %d\n",
                s0.MPI_SOURCE, s0.MPI_TAG, n0, c0, s1.MPI_SOURCE, s1.MPI_TAG, n1, c1);
    result(ok, "status of a completed Iallreduce as MPI's own");
}

/* Collectives on world and on a duplicate started in opposite orders on even and odd
 * ranks (allowed for nonblocking collectives), then a blocking collective on the
 * duplicate between two nonblocking ones on world, also in opposite orders. */
static void orders(MPI_Comm dup) {
    enum { N = 4099 };
    static int a[N], b[N], c[N], d[N];
    for (int i = 0; i < N; i++) a[i] = (int)val(rank, i), b[i] = 3 * a[i];
    MPI_Request r[2];
    if (rank % 2 == 0) {
        MPI_Iallreduce(a, c, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[0]);
        MPI_Iallreduce(b, d, N, MPI_INT, MPI_SUM, dup, &r[1]);
    } else {
        MPI_Iallreduce(b, d, N, MPI_INT, MPI_SUM, dup, &r[1]);
        MPI_Iallreduce(a, c, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[0]);
    }
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    result(sum_ok(c, N, 1) && sum_ok(d, N, 3), "Iallreduce on world and a duplicate, opposite orders");
    for (int i = 0; i < N; i++) c[i] = rank == 0 ? i : 0;
    if (rank % 2 == 0) {
        MPI_Ibcast(c, N, MPI_INT, 0, MPI_COMM_WORLD, &r[0]);
        MPI_Allreduce(b, d, N, MPI_INT, MPI_SUM, dup);
    } else {
        MPI_Allreduce(b, d, N, MPI_INT, MPI_SUM, dup);
        MPI_Ibcast(c, N, MPI_INT, 0, MPI_COMM_WORLD, &r[0]);
    }
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    int ok = sum_ok(d, N, 3);
    for (int i = 0; i < N && ok; i++) ok = c[i] == i;
    result(ok, "blocking Allreduce on a duplicate while an Ibcast on world is in flight, opposite orders");
}

/* Rank 0's Ibarrier cannot complete before the last rank enters it, which that rank does
 * only after rank 0 answers: Waitany must return the point-to-point request, and a test
 * of the barrier must say it is still incomplete. */
static void left_incomplete(void) {
    int last = size - 1, token = 42, got = 0, ok = 1;
    MPI_Request r[2];
    if (rank == 0) {
        MPI_Ibarrier(MPI_COMM_WORLD, &r[0]);
        MPI_Irecv(&got, 1, MPI_INT, last, 9, MPI_COMM_WORLD, &r[1]);
        int idx = -1, flag = 1;
        MPI_Waitany(2, r, &idx, MPI_STATUS_IGNORE);
        ok = idx == 1 && got == 42;
        MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
        ok = ok && !flag;
        MPI_Send(&token, 1, MPI_INT, last, 10, MPI_COMM_WORLD);
        MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    } else if (rank == last) {
        MPI_Send(&token, 1, MPI_INT, 0, 9, MPI_COMM_WORLD);
        MPI_Recv(&got, 1, MPI_INT, 0, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Ibarrier(MPI_COMM_WORLD, &r[0]);
        MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    } else {
        MPI_Ibarrier(MPI_COMM_WORLD, &r[0]);
        MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    }
    result(ok, "an Ibarrier left incomplete while a receive completes (Waitany, Test)");
}

/* MPI_Request_free and MPI_Cancel on a collective's request are erroneous by the standard
 * (freeing a completed one is not). With MPI_ERRORS_RETURN, Open MPI returns
 * MPI_ERR_REQUEST and leaves the request valid (or frees it, if it has completed already),
 * and so does topo-run's library under every MPI. MPICH 4.0.2 returns other classes
 * (MPI_ERR_OTHER for a free, MPI_ERR_INTERN for a cancel) and refuses to free even a
 * completed collective's request: built against MPICH, this program accepts any error
 * class there, and a refused free of a completed request if a wait then completes it. */
#ifdef MPICH_VERSION
static int refused(int cls) { return cls != MPI_SUCCESS; }
static const int lenient = 1;
#else
static int refused(int cls) { return cls == MPI_ERR_REQUEST; }
static const int lenient = 0;
#endif

static void freed_request(void) {
    enum { N = 1 << 18 };
    int *buf = malloc(N * sizeof(int)), ok = 1, flag = 0;
    for (int i = 0; i < N; i++) buf[i] = rank == 0 ? i : -1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Request r;
    MPI_Ibcast(buf, N, MPI_INT, 0, MPI_COMM_WORLD, &r);
    MPI_Request kept = r;
    int rc = MPI_Request_free(&r), cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    if (rc == MPI_SUCCESS) {
        ok = r == MPI_REQUEST_NULL;
    } else {
        ok = refused(cls) && r == kept;
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        for (int i = 0; i < N && ok; i++) ok = buf[i] == i;
    }
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    while (!flag) MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE);
    rc = MPI_Request_free(&r);
    if (rc != MPI_SUCCESS && lenient) rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    ok = ok && rc == MPI_SUCCESS && r == MPI_REQUEST_NULL;
    result(ok, "MPI_Request_free on a collective in flight (MPI_ERR_REQUEST) and completed");

    /* MPI_Cancel cannot cancel a collective: MPI_ERR_REQUEST, in flight or completed, and
     * the request completes as usual, not cancelled. */
    MPI_Status st;
    MPI_Ibcast(buf, N, MPI_INT, 0, MPI_COMM_WORLD, &r);
    rc = MPI_Cancel(&r);
    cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    ok = refused(cls) && MPI_Wait(&r, &st) == MPI_SUCCESS;
    MPI_Test_cancelled(&st, &flag);
    ok = ok && !flag;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    for (flag = 0; !flag;) MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE);
    rc = MPI_Cancel(&r);
    cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    ok = ok && refused(cls) && MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    result(ok, "MPI_Cancel on a collective in flight and completed (MPI_ERR_REQUEST)");
    free(buf);
}

/* An Ibcast with a strided vector type at the root and MPI_INT elsewhere (the same type
 * signature), each rank freeing its datatype right after the start, as MPI allows. */
static void mixed_types(void) {
    enum { N = 4099 };
    int *buf = malloc(3 * N * sizeof(int)), ok = 1;
    for (int i = 0; i < 3 * N; i++) buf[i] = rank == 0 ? i : -1;
    MPI_Datatype vec;
    MPI_Type_vector(N, 1, 3, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    MPI_Request r;
    if (rank == 0) MPI_Ibcast(buf, 1, vec, 0, MPI_COMM_WORLD, &r);
    else MPI_Ibcast(buf, N, MPI_INT, 0, MPI_COMM_WORLD, &r);
    MPI_Type_free(&vec);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    for (int i = 0; i < N; i++) ok &= buf[i] == (rank == 0 ? i : 3 * i);
    hash(buf[N - 1]);
    /* And the other way round: contiguous at the root, the vector elsewhere. */
    for (int i = 0; i < 3 * N; i++) buf[i] = rank == 0 ? i : -1;
    MPI_Type_vector(N, 1, 3, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    if (rank == 0) MPI_Ibcast(buf, N, MPI_INT, 0, MPI_COMM_WORLD, &r);
    else MPI_Ibcast(buf, 1, vec, 0, MPI_COMM_WORLD, &r);
    MPI_Type_free(&vec);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    for (int i = 0; i < 3 * N; i++)
        ok &= buf[i] == (rank == 0 ? i : (i % 3 == 0 ? i / 3 : -1));
    hash(buf[3 * (N - 1)]);
    result(ok, "MPI_Ibcast: a strided vector on some ranks, MPI_INT on the others");
    free(buf);
}

/* Rank 0 waits for a message from rank 1 while a large Ibcast from rank 0 is in flight;
 * rank 1 sends only once its part of the Ibcast has completed. */
static void wait_on_other(void) {
    enum { N = 1 << 18 };
    int *buf = malloc(N * sizeof(int)), got = 0, ok = 1;
    for (int i = 0; i < N; i++) buf[i] = rank == 0 ? i : -1;
    MPI_Request r, p;
    MPI_Ibcast(buf, N, MPI_INT, 0, MPI_COMM_WORLD, &r);
    if (rank == 0) {
        MPI_Irecv(&got, 1, MPI_INT, 1, 11, MPI_COMM_WORLD, &p);
        MPI_Wait(&p, MPI_STATUS_IGNORE);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        ok = got == 7;
    } else {
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        if (rank == 1) {
            int seven = 7;
            MPI_Send(&seven, 1, MPI_INT, 0, 11, MPI_COMM_WORLD);
        }
    }
    for (int i = 0; i < N && ok; i++) ok = buf[i] == i;
    result(ok, "a wait on a receive while a 1 MiB Ibcast is in flight");
    free(buf);
}

/* A wait that does not pass through the library, as a Fortran MPI_WAIT or another tool's
 * PMPI_Wait makes: MPI's own progress must advance the collective (Open MPI's progress
 * engine calls the library; MPICH polls its extended generalized requests). Each rank's
 * part of a 1 MiB Ibcast needs that rank's own progress to complete. */
static void pmpi_wait(void) {
    enum { N = 1 << 18 };
    int *buf = malloc(N * sizeof(int)), ok = 1, flag = 0;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) buf[i] = rank == 0 ? i + round : -1;
        MPI_Request r;
        MPI_Ibcast(buf, N, MPI_INT, 0, MPI_COMM_WORLD, &r);
        if (round == 0) {
            PMPI_Wait(&r, MPI_STATUS_IGNORE);
        } else {
            for (flag = 0; !flag;) PMPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        }
        ok = ok && r == MPI_REQUEST_NULL;
        for (int i = 0; i < N && ok; i++) ok = buf[i] == i + round;
        hash(buf[N - 1]);
    }
    result(ok, "a 1 MiB Ibcast completed by MPI's own PMPI_Wait and PMPI_Test");
    free(buf);
}

/* While a 1 MiB Ibcast from rank 0 is in flight, rank 0 blocks in another MPI call that
 * the last rank answers only once its own part of the Ibcast has completed: MPI's
 * nonblocking collectives advance inside every MPI call, so this must not stall. */
enum { B_RECV, B_SENDRECV, B_PROBE, B_MPROBE, B_SSEND, B_ALLGATHER, B_BCAST_DERIVED,
       B_BARRIER_SPLIT, B_N };
static const char *blocked_names[B_N] = {
    "Recv", "Sendrecv", "Probe", "Mprobe", "Ssend", "Allgather (MPI's)",
    "Bcast of a derived type (MPI's)", "Barrier on a reversed split (MPI's)"};

static void blocked_in(int kind, MPI_Comm rev) {
    enum { N = 1 << 18 };
    int last = size - 1, tag = 20 + kind, got = 0, seven = 7, ok = 1, count = 0;
    int *buf = malloc(N * sizeof(int)), *all = malloc(size * sizeof(int));
    for (int i = 0; i < N; i++) buf[i] = rank == 0 ? i : -1;
    MPI_Status st;
    MPI_Request r;
    MPI_Ibcast(buf, N, MPI_INT, 0, MPI_COMM_WORLD, &r);
    if (rank == last) MPI_Wait(&r, MPI_STATUS_IGNORE);
    switch (kind) {
    case B_RECV:
    case B_PROBE:
    case B_MPROBE:
        if (rank == 0) {
            if (kind == B_PROBE) {
                MPI_Probe(last, tag, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_INT, &count);
                MPI_Recv(&got, 1, MPI_INT, last, tag, MPI_COMM_WORLD, &st);
            } else if (kind == B_MPROBE) {
                MPI_Message m;
                MPI_Mprobe(last, tag, MPI_COMM_WORLD, &m, &st);
                MPI_Get_count(&st, MPI_INT, &count);
                MPI_Mrecv(&got, 1, MPI_INT, &m, &st);
            } else {
                MPI_Recv(&got, 1, MPI_INT, last, tag, MPI_COMM_WORLD, &st);
                count = 1;
            }
            ok = got == 7 && count == 1 && st.MPI_SOURCE == last && st.MPI_TAG == tag;
        } else if (rank == last) {
            MPI_Send(&seven, 1, MPI_INT, 0, tag, MPI_COMM_WORLD);
        }
        break;
    case B_SENDRECV:
        if (rank == 0 || rank == last) {
            int peer = rank == 0 ? last : 0;
            MPI_Sendrecv(&seven, 1, MPI_INT, peer, tag, &got, 1, MPI_INT, peer, tag,
                         MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_INT, &count);
            ok = got == 7 && count == 1 && st.MPI_SOURCE == peer && st.MPI_TAG == tag;
        }
        break;
    case B_SSEND:
        if (rank == 0) {
            MPI_Ssend(&seven, 1, MPI_INT, last, tag, MPI_COMM_WORLD);
        } else if (rank == last) {
            MPI_Recv(&got, 1, MPI_INT, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            ok = got == 7;
        }
        break;
    case B_ALLGATHER:
        MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
        for (int i = 0; i < size; i++) ok = ok && all[i] == i;
        break;
    case B_BCAST_DERIVED: {
        MPI_Datatype t;
        MPI_Type_contiguous(1, MPI_INT, &t);
        MPI_Type_commit(&t);
        if (rank == last) got = 7;
        MPI_Bcast(&got, 1, t, last, MPI_COMM_WORLD);
        MPI_Type_free(&t);
        ok = got == 7;
        break;
    }
    case B_BARRIER_SPLIT:
        MPI_Barrier(rev);
        break;
    }
    if (rank != last) MPI_Wait(&r, MPI_STATUS_IGNORE);
    for (int i = 0; i < N && ok; i++) ok = buf[i] == i;
    char what[160];
    snprintf(what, sizeof what, "blocked in %s while a 1 MiB Ibcast is in flight",
             blocked_names[kind]);
    result(ok, what);
    free(all);
    free(buf);
}

static void back_to_back(int die) {
    int ok = 1;
    for (int i = 0; i < 2000; i++) {
        int x = rank + i, y = 0;
        MPI_Request r;
        if (rank == die && i == 500) raise(SIGKILL);
        MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        ok = ok && y == size * (size - 1) / 2 + size * i;
    }
    result(ok, "2000 back-to-back Iallreduce + Wait");
    enum { K = 16, N = 257 };
    static int s[K][N], d[K][N];
    MPI_Request r[K];
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++) s[k][i] = (int)val(rank, i) * (k + 1);
        if (k % 4 == 3)
            MPI_Ibarrier(MPI_COMM_WORLD, &r[k]);
        else
            MPI_Iallreduce(s[k], d[k], N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[k]);
    }
    MPI_Waitall(K, r, MPI_STATUSES_IGNORE);
    ok = 1;
    for (int k = 0; k < K; k++)
        if (k % 4 != 3) ok = ok && sum_ok(d[k], N, k + 1);
    result(ok, "16 collectives in flight, one Waitall");
}

/* --die-in-recv RANK: that rank kills itself instead of joining a 1 MiB Ibcast from rank
 * 0, which stays in flight, while rank 0 blocks in MPI_Recv from it: the Ibcast, advanced
 * by MPI's progress engine inside MPI_Recv, must notice the dead rank. (Were the rank to
 * join first, it could take the whole message at once, by single copy, and complete
 * rank 0's Ibcast before dying.) */
static void die_in_recv(int die) {
    enum { N = 1 << 18 };
    int *buf = calloc(N, sizeof(int)), got = 0;
    for (int i = 0; i < 500; i++) MPI_Allreduce(MPI_IN_PLACE, buf, 1, MPI_INT, MPI_SUM,
                                                MPI_COMM_WORLD);
    MPI_Request r;
    if (rank == die) raise(SIGKILL);
    MPI_Ibcast(buf, N, MPI_INT, 0, MPI_COMM_WORLD, &r);
    if (rank == 0) MPI_Recv(&got, 1, MPI_INT, die, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    free(buf);
}

/* MPI_Iallgather of `count` ints per rank, out of place and in place, both in flight with
 * an Iallreduce, completed with completion call `how`. */
static void iallgather_ints(MPI_Comm comm, long count, int how) {
    int *send = malloc((count + 1) * sizeof(int));
    int *out = malloc((count * size + 1) * sizeof(int));
    int *inp = malloc((count * size + 1) * sizeof(int));
    for (long i = 0; i < count; i++) send[i] = (int)val(rank, i) * 1000 + (int)(i % 997);
    for (long i = 0; i < count * size; i++) out[i] = -1, inp[i] = -2;
    for (long i = 0; i < count; i++) inp[rank * count + i] = send[i] + 1;
    int v = rank + 1, s = 0;
    MPI_Request r[3];
    MPI_Iallgather(send, (int)count, MPI_INT, out, (int)count, MPI_INT, comm, &r[0]);
    MPI_Iallreduce(&v, &s, 1, MPI_INT, MPI_SUM, comm, &r[1]);
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, inp, (int)count, MPI_INT, comm, &r[2]);
    int ok = complete(&r[2], how) && complete(&r[0], how) && complete(&r[1], C_WAIT);
    for (int q = 0; q < size; q++)
        for (long i = 0; i < count; i++) {
            int want = (int)val(q, i) * 1000 + (int)(i % 997);
            ok &= out[q * count + i] == want && inp[q * count + i] == want + 1;
        }
    ok &= s == size * (size + 1) / 2;
    for (long i = 0; i < count * size; i += 1 + count / 64) hash(out[i]);
    char what[112];
    snprintf(what, sizeof what, "MPI_Iallgather MPI_INT count %ld, in place and not (%s)", count,
             how_names[how]);
    result(ok, what);
    free(send);
    free(out);
    free(inp);
}

/* Two MPI_Ialltoalls of `count` ints per block in flight with an Iallreduce, completed with
 * completion call `how`; rank s's block for rank d holds a2a(s, d, i) (+ 1 in the second).
 * Not in place: Open MPI's own in-place Ialltoall(v) (coll/libnbc) gives wrong blocks now
 * and then when others are in flight (open-mpi/ompi#1023), and this program must pass
 * without topo-run too; coll-check and the runtime's tests cover topo-run's in place. */
static int a2a(int s, int d, long i) { return (int)((s * 7919L + d * 104729L + i * 31L) % 1000003L); }

static void ialltoall_ints(MPI_Comm comm, long count, int how) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *send = malloc((count * n + 1) * sizeof(int));
    int *out = malloc((count * n + 1) * sizeof(int));
    int *inp = malloc((count * n + 1) * sizeof(int)), *send2 = malloc((count * n + 1) * sizeof(int));
    for (int d = 0; d < n; d++)
        for (long i = 0; i < count; i++) {
            send[d * count + i] = a2a(me, d, i);
            send2[d * count + i] = a2a(me, d, i) + 1;
            out[d * count + i] = -1;
            inp[d * count + i] = -2;
        }
    int v = me + 1, s = 0;
    MPI_Request r[3];
    MPI_Ialltoall(send, (int)count, MPI_INT, out, (int)count, MPI_INT, comm, &r[0]);
    MPI_Iallreduce(&v, &s, 1, MPI_INT, MPI_SUM, comm, &r[1]);
    MPI_Ialltoall(send2, (int)count, MPI_INT, inp, (int)count, MPI_INT, comm, &r[2]);
    int ok = complete(&r[2], how) && complete(&r[0], how) && complete(&r[1], C_WAIT);
    for (int q = 0; q < n; q++)
        for (long i = 0; i < count; i++) {
            int want = a2a(q, me, i);
            ok &= out[q * count + i] == want && inp[q * count + i] == want + 1;
        }
    ok &= s == n * (n + 1) / 2;
    for (long i = 0; i < count * n; i += 1 + count / 64) hash(out[i]);
    char what[112];
    snprintf(what, sizeof what, "MPI_Ialltoall MPI_INT count %ld, two in flight (%s)", count,
             how_names[how]);
    result(ok, what);
    free(send);
    free(send2);
    free(out);
    free(inp);
}

/* MPI_Ialltoallv on `comm`: rank s sends rank d (s + 2 d + k) % 4 * k ints (none for some
 * pairs), received in reversed rank order with a gap after each block; in flight with a
 * second exchange whose counts are the same both ways of a pair, sent from the receive
 * layout of its own buffer (not in place: see ialltoall_ints); completed with call `how`. */
static int a2av_len(int s, int d, int k, int sym) {
    if (sym && s > d) { int t = s; s = d; d = t; }
    return (s + 2 * d + k) % 4 * k;
}

static void ialltoallv_ints(MPI_Comm comm, int k, int how) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *sc = malloc(n * sizeof(int)), *sd = malloc(n * sizeof(int));
    int *rc[2], *rd[2], *send, *recv[2];
    long st = 0, rt[2] = {0, 0};
    for (int d = 0; d < n; d++) sc[d] = a2av_len(me, d, k, 0), sd[d] = (int)st, st += sc[d];
    for (int v = 0; v < 2; v++) {
        rc[v] = malloc(n * sizeof(int)), rd[v] = malloc(n * sizeof(int));
        for (int s = n - 1; s >= 0; s--) rc[v][s] = a2av_len(s, me, k, v), rd[v][s] = (int)rt[v], rt[v] += rc[v][s] + 1;
        recv[v] = malloc((rt[v] + 1) * sizeof(int));
        for (long i = 0; i <= rt[v]; i++) recv[v][i] = -9;
    }
    send = malloc((st + 1) * sizeof(int));
    for (int d = 0; d < n; d++)
        for (int i = 0; i < sc[d]; i++) send[sd[d] + i] = a2a(me, d, i);
    /* The second exchange sends from a buffer laid out as its receive buffer. */
    int *send1 = malloc((rt[1] + 1) * sizeof(int));
    for (int d = 0; d < n; d++)
        for (int i = 0; i < rc[1][d]; i++) send1[rd[1][d] + i] = a2a(me, d, i);
    MPI_Request r[2];
    MPI_Ialltoallv(send, sc, sd, MPI_INT, recv[0], rc[0], rd[0], MPI_INT, comm, &r[0]);
    MPI_Ialltoallv(send1, rc[1], rd[1], MPI_INT, recv[1], rc[1], rd[1], MPI_INT, comm, &r[1]);
    int ok = complete(&r[1], how) && complete(&r[0], how);
    for (int v = 0; v < 2; v++)
        for (int s = 0; s < n; s++) {
            for (int i = 0; i < rc[v][s]; i++) ok &= recv[v][rd[v][s] + i] == a2a(s, me, i), hash(recv[v][rd[v][s] + i]);
            ok &= recv[v][rd[v][s] + rc[v][s]] == -9;
        }
    char what[112];
    snprintf(what, sizeof what, "MPI_Ialltoallv k=%d, two in flight (%s)", k, how_names[how]);
    result(ok, what);
    free(send);
    free(send1);
    free(sc);
    free(sd);
    for (int v = 0; v < 2; v++) free(rc[v]), free(rd[v]), free(recv[v]);
}

/* MPI_Ialltoallv into a strided vector type on odd ranks (freed before completion), 4
 * MPI_INT from every rank. */
static void ialltoallv_types(void) {
    MPI_Datatype vec;
    MPI_Type_vector(4, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int *sc = malloc(size * sizeof(int)), *sd = malloc(size * sizeof(int));
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    int *send = malloc(4 * size * sizeof(int) + 4), *recv = malloc(7 * size * sizeof(int) + 4);
    int odd = rank % 2, ok = 1;
    for (int d = 0; d < size; d++) {
        sc[d] = 4, sd[d] = 4 * d, rc[d] = odd ? 1 : 4, rd[d] = odd ? d : 4 * d;
        for (int i = 0; i < 4; i++) send[4 * d + i] = a2a(rank, d, i);
    }
    for (int i = 0; i < 7 * size; i++) recv[i] = -1;
    MPI_Request r;
    MPI_Ialltoallv(send, sc, sd, MPI_INT, recv, rc, rd, odd ? vec : MPI_INT, MPI_COMM_WORLD, &r);
    MPI_Type_free(&vec);
    ok &= MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    for (int s = 0; s < size; s++)
        for (int i = 0; i < 4; i++) {
            int at = odd ? 7 * s + 2 * i : 4 * s + i;
            ok &= recv[at] == a2a(s, rank, i);
            if (odd && i < 3) ok &= recv[at + 1] == -1;
            hash(recv[at]);
        }
    result(ok, "MPI_Ialltoallv into a strided vector type on odd ranks, freed before completion");
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(send);
    free(recv);
}

/* An MPI_Igather of `count` ints and an MPI_Igatherv (rank r's block (r * 3 + 1) % 4 *
 * count / 2 ints, none for some, placed in reversed rank order with a gap of one int after
 * each) in flight at once to the last rank, completed with `how`; then MPI_Iscatter and
 * MPI_Iscatterv of the same blocks back, in flight at once. Not in place (as Ialltoall's,
 * see there). */
static void igather_iscatter_ints(MPI_Comm comm, long count, int how) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int root = n - 1, *rc = malloc(n * sizeof(int)), *rd = malloc(n * sizeof(int));
    long at = 0;
    for (int r = n - 1; r >= 0; r--) rc[r] = (int)((r * 3 + 1) % 4 * count / 2), rd[r] = (int)at, at += rc[r] + 1;
    int *send = malloc((2 * count + 1) * sizeof(int)), *all = malloc((count * n + 1) * sizeof(int));
    int *allv = malloc((at + 1) * sizeof(int)), *back = malloc((count + 1) * sizeof(int));
    int *backv = malloc((2 * count + 1) * sizeof(int));
    for (long i = 0; i < 2 * count; i++) send[i] = a2a(me, 1, i);
    for (long i = 0; i < count * n; i++) all[i] = -1;
    for (long i = 0; i <= at; i++) allv[i] = -1;
    MPI_Request r[2];
    MPI_Igather(send, (int)count, MPI_INT, all, (int)count, MPI_INT, root, comm, &r[0]);
    MPI_Igatherv(send, rc[me], MPI_INT, allv, rc, rd, MPI_INT, root, comm, &r[1]);
    int ok = complete(&r[1], how) && complete(&r[0], how);
    if (me == root)
        for (int q = 0; q < n; q++) {
            for (long i = 0; i < count; i++) ok &= all[q * count + i] == a2a(q, 1, i);
            for (int i = 0; i < rc[q]; i++) ok &= allv[rd[q] + i] == a2a(q, 1, i), hash(allv[rd[q] + i]);
            ok &= allv[rd[q] + rc[q]] == -1;
        }
    char what[128];
    snprintf(what, sizeof what, "MPI_Igather and MPI_Igatherv MPI_INT count %ld (%s)", count, how_names[how]);
    result(ok, what);
    for (long i = 0; i < 2 * count; i++) back[i < count ? i : 0] = -2, backv[i] = -3;
    MPI_Iscatter(all, (int)count, MPI_INT, back, (int)count, MPI_INT, root, comm, &r[0]);
    MPI_Iscatterv(allv, rc, rd, MPI_INT, backv, rc[me], MPI_INT, root, comm, &r[1]);
    ok = complete(&r[0], how) && complete(&r[1], how);
    for (long i = 0; i < count; i++) ok &= back[i] == a2a(me, 1, i);
    for (int i = 0; i < rc[me]; i++) ok &= backv[i] == a2a(me, 1, i);
    ok &= rc[me] == 2 * count || backv[rc[me]] == -3;
    snprintf(what, sizeof what, "MPI_Iscatter and MPI_Iscatterv MPI_INT count %ld (%s)", count, how_names[how]);
    result(ok, what);
    free(rc);
    free(rd);
    free(send);
    free(all);
    free(allv);
    free(back);
    free(backv);
}

/* MPI_Igatherv into strided vectors at the root (rank r's (r % 3) vectors of 4 ints, none
 * for some, block r at 14 r ints) and MPI_Iscatterv of them back, mixed types elsewhere,
 * every type freed before completion. */
static void igatherv_types(void) {
    MPI_Datatype four, vec;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_vector(4, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&four);
    MPI_Type_commit(&vec);
    int root = size / 2, k = rank % 3, odd = rank % 2, ok = 1;
    int *rc = malloc(size * sizeof(int)), *rd = malloc(size * sizeof(int));
    int *all = malloc(14 * size * sizeof(int)), send[8], back[8];
    for (int r = 0; r < size; r++) rc[r] = r % 3, rd[r] = 2 * r;
    for (int i = 0; i < 8; i++) send[i] = a2a(rank, 2, i), back[i] = -2;
    for (int i = 0; i < 14 * size; i++) all[i] = -1;
    MPI_Request r;
    MPI_Igatherv(send, odd ? k : 4 * k, odd ? four : MPI_INT, all, rc, rd, vec, root, MPI_COMM_WORLD, &r);
    MPI_Type_free(&vec);
    ok &= MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    if (rank == root)
        for (int q = 0; q < size; q++)
            for (int v = 0; v < q % 3; v++)
                for (int i = 0; i < 4; i++) ok &= all[14 * q + 7 * v + 2 * i] == a2a(q, 2, 4 * v + i);
    result(ok, "MPI_Igatherv into strided vectors at the root, freed before completion");
    MPI_Type_vector(4, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    MPI_Iscatterv(all, rc, rd, vec, back, odd ? k : 4 * k, odd ? four : MPI_INT, root, MPI_COMM_WORLD, &r);
    MPI_Type_free(&vec);
    MPI_Type_free(&four);
    ok = MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    for (int i = 0; i < 8; i++) ok &= back[i] == (i < 4 * k ? a2a(rank, 2, i) : -2);
    result(ok, "MPI_Iscatterv from strided vectors, contiguous types elsewhere, freed before completion");
    free(rc);
    free(rd);
    free(all);
}

/* Two MPI_Iallgathervs in flight at once on `comm`: rank r contributes (r * 3 + 1) % 4 *
 * k ints (none for some), received in rank order from the start, and in reversed rank
 * order with a gap of one int after each block (left alone), on odd ranks into a derived
 * type freed before completion; completed with `how`. Not in place (as Ialltoall's, see
 * there). */
static void iallgatherv_ints(MPI_Comm comm, int k, int how) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *rc = malloc(n * sizeof(int)), *pd = malloc(n * sizeof(int)), *gd = malloc(n * sizeof(int));
    long packed = 0, gaps = 0;
    for (int r = 0; r < n; r++) rc[r] = (r * 3 + 1) % 4 * k, pd[r] = (int)packed, packed += rc[r];
    for (int r = n - 1; r >= 0; r--) gd[r] = (int)gaps, gaps += rc[r] + 1;
    int *send = malloc((rc[me] + 1) * sizeof(int)), *a = malloc((packed + 1) * sizeof(int));
    int *b = malloc((2 * gaps + 1) * sizeof(int));
    for (int i = 0; i < rc[me]; i++) send[i] = a2a(me, 3, i);
    for (long i = 0; i <= packed; i++) a[i] = -1;
    for (long i = 0; i <= 2 * gaps; i++) b[i] = -1;
    MPI_Datatype one;
    /* On odd ranks the second receive is into a derived type (contiguous(1), which the
     * library unpacks into; a resized type with gaps hangs MPICH 4.0.2's own Iallgatherv). */
    MPI_Type_contiguous(1, MPI_INT, &one);
    MPI_Type_commit(&one);
    int odd = me % 2, stride = 1;
    MPI_Request r[2];
    MPI_Iallgatherv(send, rc[me], MPI_INT, a, rc, pd, MPI_INT, comm, &r[0]);
    MPI_Iallgatherv(send, rc[me], MPI_INT, b, rc, gd, odd ? one : MPI_INT, comm, &r[1]);
    MPI_Type_free(&one);
    int ok = complete(&r[1], how) && complete(&r[0], how);
    for (int q = 0; q < n; q++) {
        for (int i = 0; i < rc[q]; i++) {
            ok &= a[pd[q] + i] == a2a(q, 3, i) && b[stride * (gd[q] + i)] == a2a(q, 3, i);
            hash(a[pd[q] + i]);
        }
        ok &= b[stride * (gd[q] + rc[q])] == -1;
    }
    char what[128];
    snprintf(what, sizeof what, "MPI_Iallgatherv k=%d, packed and reversed with gaps%s (%s)", k,
             odd ? " into a derived type" : "", how_names[how]);
    result(ok, what);
    free(rc);
    free(pd);
    free(gd);
    free(send);
    free(a);
    free(b);
}

/* MPI_Ireduce_scatter_block (blocks of k long longs, MPI_SUM) and MPI_Ireduce_scatter
 * (blocks that differ by rank, none for some, MPI_MAX on ints) in flight together, and an
 * in-place MPI_Ireduce_scatter_block of doubles after them, on `comm`, completed with
 * `how`; one spare element past each block, which must stay as it was. */
static void ireduce_scatters(MPI_Comm comm, int k, int how) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *rc = malloc(n * sizeof(int)), all = 0, at = 0;
    for (int r = 0; r < n; r++) rc[r] = (r * 5 + 2) % 4 * k, all += rc[r];
    for (int r = 0; r < me; r++) at += rc[r];
    long nb = (long)k * n;
    llong *bs = malloc((nb + 1) * sizeof(llong)), *bd = malloc((k + 1) * sizeof(llong));
    int *vs = malloc((all + 1) * sizeof(int)), *vd = malloc((rc[me] + 1) * sizeof(int));
    double *ip = malloc((nb + 1) * sizeof(double));
    for (long i = 0; i < nb; i++) bs[i] = val(me, i) * (i + 1), ip[i] = (double)val(me, i);
    for (int i = 0; i < all; i++) vs[i] = a2a(me, 5, i);
    for (int i = 0; i <= k; i++) bd[i] = -1;
    for (int i = 0; i <= rc[me]; i++) vd[i] = -1;
    ip[nb] = -1;
    MPI_Request r[2];
    MPI_Ireduce_scatter_block(bs, bd, k, MPI_LONG_LONG, MPI_SUM, comm, &r[0]);
    MPI_Ireduce_scatter(vs, vd, rc, MPI_INT, MPI_MAX, comm, &r[1]);
    int ok = complete(&r[1], how) && complete(&r[0], how);
    for (int i = 0; i < k; i++) {
        long g = (long)me * k + i;
        llong want = 0;
        for (int q = 0; q < n; q++) want += val(q, g) * (g + 1);
        ok &= bd[i] == want;
        hash(bd[i]);
    }
    ok &= bd[k] == -1;
    for (int i = 0; i < rc[me]; i++) {
        int want = a2a(0, 5, at + i);
        for (int q = 1; q < n; q++) want = a2a(q, 5, at + i) > want ? a2a(q, 5, at + i) : want;
        ok &= vd[i] == want;
        hash(vd[i]);
    }
    ok &= vd[rc[me]] == -1;
    MPI_Ireduce_scatter_block(MPI_IN_PLACE, ip, k, MPI_DOUBLE, MPI_SUM, comm, &r[0]);
    ok &= complete(&r[0], how);
    for (int i = 0; i < k; i++) {
        long g = (long)me * k + i;
        double want = 0;
        for (int q = 0; q < n; q++) want += (double)val(q, g);
        ok &= ip[i] == want;
        hash((long long)ip[i]);
    }
    ok &= ip[nb] == -1;
    char what[128];
    snprintf(what, sizeof what, "MPI_Ireduce_scatter_block and MPI_Ireduce_scatter k=%d (%s)", k,
             how_names[how]);
    result(ok, what);
    free(rc);
    free(bs);
    free(bd);
    free(vs);
    free(vd);
    free(ip);
}

/* MPI_Iallgather into a contiguous and a strided vector type, freed before completion. */
static void iallgather_types(void) {
    MPI_Datatype four, vec;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_vector(4, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&four);
    MPI_Type_commit(&vec);
    int send[4], *a = malloc(4 * size * sizeof(int)), *b = malloc(7 * size * sizeof(int));
    for (int i = 0; i < 4; i++) send[i] = (int)val(rank, i) + 10 * i;
    for (int i = 0; i < 7 * size; i++) b[i] = -1;
    MPI_Request r[2];
    MPI_Iallgather(send, 4, MPI_INT, a, 1, four, MPI_COMM_WORLD, &r[0]);
    MPI_Iallgather(send, rank % 2 ? 1 : 4, rank % 2 ? four : MPI_INT, b, 1, vec, MPI_COMM_WORLD, &r[1]);
    MPI_Type_free(&four);
    MPI_Type_free(&vec);
    int ok = MPI_Waitall(2, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS;
    for (int q = 0; q < size; q++)
        for (int i = 0; i < 4; i++) {
            int want = (int)val(q, i) + 10 * i;
            ok &= a[q * 4 + i] == want && b[q * 7 + 2 * i] == want;
            if (i < 3) ok &= b[q * 7 + 2 * i + 1] == -1;
            hash(b[q * 7 + 2 * i]);
        }
    result(ok, "MPI_Iallgather into a contiguous and a strided vector type, freed before completion");
    free(a);
    free(b);
}

/* The first MPI_Iallgather of a new communicator, started while an Ibcast is in flight on
 * it, by even ranks before they wait for the Ibcast and by odd ranks after: a peer waiting
 * for the Ibcast must not wait on a rank that sits in the Iallgather's setup. */
static void first_iallgather_after_ibcast(void) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    enum { N = 1 << 18 };
    int *b = malloc(N * sizeof(int)), *all = malloc(size * sizeof(int)), v = rank * 5 + 1, ok = 1;
    for (int i = 0; i < N; i++) b[i] = rank == 0 ? i : -1;
    MPI_Request r[2];
    MPI_Ibcast(b, N, MPI_INT, 0, c, &r[0]);
    if (rank % 2 == 0) {
        MPI_Iallgather(&v, 1, MPI_INT, all, 1, MPI_INT, c, &r[1]);
        ok &= MPI_Waitall(2, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS;
    } else {
        ok &= MPI_Wait(&r[0], MPI_STATUS_IGNORE) == MPI_SUCCESS;
        MPI_Iallgather(&v, 1, MPI_INT, all, 1, MPI_INT, c, &r[1]);
        ok &= MPI_Wait(&r[1], MPI_STATUS_IGNORE) == MPI_SUCCESS;
    }
    for (int i = 0; i < N; i += 4099) ok &= b[i] == i;
    for (int q = 0; q < size; q++) ok &= all[q] == q * 5 + 1, hash(all[q]);
    result(ok, "the first Iallgather of a communicator while an Ibcast on it is in flight");
    free(b);
    free(all);
    MPI_Comm_free(&c);
}

int main(int argc, char **argv) {
    int die = -1, die_recv = -1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--die") == 0 && i + 1 < argc) die = atoi(argv[++i]);
        else if (strcmp(argv[i], "--die-in-recv") == 0 && i + 1 < argc)
            die_recv = atoi(argv[++i]);
    }
    MPI_Op ops[O_N] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND,
                       MPI_LOR, MPI_BAND, MPI_BOR, MPI_BXOR};
    memcpy(mpi_ops, ops, sizeof ops);
    if (die_recv > 0) {
        die_in_recv(die_recv);
        MPI_Finalize();
        return 0;
    }
    if (die >= 0) {
        back_to_back(die);
        MPI_Finalize();
        return 0;
    }
    MPI_Comm dup, rev;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev);
    long full[] = {1, 7, 1031, 65539, (1 << 20) + 3}, few[] = {1, 1031, 65539};
    long *counts = quick ? few : full;
    int n = quick ? 3 : 4, how = 0;
    cases_int(MPI_COMM_WORLD, "world", counts, quick ? 3 : 5, &how);
    cases_llong(dup, "dup", counts, n, &how);
    cases_uchar(MPI_COMM_WORLD, "world", counts, n, &how);
    cases_float(dup, "dup", counts, n, &how);
    cases_double(MPI_COMM_WORLD, "world", counts, n, &how);
    {
        long ag[] = {0, 1, 7, 1031, 2049};
        for (int k = 0; k < 5; k++) iallgather_ints(k % 2 ? dup : MPI_COMM_WORLD, ag[k], k % C_N);
        iallgather_ints(MPI_COMM_WORLD, (16L << 20) / (long)sizeof(int) / size, C_WAITALL);
        iallgather_types();
        first_iallgather_after_ibcast();
        for (int k = 0; k < 5; k++) ialltoall_ints(k % 2 ? dup : MPI_COMM_WORLD, ag[k], k % C_N);
        ialltoall_ints(MPI_COMM_WORLD, (16L << 20) / (long)sizeof(int) / size / size, C_WAITALL);
        ialltoall_ints(rev, 7, C_TEST);
        for (int k = 1; k < 4; k++) ialltoallv_ints(k % 2 ? dup : MPI_COMM_WORLD, k * k * 3, k % C_N);
        ialltoallv_ints(MPI_COMM_WORLD, 1031, C_WAITALL);
        ialltoallv_types();
        {
            /* A blocking Gather on the duplicate first: topo-run then knows which ranks lie
             * under each leader there, and its Igather and Iscatter go through the leaders
             * (on world, not yet: directly). */
            int one = rank, *every = malloc(size * sizeof(int)), ok = 1;
            MPI_Gather(&one, 1, MPI_INT, every, 1, MPI_INT, 0, dup);
            for (int q = 0; rank == 0 && q < size; q++) ok &= every[q] == q;
            result(ok, "MPI_Gather on the duplicate before its Igathers");
            free(every);
        }
        for (int k = 0; k < 5; k++) igather_iscatter_ints(k % 2 ? dup : MPI_COMM_WORLD, ag[k] + 1, k % C_N);
        igather_iscatter_ints(rev, 7, C_TEST);
        igather_iscatter_ints(MPI_COMM_WORLD, (4L << 20) / (long)sizeof(int) / size, C_WAITALL);
        igatherv_types();
        for (int k = 1; k < 4; k++) iallgatherv_ints(k % 2 ? dup : MPI_COMM_WORLD, k * k * 5, k % C_N);
        iallgatherv_ints(rev, 3, C_TEST);
        iallgatherv_ints(MPI_COMM_WORLD, (int)((4L << 20) / (long)sizeof(int) / size / 2), C_WAITALL);
        for (int k = 1; k < 5; k++) ireduce_scatters(k % 2 ? dup : MPI_COMM_WORLD, k * k * 3 - 2, k % C_N);
        ireduce_scatters(rev, 5, C_TEST);
        ireduce_scatters(MPI_COMM_WORLD, (int)((2L << 20) / (long)sizeof(llong) / size), C_WAITALL);
    }
    iscans(MPI_COMM_WORLD, "world", 0, C_WAIT);
    iscans(dup, "dup", 1, C_WAITALL);
    iscans(rev, "reversed", 0, C_TEST);
    for (int h = 0; h < 3; h++) mixed(dup, rev, h);
    statuses();
    orders(dup);
    left_incomplete();
    freed_request();
    mixed_types();
    if (size > 1) wait_on_other();
    pmpi_wait();
    for (int k = 0; size > 1 && k < B_N; k++) blocked_in(k, rev);
    back_to_back(-1);
    MPI_Comm_free(&rev);
    MPI_Comm_free(&dup);
    int status = report();
    MPI_Finalize();
    return status;
}
