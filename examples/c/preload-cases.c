/* preload-cases: legal MPI programs that exercise the PMPI library's ordering, progress
 * and communicator rules, one case per argument. Each case checks its results on every
 * rank; the last lines are "digest: HEX" and "N passed, M failed" (check.h).
 *
 *   mpicc -O2 -o preload-cases preload-cases.c
 *   srun --mpi=pmix topo-run -- ./preload-cases mpi-progress comm-reuse
 *
 * mpi-progress: rank 0 starts an MPI_Iallreduce with a user-defined operation (which MPI
 *   runs) and enters MPI_Barrier (topo-run's), while the other ranks first wait on that
 *   Iallreduce. It completes only if topo-run's waits drive MPI's progress.
 * comm-reuse: communicators congruent to world and not congruent (a reversed split) are
 *   created and freed in turn, many times, so that MPI reuses their handles; every
 *   collective on each must give the right result.
 * local-start: starting a nonblocking collective is local (MPI-4.0 §6.12). For each of
 *   MPI_Ibcast, _Ireduce, _Iallreduce, _Ibarrier and _Iallgather, rank 0 starts it and
 *   then sends to rank 1, which receives before it starts it: on world (first use), then
 *   with a large MPI_Ibcast in flight on another communicator, on world and on a fresh
 *   duplicate each. A start that waits for the other ranks hangs.
 * free-in-flight: a duplicate is freed while an MPI_Iallreduce on it is in flight (legal:
 *   pending operations complete normally); the result must still arrive.
 * bottom: MPI_Allgather where rank 0 sends from MPI_BOTTOM and rank 1 receives at
 *   MPI_BOTTOM, with datatypes of absolute addresses, and the others use plain buffers
 *   (ranks that choose different paths hang); and MPI_Bcast from and into MPI_BOTTOM (which
 *   MPICH's MPI_Pack refuses although the standard allows it).
 * renamed-type: rank 0 renames MPI_INT (MPI_Type_set_name, a local call), then every rank
 *   reduces, broadcasts and gathers MPI_INT. Ranks that recognise types by name split.
 * attr-copy: the program caches an attribute with a counting copy callback on world and
 *   sets MPI_ERRORS_RETURN there, then duplicates world and the duplicate: the callback
 *   must run exactly twice (once per duplicate the program made), whatever communicators
 *   topo-run makes for itself.
 *
 * nb-first: communicators that are not congruent to world (world reversed, world rotated by
 *   one, the even and the odd ranks), made from world and freed in turn, whose collectives
 *   are all nonblocking (MPI_Ibcast from a moving root, _Ireduce, _Iallreduce, _Iallgather,
 *   _Ibarrier), as mpi4py's often are. Such a communicator cannot get a context at a
 *   nonblocking start; the library learns from the first ones and sets the next ones up in
 *   the call that creates them. Every result checked.
 * split: MPI_Comm_split of world and of a split of it, with colors and keys of every kind
 *   (one color, reversed keys, ties broken by rank, negative keys, MPI_UNDEFINED, one rank
 *   per color), each made again after the last was freed: every new communicator must be
 *   congruent to the one MPI's own PMPI_Comm_split makes from the same arguments, carry
 *   the parent's error handler, and reduce right.
 * nb-stress: rounds of 1 to 20 nonblocking collectives in flight at once (MPI_Ibcast,
 *   _Ireduce and _Iallreduce of 1 to 5000 elements at random roots, _Ibarrier,
 *   _Iallgather) on four communicators (world and three duplicates), with a ring of
 *   point-to-point messages in the same request array, completed in turn by MPI_Waitall,
 *   _Waitany, _Waitsome, _Testall, _Testany and _Testsome. Every rank draws the same
 *   sequence, so each communicator sees its collectives in the same order everywhere.
 *
 * --pmpi-init initialises MPI through PMPI_Init (as Fortran programs and tools do, unseen
 * by the PMPI library); --pmpi-finalize finalises through PMPI_Finalize (as the mpi_f08
 * bindings do).
 */
#include "check.h"

#include <stdlib.h>
#include <string.h>

