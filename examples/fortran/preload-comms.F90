! preload-comms (Fortran): an unmodified Fortran program whose collectives run on
! communicators of every kind, through one of the three Fortran bindings, chosen when it is
! compiled: `mpif.h` (-DMPIFH), `use mpi` (the default) or `use mpi_f08` (-DF08).
!
! Communicators: MPI_COMM_WORLD, a duplicate (MPI_COMM_DUP), one with info
! (MPI_COMM_DUP_WITH_INFO), world's group (MPI_COMM_CREATE), the node's
! (MPI_COMM_SPLIT_TYPE SHARED), the even and the odd ranks (MPI_COMM_SPLIT), world in
! reversed order (key -rank), each half (MPI_COMM_CREATE_GROUP), and the rows of a 2-D
! Cartesian grid (MPI_CART_CREATE, MPI_CART_SUB). On each, twice (the first blocking call
! on a communicator sets topo-run's context up), at 1, 7 and 1031 elements: MPI_ALLREDUCE
! (INTEGER sum, DOUBLE PRECISION max in place), MPI_REDUCE to every root (in place at the
! root on the second pass), MPI_BCAST from every root, MPI_ALLGATHER, MPI_BARRIER, then
! MPI_IALLREDUCE, MPI_IBCAST, MPI_IREDUCE, MPI_IALLGATHER and MPI_IBARRIER in flight
! together with an MPI_IGATHERV, completed by MPI_WAITALL, then MPI_ISCATTERV,
! MPI_IREDUCE_SCATTER_BLOCK and MPI_IREDUCE_SCATTER, and an MPI_IALLREDUCE completed by
! MPI_TEST. Every result is checked against a reference computed locally.
!
! Last lines: "digest: N" (rank 0's results; the same with and without topo-run) and
! "N passed, M failed" (rank 0, over all ranks). Exit status 1 on any failure.
!
!   mpif90 -O2 [-DMPIFH | -DF08] -o preload-comms-f preload-comms.F90
!   srun --mpi=pmix topo-run -- ./preload-comms-f
#if defined(F08)
#define COMM_T type(MPI_Comm)
#define GROUP_T type(MPI_Group)
#define REQUEST_T type(MPI_Request)
#else
#define COMM_T integer
#define GROUP_T integer
#define REQUEST_T integer
#endif

module results
  implicit none
  integer :: passed = 0, failed = 0
  integer(8) :: digest = 7
contains
  subroutine check(ok, what, name)
    logical, intent(in) :: ok
    character(*), intent(in) :: what, name
    if (ok) then
      passed = passed + 1
    else
      failed = failed + 1
      print '(a,a,a,a)', 'FAILED: ', what, ' on ', name
    end if
  end subroutine check

  ! Folds a result into rank 0's digest.
  subroutine fold(v, n)
    integer, intent(in) :: n
    integer, intent(in) :: v(n)
    integer :: i
    do i = 1, n
      digest = mod(digest * 31_8 + int(v(i), 8) + 1_8, 2147483629_8)
    end do
  end subroutine fold

  ! What world rank w contributes at index i.
  integer function val(w, i)
    integer, intent(in) :: w, i
    val = mod(w * 131 + i * 7, 100003)
  end function val
end module results

program preload_comms_f
#if defined(F08)
  use mpi_f08
  use results
  implicit none
#elif defined(MPIFH)
  use results
  implicit none
  include 'mpif.h'
#else
  use mpi
  use results
  implicit none
#endif
  integer :: ierr, rank, nranks, half, dims(2), total(2)
  logical :: periods(2), keep(2)
  COMM_T :: c, cart
  GROUP_T :: wgroup, hgroup

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  call MPI_COMM_GROUP(MPI_COMM_WORLD, wgroup, ierr)

  call on(MPI_COMM_WORLD, 'world')
  call MPI_COMM_DUP(MPI_COMM_WORLD, c, ierr)
  call on(c, 'duplicate')
  call MPI_COMM_FREE(c, ierr)
  call MPI_COMM_DUP_WITH_INFO(MPI_COMM_WORLD, MPI_INFO_NULL, c, ierr)
  call on(c, 'duplicate with info')
  call MPI_COMM_FREE(c, ierr)
  call MPI_COMM_CREATE(MPI_COMM_WORLD, wgroup, c, ierr)
  call on(c, 'world''s group')
  call MPI_COMM_FREE(c, ierr)
  call MPI_COMM_SPLIT_TYPE(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, c, ierr)
  call on(c, 'node')
  call MPI_COMM_FREE(c, ierr)
  call MPI_COMM_SPLIT(MPI_COMM_WORLD, mod(rank, 2), rank, c, ierr)
  call on(c, 'parity')
  call MPI_COMM_FREE(c, ierr)
  call MPI_COMM_SPLIT(MPI_COMM_WORLD, 0, -rank, c, ierr)
  call on(c, 'reversed')
  call MPI_COMM_FREE(c, ierr)
  half = nranks / 2
  if (rank < half) then
    call MPI_GROUP_RANGE_INCL(wgroup, 1, reshape([0, half - 1, 1], [3, 1]), hgroup, ierr)
  else
    call MPI_GROUP_RANGE_INCL(wgroup, 1, reshape([half, nranks - 1, 1], [3, 1]), hgroup, ierr)
  end if
  call MPI_COMM_CREATE_GROUP(MPI_COMM_WORLD, hgroup, 7, c, ierr)
  call on(c, 'half')
  call MPI_COMM_FREE(c, ierr)
  call MPI_GROUP_FREE(hgroup, ierr)
  dims = 0
  call MPI_DIMS_CREATE(nranks, 2, dims, ierr)
  periods = .false.
  call MPI_CART_CREATE(MPI_COMM_WORLD, 2, dims, periods, .false., cart, ierr)
  keep = [.false., .true.]
  call MPI_CART_SUB(cart, keep, c, ierr)
  call on(c, 'grid row')
  call MPI_COMM_FREE(c, ierr)
  call MPI_COMM_FREE(cart, ierr)
  call MPI_GROUP_FREE(wgroup, ierr)

  total = [passed, failed]
  call MPI_ALLREDUCE(MPI_IN_PLACE, total, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    print '(a,i0)', 'digest: ', digest
    print '(i0,a,i0,a)', total(1), ' passed, ', total(2), ' failed'
  end if
  call MPI_FINALIZE(ierr)
  if (total(2) /= 0) stop 1

contains

  ! Every collective on communicator comm, named name.
  subroutine on(comm, name)
    COMM_T, intent(in) :: comm
    character(*), intent(in) :: name
    integer, parameter :: sizes(3) = [1, 7, 1031]
    integer :: r, n, pass, s, count, i, j, root, ierr
    integer, allocatable :: world_of(:), ranks(:), mine(:), out(:), gath(:), want(:)
    double precision, allocatable :: d(:), dwant(:)
    integer, allocatable :: nb_sum(:), nb_bcast(:), nb_red(:), nb_all(:), t_sum(:)
    integer, allocatable :: nb_gat(:), nb_back(:), counts(:), displs(:)
    integer, allocatable :: rs_in(:), rs_out(:), rs_want(:)
    REQUEST_T :: reqs(6), req
    GROUP_T :: g
    logical :: ok, flag

    call MPI_COMM_RANK(comm, r, ierr)
    call MPI_COMM_SIZE(comm, n, ierr)
    allocate (world_of(n), ranks(n))
    ranks = [(i, i = 0, n - 1)]
    call MPI_COMM_GROUP(comm, g, ierr)
    call MPI_GROUP_TRANSLATE_RANKS(g, n, ranks, wgroup, world_of, ierr)
    call MPI_GROUP_FREE(g, ierr)

    do pass = 1, 2
      do s = 1, 3
        count = sizes(s)
        allocate (mine(count), out(count), want(count), gath(count * n), d(count), dwant(count))
        mine = [(val(rank, i), i = 1, count)]

        ! Allreduce, INTEGER sum.
        want = 0
        do j = 1, n
          want = want + [(val(world_of(j), i), i = 1, count)]
        end do
        call MPI_ALLREDUCE(mine, out, count, MPI_INTEGER, MPI_SUM, comm, ierr)
        call check(ierr == MPI_SUCCESS .and. all(out == want), 'MPI_ALLREDUCE INTEGER SUM', name)
        call fold(out, count)

        ! Allreduce, DOUBLE PRECISION max in place.
        d = [(dble(val(rank, i * 3)), i = 1, count)]
        dwant = -1
        do j = 1, n
          dwant = max(dwant, [(dble(val(world_of(j), i * 3)), i = 1, count)])
        end do
        call MPI_ALLREDUCE(MPI_IN_PLACE, d, count, MPI_DOUBLE_PRECISION, MPI_MAX, comm, ierr)
        call check(ierr == MPI_SUCCESS .and. all(d == dwant), 'MPI_ALLREDUCE DOUBLE PRECISION MAX in place', name)

        do root = 0, n - 1
          ! Reduce to every root (in place at the root on the second pass).
          out = -1
          if (pass == 2 .and. r == root) then
            out = mine
            call MPI_REDUCE(MPI_IN_PLACE, out, count, MPI_INTEGER, MPI_SUM, root, comm, ierr)
          else
            call MPI_REDUCE(mine, out, count, MPI_INTEGER, MPI_SUM, root, comm, ierr)
          end if
          if (r == root) then
            call check(ierr == MPI_SUCCESS .and. all(out == want), 'MPI_REDUCE INTEGER SUM', name)
            call fold(out, count)
          else
            call check(ierr == MPI_SUCCESS, 'MPI_REDUCE', name)
          end if

          ! Broadcast from every root.
          if (r == root) then
            out = mine
          else
            out = -1
          end if
          call MPI_BCAST(out, count, MPI_INTEGER, root, comm, ierr)
          call check(ierr == MPI_SUCCESS .and. all(out == [(val(world_of(root + 1), i), i = 1, count)]), &
                     'MPI_BCAST', name)
          call fold(out, count)
        end do

        ! Allgather.
        gath = -1
        call MPI_ALLGATHER(mine, count, MPI_INTEGER, gath, count, MPI_INTEGER, comm, ierr)
        ok = ierr == MPI_SUCCESS
        do j = 1, n
          ok = ok .and. all(gath((j - 1) * count + 1:j * count) == [(val(world_of(j), i), i = 1, count)])
        end do
        call check(ok, 'MPI_ALLGATHER', name)
        call fold(gath, count * n)

        call MPI_BARRIER(comm, ierr)
        call check(ierr == MPI_SUCCESS, 'MPI_BARRIER', name)

        ! Five nonblocking collectives in flight together.
        allocate (nb_sum(count), nb_bcast(count), nb_red(count), nb_all(count * n), t_sum(count))
        root = mod(pass + s, n)
        if (r == root) then
          nb_bcast = mine
        else
          nb_bcast = -1
        end if
        nb_red = -1
        nb_all = -1
        call MPI_IALLREDUCE(mine, nb_sum, count, MPI_INTEGER, MPI_SUM, comm, reqs(1), ierr)
        call MPI_IBCAST(nb_bcast, count, MPI_INTEGER, root, comm, reqs(2), ierr)
        call MPI_IREDUCE(mine, nb_red, count, MPI_INTEGER, MPI_SUM, root, comm, reqs(3), ierr)
        call MPI_IALLGATHER(mine, count, MPI_INTEGER, nb_all, count, MPI_INTEGER, comm, reqs(4), ierr)
        call MPI_IBARRIER(comm, reqs(5), ierr)
        ! An Igatherv of every rank's block to the root, in flight with the others.
        allocate (nb_gat(count * n), nb_back(count), counts(n), displs(n))
        counts = count
        displs = [((j - 1) * count, j = 1, n)]
        nb_gat = -1
        call MPI_IGATHERV(mine, count, MPI_INTEGER, nb_gat, counts, displs, MPI_INTEGER, root, comm, &
          reqs(6), ierr)
        call MPI_WAITALL(6, reqs, MPI_STATUSES_IGNORE, ierr)
        call check(ierr == MPI_SUCCESS .and. all(nb_sum == want), 'MPI_IALLREDUCE', name)
        call check(all(nb_bcast == [(val(world_of(root + 1), i), i = 1, count)]), 'MPI_IBCAST', name)
        call check(r /= root .or. all(nb_red == want), 'MPI_IREDUCE', name)
        ok = .true.
        do j = 1, n
          ok = ok .and. all(nb_all((j - 1) * count + 1:j * count) == [(val(world_of(j), i), i = 1, count)])
        end do
        call check(ok, 'MPI_IALLGATHER', name)
        call check(r /= root .or. all(nb_gat == nb_all), 'MPI_IGATHERV', name)
        ! And the blocks back with an Iscatterv.
        nb_back = -1
        call MPI_ISCATTERV(nb_gat, counts, displs, MPI_INTEGER, nb_back, count, MPI_INTEGER, root, &
          comm, req, ierr)
        call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        call check(ierr == MPI_SUCCESS .and. all(nb_back == mine), 'MPI_ISCATTERV', name)
        deallocate (nb_gat, nb_back, counts, displs)
        ! Ireduce_scatter_block and Ireduce_scatter of every rank's n blocks (one spare
        ! element past the result, which must stay as it was).
        allocate (rs_in(count * n), rs_out(count + 1), rs_want(count), counts(n))
        rs_in = [(val(rank, i), i = 1, count * n)]
        rs_want = 0
        do j = 1, n
          rs_want = rs_want + [(val(world_of(j), r * count + i), i = 1, count)]
        end do
        rs_out = -1
        call MPI_IREDUCE_SCATTER_BLOCK(rs_in, rs_out, count, MPI_INTEGER, MPI_SUM, comm, req, ierr)
        call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        call check(ierr == MPI_SUCCESS .and. all(rs_out(1:count) == rs_want) .and. rs_out(count + 1) == -1, &
                   'MPI_IREDUCE_SCATTER_BLOCK', name)
        call fold(rs_out, count)
        counts = count
        rs_out = -1
        call MPI_IREDUCE_SCATTER(rs_in, rs_out, counts, MPI_INTEGER, MPI_SUM, comm, req, ierr)
        call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
        call check(ierr == MPI_SUCCESS .and. all(rs_out(1:count) == rs_want) .and. rs_out(count + 1) == -1, &
                   'MPI_IREDUCE_SCATTER', name)
        deallocate (rs_in, rs_out, rs_want, counts)
        call fold(nb_sum, count)
        call fold(nb_all, count * n)

        ! One completed by MPI_TEST.
        call MPI_IALLREDUCE(mine, t_sum, count, MPI_INTEGER, MPI_SUM, comm, req, ierr)
        flag = .false.
        do while (.not. flag)
          call MPI_TEST(req, flag, MPI_STATUS_IGNORE, ierr)
        end do
        call check(ierr == MPI_SUCCESS .and. all(t_sum == want), 'MPI_IALLREDUCE completed by MPI_TEST', name)

        deallocate (mine, out, want, gath, d, dwant, nb_sum, nb_bcast, nb_red, nb_all, t_sum)
      end do
    end do
  end subroutine on
end program preload_comms_f