static void sum_op(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    long long *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] += a[i];
}

static void mpi_progress(void) {
    const int n = 1 << 20;
    long long *mine = malloc(n * sizeof *mine), *sum = malloc(n * sizeof *sum);
    for (int i = 0; i < n; i++) mine[i] = rank + 1;
    MPI_Op op;
    MPI_Op_create(sum_op, 1, &op);
    MPI_Request req;
    MPI_Iallreduce(mine, sum, n, MPI_LONG_LONG, op, MPI_COMM_WORLD, &req);
    if (rank == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    int ok = 1;
    long long want = (long long)size * (size + 1) / 2;
    for (int i = 0; i < n; i++) ok &= sum[i] == want;
    hash(sum[0]);
    result(ok, "mpi-progress: rank 0 in MPI_Barrier while the others wait on a user-op MPI_Iallreduce");
    MPI_Op_free(&op);
    free(mine);
    free(sum);
}

static void comm_reuse(void) {
    int ok = 1;
    for (int i = 0; i < 40; i++) {
        MPI_Comm c;
        if (i % 2 == 0) {
            MPI_Comm_dup(MPI_COMM_WORLD, &c);
        } else {
            /* Reversed: rank r of c is world rank size-1-r. */
            MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &c);
        }
        int crank;
        MPI_Comm_rank(c, &crank);
        long long v = crank + 1, s = 0;
        MPI_Allreduce(&v, &s, 1, MPI_LONG_LONG, MPI_SUM, c);
        ok &= s == (long long)size * (size + 1) / 2;
        /* The root is rank 0 of c: world rank size-1 on the reversed ones. */
        long long b = crank == 0 ? 1000 + i : -1;
        MPI_Bcast(&b, 1, MPI_LONG_LONG, 0, c);
        ok &= b == 1000 + i;
        long long first = crank, r = -1;
        MPI_Reduce(&first, &r, 1, MPI_LONG_LONG, MPI_MAX, 0, c);
        if (crank == 0) ok &= r == size - 1;
        MPI_Barrier(c);
        hash(s + b);
        MPI_Comm_free(&c);
    }
    result(ok, "comm-reuse: collectives on congruent and reversed communicators whose handles MPI reuses");
}

/* Starts nonblocking collective k on c: x is the contribution (the broadcast's buffer),
 * v the result of `size` elements. Returns its name. */
static const char *start_nb(int k, MPI_Comm c, long long *x, long long *v, MPI_Request *r) {
    switch (k) {
    case 0:
        *x = rank == 0 ? 77 : -1;
        MPI_Ibcast(x, 1, MPI_LONG_LONG, 0, c, r);
        return "MPI_Ibcast";
    case 1:
        *x = rank + 1;
        MPI_Ireduce(x, v, 1, MPI_LONG_LONG, MPI_SUM, 0, c, r);
        return "MPI_Ireduce";
    case 2:
        *x = rank + 1;
        MPI_Iallreduce(x, v, 1, MPI_LONG_LONG, MPI_SUM, c, r);
        return "MPI_Iallreduce";
    case 3:
        MPI_Ibarrier(c, r);
        return "MPI_Ibarrier";
    default:
        *x = rank + 1;
        MPI_Iallgather(x, 1, MPI_LONG_LONG, v, 1, MPI_LONG_LONG, c, r);
        return "MPI_Iallgather";
    }
}

/* Whether nonblocking collective k gave the right result. */
static int check_nb(int k, long long x, const long long *v) {
    long long sum = (long long)size * (size + 1) / 2;
    switch (k) {
    case 0:
        hash(x);
        return x == 77;
    case 1:
        return rank != 0 || v[0] == sum;
    case 2:
        hash(v[0]);
        return v[0] == sum;
    case 3:
        return 1;
    default: {
        int ok = 1;
        for (int i = 0; i < size; i++) ok &= v[i] == i + 1;
        return ok;
    }
    }
}

/* Rank 0 starts collective k on c, then sends to rank 1, which receives before starting
 * it; then every rank waits. Returns whether the result is right (a hang never returns). */
static int start_then_send(int k, MPI_Comm c, const char **name) {
    long long x = 0, y = 5;
    long long *v = calloc(size, sizeof *v);
    MPI_Request r;
    if (rank == 0) {
        *name = start_nb(k, c, &x, v, &r);
        MPI_Send(&y, 1, MPI_LONG_LONG, 1, 7, c);
    } else if (rank == 1) {
        MPI_Recv(&y, 1, MPI_LONG_LONG, 0, 7, c, MPI_STATUS_IGNORE);
        *name = start_nb(k, c, &x, v, &r);
    } else {
        *name = start_nb(k, c, &x, v, &r);
    }
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    int ok = check_nb(k, x, v) && y == 5;
    free(v);
    return ok;
}

static void local_start(void) {
    char what[160];
    const char *name = "";
    for (int k = 0; k < 5; k++) {
        int ok = start_then_send(k, MPI_COMM_WORLD, &name);
        snprintf(what, sizeof what, "local-start: %s on world, first use", name);
        result(ok, what);
    }
    /* A large broadcast in flight on another communicator meanwhile. */
    MPI_Comm other;
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    int n = quick ? 1 << 20 : 1 << 22;
    int *big = malloc((size_t)n * sizeof *big);
    for (int i = 0; i < n; i++) big[i] = rank == 0 ? i : -1;
    MPI_Request rb;
    MPI_Ibcast(big, n, MPI_INT, 0, other, &rb);
    for (int k = 0; k < 5; k++) {
        int ok = start_then_send(k, MPI_COMM_WORLD, &name);
        snprintf(what, sizeof what, "local-start: %s on world, an MPI_Ibcast in flight", name);
        result(ok, what);
        MPI_Comm fresh;
        MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
        ok = start_then_send(k, fresh, &name);
        snprintf(what, sizeof what, "local-start: %s on a fresh duplicate, an MPI_Ibcast in flight",
                 name);
        result(ok, what);
        MPI_Comm_free(&fresh);
    }
    MPI_Wait(&rb, MPI_STATUS_IGNORE);
    int ok = 1;
    for (int i = 0; i < n; i++) ok &= big[i] == i;
    result(ok, "local-start: the large MPI_Ibcast in flight meanwhile");
    free(big);
    MPI_Comm_free(&other);
}

static void free_in_flight(void) {
    int ok = 1;
    for (int i = 0; i < 10; i++) {
        MPI_Comm d;
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        long long x = rank + i, s = -1;
        MPI_Request r;
        MPI_Iallreduce(&x, &s, 1, MPI_LONG_LONG, MPI_SUM, d, &r);
        MPI_Comm_free(&d);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        ok &= s == (long long)size * (size - 1) / 2 + (long long)size * i;
        hash(s);
    }
    result(ok, "free-in-flight: a duplicate freed with an MPI_Iallreduce in flight on it");
}

/* One MPI_Allgather where rank `sender` sends from MPI_BOTTOM and rank `receiver`
 * receives at MPI_BOTTOM (-1: nobody), with datatypes of absolute addresses; the others
 * use plain buffers. Returns whether every block arrived. */
static int bottom_once(int sender, int receiver, int base) {
    long long mine = rank + base;
    long long *all = calloc(size, sizeof *all);
    MPI_Datatype send = MPI_LONG_LONG, recv = MPI_LONG_LONG;
    const void *sbuf = &mine;
    void *rbuf = all;
    MPI_Aint at;
    if (rank == sender) {
        MPI_Get_address(&mine, &at);
        MPI_Type_create_hindexed_block(1, 1, &at, MPI_LONG_LONG, &send);
        MPI_Type_commit(&send);
        sbuf = MPI_BOTTOM;
    }
    if (rank == receiver) {
        /* Block r lands at MPI_BOTTOM + r * extent, extent 8: at &all[r]. */
        MPI_Get_address(all, &at);
        MPI_Type_create_hindexed_block(1, 1, &at, MPI_LONG_LONG, &recv);
        MPI_Type_commit(&recv);
        rbuf = MPI_BOTTOM;
    }
    MPI_Allgather(sbuf, 1, send, rbuf, 1, recv, MPI_COMM_WORLD);
    int ok = 1;
    for (int i = 0; i < size; i++) {
        ok &= all[i] == i + base;
        hash(all[i]);
    }
    if (send != MPI_LONG_LONG) MPI_Type_free(&send);
    if (recv != MPI_LONG_LONG) MPI_Type_free(&recv);
    free(all);
    return ok;
}

/* MPI_Bcast from rank 0 at MPI_BOTTOM into rank 1 at MPI_BOTTOM (datatypes of absolute
 * addresses); the others use plain buffers. */
static int bottom_bcast(void) {
    long long v[3] = {-1, -1, -1};
    if (rank == 0) v[0] = 11, v[1] = 22, v[2] = 33;
    MPI_Datatype t = MPI_LONG_LONG;
    void *buf = v;
    int count = 3;
    if (rank <= 1) {
        MPI_Aint at;
        MPI_Get_address(v, &at);
        MPI_Type_create_hindexed_block(1, 3, &at, MPI_LONG_LONG, &t);
        MPI_Type_commit(&t);
        buf = MPI_BOTTOM;
        count = 1;
    }
    MPI_Bcast(buf, count, t, 0, MPI_COMM_WORLD);
    if (t != MPI_LONG_LONG) MPI_Type_free(&t);
    hash(v[0] + v[1] + v[2]);
    return v[0] == 11 && v[1] == 22 && v[2] == 33;
}

static void bottom(void) {
    result(bottom_bcast(), "bottom: MPI_Bcast from and into MPI_BOTTOM on ranks 0 and 1");
    result(bottom_once(0, -1, 100), "bottom: MPI_Allgather from MPI_BOTTOM on rank 0 only");
    result(bottom_once(-1, 1, 200), "bottom: MPI_Allgather into MPI_BOTTOM on rank 1 only");
    result(bottom_once(1, 0, 300), "bottom: MPI_Allgather from MPI_BOTTOM on rank 1, into it on rank 0");
}

static void renamed_type(void) {
    if (rank == 0) MPI_Type_set_name(MPI_INT, "renamed int");
    int v = rank + 1, s = 0, b = rank == 0 ? 42 : 0, r = 0;
    int *all = calloc(size, sizeof *all);
    MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce(&v, &r, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Bcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Allgather(&v, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    int ok = s == size * (size + 1) / 2 && (rank != 0 || r == size) && b == 42;
    for (int i = 0; i < size; i++) ok &= all[i] == i + 1;
    hash(s + b);
    free(all);
    if (rank == 0) MPI_Type_set_name(MPI_INT, "MPI_INT");
    result(ok, "renamed-type: MPI_INT renamed on rank 0 only");
}

/* The same pseudo-random sequence on every rank. */
static unsigned long long draw_state = 88172645463325252ull;
static unsigned draw(unsigned n) {
    draw_state ^= draw_state << 13;
    draw_state ^= draw_state >> 7;
    draw_state ^= draw_state << 17;
    return (unsigned)(draw_state % n);
}

/* One collective of a stress round: what it is, and its buffers. */
struct slot {
    int op, root, n, j;
    long long *send, *recv;
};

static void start_slot(struct slot *s, MPI_Comm c, MPI_Request *r) {
    int n = s->n, j = s->j;
    s->send = malloc((size_t)n * sizeof(long long));
    s->recv = malloc((size_t)n * size * sizeof(long long));
    for (int i = 0; i < n; i++) s->send[i] = (long long)rank * 1000000 + i + j;
    for (int i = 0; i < n * size; i++) s->recv[i] = -1;
    switch (s->op) {
    case 0:
        if (rank == s->root) memcpy(s->recv, s->send, (size_t)n * sizeof(long long));
        MPI_Ibcast(s->recv, n, MPI_LONG_LONG, s->root, c, r);
        break;
    case 1:
        MPI_Ireduce(s->send, s->recv, n, MPI_LONG_LONG, MPI_SUM, s->root, c, r);
        break;
    case 2:
        MPI_Iallreduce(s->send, s->recv, n, MPI_LONG_LONG, MPI_SUM, c, r);
        break;
    case 3:
        MPI_Ibarrier(c, r);
        break;
    default:
        MPI_Iallgather(s->send, n, MPI_LONG_LONG, s->recv, n, MPI_LONG_LONG, c, r);
        break;
    }
}

static int check_slot(struct slot *s) {
    int ok = 1, n = s->n, j = s->j;
    long long ranks = (long long)size * (size - 1) / 2 * 1000000;
    for (int i = 0; i < n; i++) {
        switch (s->op) {
        case 0:
            ok &= s->recv[i] == (long long)s->root * 1000000 + i + j;
            break;
        case 1:
            if (rank == s->root) ok &= s->recv[i] == ranks + (long long)size * (i + j);
            break;
        case 2:
            ok &= s->recv[i] == ranks + (long long)size * (i + j);
            break;
        case 3:
            break;
        default:
            for (int q = 0; q < size; q++)
                ok &= s->recv[q * n + i] == (long long)q * 1000000 + i + j;
        }
    }
    if (n > 0 && s->op != 3) hash(s->recv[0]);
    free(s->send);
    free(s->recv);
    return ok;
}

/* Completes every request of `reqs` with completion form `how`. */
static void complete_all(int how, int count, MPI_Request *reqs) {
    int done = 0, flag, idx, outcount, *idxs = malloc(count * sizeof *idxs);
    while (done < count) {
        switch (how) {
        case 0:
            MPI_Waitall(count, reqs, MPI_STATUSES_IGNORE);
            done = count;
            break;
        case 1:
            MPI_Waitany(count, reqs, &idx, MPI_STATUS_IGNORE);
            done++;
            break;
        case 2:
            MPI_Waitsome(count, reqs, &outcount, idxs, MPI_STATUSES_IGNORE);
            done += outcount;
            break;
        case 3:
            MPI_Testall(count, reqs, &flag, MPI_STATUSES_IGNORE);
            if (flag) done = count;
            break;
        case 4:
            MPI_Testany(count, reqs, &idx, &flag, MPI_STATUS_IGNORE);
            if (flag && idx != MPI_UNDEFINED) done++;
            break;
        default:
            MPI_Testsome(count, reqs, &outcount, idxs, MPI_STATUSES_IGNORE);
            if (outcount != MPI_UNDEFINED) done += outcount;
        }
    }
    free(idxs);
}

static void nb_stress(void) {
    MPI_Comm comms[4] = {MPI_COMM_WORLD};
    for (int c = 1; c < 4; c++) MPI_Comm_dup(MPI_COMM_WORLD, &comms[c]);
    int rounds = quick ? 60 : 300, ok = 1;
    const int sizes[3] = {1, 100, 5000};
    for (int it = 0; it < rounds; it++) {
        struct slot slots[20];
        MPI_Request reqs[22];
        int k = 1 + draw(20);
        for (int j = 0; j < k; j++) {
            MPI_Comm c = comms[draw(4)];
            slots[j] = (struct slot){.op = draw(5), .root = draw(size), .n = sizes[draw(3)],
                                     .j = it * 20 + j};
            start_slot(&slots[j], c, &reqs[j]);
        }
        /* A ring of messages among the collectives' requests. */
        long long out = (long long)rank * 7 + it, in = -1;
        int left = (rank + size - 1) % size;
        MPI_Comm ring = comms[draw(4)];
        MPI_Irecv(&in, 1, MPI_LONG_LONG, left, it, ring, &reqs[k]);
        MPI_Isend(&out, 1, MPI_LONG_LONG, (rank + 1) % size, it, ring, &reqs[k + 1]);
        complete_all(draw(6), k + 2, reqs);
        ok &= in == (long long)left * 7 + it;
        for (int j = 0; j < k; j++) ok &= check_slot(&slots[j]);
    }
    for (int c = 1; c < 4; c++) MPI_Comm_free(&comms[c]);
    result(ok, "nb-stress: up to 20 nonblocking collectives on four communicators, every completion form");
}

/* The world rank of rank i of communicator `kind` of nb-first (0: reversed, 1: rotated by
 * one, 2: this rank's parity), made by nb_first_comm. */
static int nb_first_world(int kind, int i) {
    switch (kind) {
    case 0: return size - 1 - i;
    case 1: return (i + size - 1) % size;
    default: return 2 * i + rank % 2;
    }
}

static MPI_Comm nb_first_comm(int kind) {
    MPI_Comm c;
    switch (kind) {
    case 0: MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &c); break;
    case 1: MPI_Comm_split(MPI_COMM_WORLD, 0, (rank + 1) % size, &c); break;
    default: MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &c); break;
    }
    return c;
}

static void nb_first(void) {
    int ok = 1, rounds = quick ? 12 : 30;
    for (int round = 0; round < rounds; round++) {
        int kind = round % 3, r, n;
        MPI_Comm c = nb_first_comm(kind);
        MPI_Comm_rank(c, &r);
        MPI_Comm_size(c, &n);
        ok &= nb_first_world(kind, r) == rank;
        long long mine = 1000 * round + rank, b = r == round % n ? mine : -1, red = 0, all = 0;
        long long *v = calloc(n, sizeof *v);
        MPI_Request q[5];
        MPI_Ibcast(&b, 1, MPI_LONG_LONG, round % n, c, &q[0]);
        MPI_Ireduce(&mine, &red, 1, MPI_LONG_LONG, MPI_MAX, 0, c, &q[1]);
        MPI_Iallreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_SUM, c, &q[2]);
        MPI_Iallgather(&mine, 1, MPI_LONG_LONG, v, 1, MPI_LONG_LONG, c, &q[3]);
        MPI_Ibarrier(c, &q[4]);
        MPI_Waitall(5, q, MPI_STATUSES_IGNORE);
        long long sum = 0, max = -1;
        for (int i = 0; i < n; i++) {
            long long w = 1000 * round + nb_first_world(kind, i);
            ok &= v[i] == w;
            sum += w;
            if (w > max) max = w;
        }
        ok &= b == 1000 * round + nb_first_world(kind, round % n) && all == sum;
        ok &= r != 0 || red == max;
        hash(b + all);
        free(v);
        MPI_Comm_free(&c);
    }
    result(ok, "nb-first: communicators not congruent to world whose collectives are all nonblocking");
}

/* The color and key of pattern `kind` for rank `r` of `n` (split). */
static void split_args(int kind, int r, int n, int *color, int *key) {
    switch (kind) {
    case 0: *color = 0, *key = r; break;                  /* world's order */
    case 1: *color = 0, *key = -r; break;                 /* reversed */
    case 2: *color = r % 2, *key = 0; break;              /* ties: by rank */
    case 3: *color = r % 3 == 1 ? MPI_UNDEFINED : r % 2, *key = (r * 7) % 5 - 2; break;
    case 4: *color = r, *key = 0; break;                  /* one rank each */
    default: *color = r < n / 2, *key = n - r; break;     /* halves, reversed */
    }
}

/* The split of `parent` by pattern `kind`, checked against MPI's own: 1 if right. */
static int split_one(MPI_Comm parent, int kind, int round) {
    int r, n, color, key, ok = 1;
    MPI_Comm_rank(parent, &r);
    MPI_Comm_size(parent, &n);
    split_args(kind, r, n, &color, &key);
    MPI_Comm c, ref;
    MPI_Comm_split(parent, color, key, &c);
    PMPI_Comm_split(parent, color, key, &ref);
    if (color == MPI_UNDEFINED) {
        ok = c == MPI_COMM_NULL && ref == MPI_COMM_NULL;
    } else {
        int cmp = MPI_UNEQUAL, cr, cn;
        MPI_Comm_compare(c, ref, &cmp);
        ok &= cmp == MPI_CONGRUENT;
        MPI_Errhandler eh;
        MPI_Comm_get_errhandler(c, &eh);
        ok &= eh == MPI_ERRORS_RETURN;
        MPI_Errhandler_free(&eh);
        MPI_Comm_rank(c, &cr);
        MPI_Comm_size(c, &cn);
        long long mine = 100 * round + cr, sum = 0, want = 100LL * round * cn + (long long)cn * (cn - 1) / 2;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, c);
        ok &= sum == want;
        hash(sum + cr);
        MPI_Comm_free(&c);
        MPI_Comm_free(&ref);
    }
    if (!ok) fprintf(stderr, "split: rank %d: pattern %d, round %d wrong\n", rank, kind, round);
    return ok;
}

static void split(void) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    /* A parent of its own: world reversed, with a context from its first collective. */
    MPI_Comm rev;
    MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &rev);
    long long one = 1, n = 0;
    MPI_Allreduce(&one, &n, 1, MPI_LONG_LONG, MPI_SUM, rev);
    int ok = n == size, rounds = quick ? 3 : 10;
    for (int round = 0; round < rounds; round++) {
        for (int kind = 0; kind < 6; kind++) {
            ok &= split_one(MPI_COMM_WORLD, kind, round);
            ok &= split_one(rev, kind, round);
        }
    }
    MPI_Comm_free(&rev);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    result(ok, "split: MPI_Comm_split gives MPI's communicators");
}

static int copies;

static int count_copy(MPI_Comm old, int keyval, void *extra, void *in, void *out, int *flag) {
    (void)old, (void)keyval, (void)extra;
    copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static void attr_copy(void) {
    int keyval;
    MPI_Comm_create_keyval(count_copy, MPI_COMM_NULL_DELETE_FN, &keyval, NULL);
    MPI_Comm_set_attr(MPI_COMM_WORLD, keyval, (void *)&copies);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm d, d2;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    MPI_Comm_dup(d, &d2);
    long long v = rank + 1, s = 0, s2 = 0;
    MPI_Allreduce(&v, &s, 1, MPI_LONG_LONG, MPI_SUM, d);
    MPI_Allreduce(&v, &s2, 1, MPI_LONG_LONG, MPI_SUM, d2);
    long long want = (long long)size * (size + 1) / 2;
    int ok = copies == 2 && s == want && s2 == want;
    if (!ok) fprintf(stderr, "attr-copy: rank %d: %d copies (want 2)\n", rank, copies);
    hash(s + s2);
    MPI_Comm_free(&d2);
    MPI_Comm_free(&d);
    MPI_Comm_delete_attr(MPI_COMM_WORLD, keyval);
    MPI_Comm_free_keyval(&keyval);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    result(ok, "attr-copy: the program's copy callback runs only for its own duplicates");
}

int main(int argc, char **argv) {
    int pmpi_init = 0, pmpi_finalize = 0;
    for (int i = 1; i < argc; i++) {
        pmpi_init |= !strcmp(argv[i], "--pmpi-init");
        pmpi_finalize |= !strcmp(argv[i], "--pmpi-finalize");
    }
    if (pmpi_init) {
        PMPI_Init(&argc, &argv);
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "mpi-progress")) {
            mpi_progress();
        } else if (!strcmp(argv[i], "comm-reuse")) {
            comm_reuse();
        } else if (!strcmp(argv[i], "local-start")) {
            local_start();
        } else if (!strcmp(argv[i], "free-in-flight")) {
            free_in_flight();
        } else if (!strcmp(argv[i], "bottom")) {
            bottom();
        } else if (!strcmp(argv[i], "renamed-type")) {
            renamed_type();
        } else if (!strcmp(argv[i], "attr-copy")) {
            attr_copy();
        } else if (!strcmp(argv[i], "nb-first")) {
            nb_first();
        } else if (!strcmp(argv[i], "split")) {
            split();
        } else if (!strcmp(argv[i], "nb-stress")) {
            nb_stress();
        } else if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "--pmpi-init") || !strcmp(argv[i], "--pmpi-finalize")) {
        } else {
            if (rank == 0) fprintf(stderr, "preload-cases: unknown case %s\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    int rc = report();
    if (pmpi_finalize) {
        PMPI_Finalize();
    } else {
        MPI_Finalize();
    }
    return rc;
}
