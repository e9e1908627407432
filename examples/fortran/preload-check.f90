! preload-check (Fortran): MPI_ALLREDUCE, MPI_REDUCE, MPI_BCAST, MPI_BARRIER, MPI_GATHER,
! MPI_SCATTER, MPI_SCAN, MPI_EXSCAN, MPI_REDUCE_SCATTER_BLOCK, MPI_ALLTOALL,
! MPI_ALLTOALLV, MPI_ALLGATHERV, MPI_GATHERV and MPI_SCATTERV from an
! unmodified Fortran program (`use mpi`), checked against references computed locally:
! INTEGER and DOUBLE PRECISION, sums, maxima and logical AND, MPI_IN_PLACE, every root,
! Gather and Scatter to and from every root (in place at the root too),
! MPI_COMM_WORLD and a duplicate of it, a split in reversed order (handed to MPI), and a
! broadcast with a strided vector type at the root and INTEGER elsewhere.
! Rank 0 prints "N passed, M failed" last; the exit status is 1 on any failure.
!
!   mpif90 -O2 -o preload-check-f preload-check.f90
!   srun --mpi=pmix topo-run -- ./preload-check-f
program preload_check
  use mpi
  implicit none
  integer, parameter :: n = 1031
  integer :: ierr, rank, nranks, i, r, root, comm, rev, passed, failed, k, vec, off
  integer :: ia(n), ib(n), ig(n), iwant(n), iscan(n), iswant(n)
  double precision :: da(n), db(n), dwant(n)
  logical :: la(n), lb(n), ok
  integer :: comms(2)
  integer, allocatable :: iall(:), rsin(:), scounts(:), sdispls(:), rcounts(:), rdispls(:)
  integer :: rsout(4)

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  passed = 0
  failed = 0
  call MPI_COMM_DUP(MPI_COMM_WORLD, comms(2), ierr)
  comms(1) = MPI_COMM_WORLD

  do k = 1, 2
    comm = comms(k)
    ! Integer sum, out of place.
    do i = 1, n
      ia(i) = mod(rank * 3 + i, 5)
      iwant(i) = 0
      do r = 0, nranks - 1
        iwant(i) = iwant(i) + mod(r * 3 + i, 5)
      end do
    end do
    call MPI_ALLREDUCE(ia, ib, n, MPI_INTEGER, MPI_SUM, comm, ierr)
    call check(ierr == MPI_SUCCESS .and. all(ib == iwant), 'MPI_ALLREDUCE INTEGER SUM')

    ! Double precision max, in place.
    do i = 1, n
      da(i) = dble(mod(rank * 7 + i * 13, 100))
      dwant(i) = 0
      do r = 0, nranks - 1
        dwant(i) = max(dwant(i), dble(mod(r * 7 + i * 13, 100)))
      end do
    end do
    call MPI_ALLREDUCE(MPI_IN_PLACE, da, n, MPI_DOUBLE_PRECISION, MPI_MAX, comm, ierr)
    call check(ierr == MPI_SUCCESS .and. all(da == dwant), 'MPI_ALLREDUCE DOUBLE PRECISION MAX in place')

    ! Integer sum Scan (out of place) and Exscan (in place; rank 0's result undefined).
    do i = 1, n
      iswant(i) = 0
      do r = 0, rank - 1
        iswant(i) = iswant(i) + mod(r * 3 + i, 5)
      end do
    end do
    call MPI_SCAN(ia, iscan, n, MPI_INTEGER, MPI_SUM, comm, ierr)
    call check(ierr == MPI_SUCCESS .and. all(iscan == iswant + ia), 'MPI_SCAN INTEGER SUM')
    iscan = ia
    call MPI_EXSCAN(MPI_IN_PLACE, iscan, n, MPI_INTEGER, MPI_SUM, comm, ierr)
    call check(ierr == MPI_SUCCESS .and. (rank == 0 .or. all(iscan == iswant)), &
      'MPI_EXSCAN INTEGER SUM in place')

    ! Reduce_scatter_block of integer sums: every rank's 4 x nranks elements, 4 each back.
    allocate(rsin(4 * nranks))
    do i = 1, 4 * nranks
      rsin(i) = mod(rank * 3 + i, 5)
    end do
    call MPI_REDUCE_SCATTER_BLOCK(rsin, rsout, 4, MPI_INTEGER, MPI_SUM, comm, ierr)
    ok = ierr == MPI_SUCCESS
    do i = 1, 4
      ok = ok .and. rsout(i) == sum([(mod(r * 3 + rank * 4 + i, 5), r = 0, nranks - 1)])
    end do
    call check(ok, 'MPI_REDUCE_SCATTER_BLOCK INTEGER SUM')
    deallocate(rsin)

    ! Alltoall of 3 integers per block: rank s's block for rank d holds s*1000 + d*10 + i;
    ! out of place, then in place.
    allocate(rsin(3 * nranks), iall(3 * nranks))
    do r = 0, nranks - 1
      do i = 1, 3
        rsin(r * 3 + i) = rank * 1000 + r * 10 + i
      end do
    end do
    call MPI_ALLTOALL(rsin, 3, MPI_INTEGER, iall, 3, MPI_INTEGER, comm, ierr)
    ok = ierr == MPI_SUCCESS
    do r = 0, nranks - 1
      do i = 1, 3
        ok = ok .and. iall(r * 3 + i) == r * 1000 + rank * 10 + i
      end do
    end do
    call MPI_ALLTOALL(MPI_IN_PLACE, 0, MPI_INTEGER, rsin, 3, MPI_INTEGER, comm, ierr)
    ok = ok .and. ierr == MPI_SUCCESS .and. all(rsin == iall)
    call check(ok, 'MPI_ALLTOALL INTEGER, in place and not')

    ! Alltoallv: rank s sends rank d mod(s + d, 3) integers (none for some pairs), received
    ! in reversed rank order.
    allocate(scounts(nranks), sdispls(nranks), rcounts(nranks), rdispls(nranks))
    off = 0
    do r = 0, nranks - 1
      scounts(r + 1) = mod(rank + r, 3)
      sdispls(r + 1) = 3 * r
      do i = 1, scounts(r + 1)
        rsin(3 * r + i) = rank * 1000 + r * 10 + i
      end do
    end do
    do r = nranks - 1, 0, -1
      rcounts(r + 1) = mod(r + rank, 3)
      rdispls(r + 1) = off
      off = off + rcounts(r + 1)
    end do
    iall = -1
    call MPI_ALLTOALLV(rsin, scounts, sdispls, MPI_INTEGER, iall, rcounts, rdispls, &
      MPI_INTEGER, comm, ierr)
    ok = ierr == MPI_SUCCESS
    do r = 0, nranks - 1
      do i = 1, rcounts(r + 1)
        ok = ok .and. iall(rdispls(r + 1) + i) == r * 1000 + rank * 10 + i
      end do
    end do
    call check(ok, 'MPI_ALLTOALLV INTEGER')

    ! Allgatherv: rank r contributes mod(r, 3) integers (none for some), received in
    ! reversed rank order.
    off = 0
    do r = nranks - 1, 0, -1
      rcounts(r + 1) = mod(r, 3)
      rdispls(r + 1) = off
      off = off + rcounts(r + 1)
    end do
    do i = 1, mod(rank, 3)
      rsin(i) = rank * 100 + i
    end do
    iall = -1
    call MPI_ALLGATHERV(rsin, mod(rank, 3), MPI_INTEGER, iall, rcounts, rdispls, MPI_INTEGER, &
      comm, ierr)
    ok = ierr == MPI_SUCCESS
    do r = 0, nranks - 1
      do i = 1, rcounts(r + 1)
        ok = ok .and. iall(rdispls(r + 1) + i) == r * 100 + i
      end do
    end do
    call check(ok, 'MPI_ALLGATHERV INTEGER')

    ! Gatherv and Scatterv of the same blocks at the last rank.
    root = nranks - 1
    iall = -1
    call MPI_GATHERV(rsin, mod(rank, 3), MPI_INTEGER, iall, rcounts, rdispls, MPI_INTEGER, &
      root, comm, ierr)
    ok = ierr == MPI_SUCCESS
    if (rank == root) then
      do r = 0, nranks - 1
        do i = 1, rcounts(r + 1)
          ok = ok .and. iall(rdispls(r + 1) + i) == r * 100 + i
        end do
      end do
    end if
    call check(ok, 'MPI_GATHERV INTEGER')
    rsout = -1
    call MPI_SCATTERV(iall, rcounts, rdispls, MPI_INTEGER, rsout, mod(rank, 3), MPI_INTEGER, &
      root, comm, ierr)
    ok = ierr == MPI_SUCCESS
    do i = 1, mod(rank, 3)
      ok = ok .and. rsout(i) == rank * 100 + i
    end do
    call check(ok, 'MPI_SCATTERV INTEGER')
    deallocate(rsin, iall, scounts, sdispls, rcounts, rdispls)

    ! Logical AND.
    do i = 1, n
      la(i) = mod(i, 3) /= mod(rank, 3) .or. mod(i, 2) == 0
    end do
    call MPI_ALLREDUCE(la, lb, n, MPI_LOGICAL, MPI_LAND, comm, ierr)
    ok = .true.
    do i = 1, n
      ok = ok .and. (lb(i) .eqv. all([(mod(i, 3) /= mod(r, 3) .or. mod(i, 2) == 0, r = 0, nranks - 1)]))
    end do
    call check(ierr == MPI_SUCCESS .and. ok, 'MPI_ALLREDUCE LOGICAL LAND')

    do root = 0, nranks - 1
      ! Broadcast from every root.
      do i = 1, n
        if (rank == root) then
          db(i) = dble(root * 1000 + i)
        else
          db(i) = -1
        end if
      end do
      call MPI_BCAST(db, n, MPI_DOUBLE_PRECISION, root, comm, ierr)
      call check(ierr == MPI_SUCCESS .and. all(db == [(dble(root * 1000 + i), i = 1, n)]), 'MPI_BCAST')

      ! Reduce to every root, in place at the root.
      ib = ia
      if (rank == root) then
        call MPI_REDUCE(MPI_IN_PLACE, ib, n, MPI_INTEGER, MPI_SUM, root, comm, ierr)
        call check(ierr == MPI_SUCCESS .and. all(ib == iwant), 'MPI_REDUCE INTEGER SUM in place')
      else
        call MPI_REDUCE(ia, ib, n, MPI_INTEGER, MPI_SUM, root, comm, ierr)
        call check(ierr == MPI_SUCCESS, 'MPI_REDUCE INTEGER SUM')
      end if
    end do
    call MPI_BARRIER(comm, ierr)
    call check(ierr == MPI_SUCCESS, 'MPI_BARRIER')

    ! Gather to every root and Scatter back, in place at the root too.
    allocate(iall(n * nranks))
    do root = 0, nranks - 1
      ig = [(rank * 10000 + i + root, i = 1, n)]
      iall = -1
      call MPI_GATHER(ig, n, MPI_INTEGER, iall, n, MPI_INTEGER, root, comm, ierr)
      ok = .true.
      if (rank == root) then
        do r = 0, nranks - 1
          ok = ok .and. all(iall(r * n + 1:(r + 1) * n) == [(r * 10000 + i + root, i = 1, n)])
        end do
      end if
      call check(ierr == MPI_SUCCESS .and. ok, 'MPI_GATHER INTEGER')
      ib = -1
      call MPI_SCATTER(iall, n, MPI_INTEGER, ib, n, MPI_INTEGER, root, comm, ierr)
      call check(ierr == MPI_SUCCESS .and. all(ib == ig), 'MPI_SCATTER INTEGER')
      if (rank == root) then
        iall = -2
        iall(rank * n + 1:(rank + 1) * n) = ig
        call MPI_GATHER(MPI_IN_PLACE, n, MPI_INTEGER, iall, n, MPI_INTEGER, root, comm, ierr)
        ok = .true.
        do r = 0, nranks - 1
          ok = ok .and. all(iall(r * n + 1:(r + 1) * n) == [(r * 10000 + i + root, i = 1, n)])
        end do
        call check(ierr == MPI_SUCCESS .and. ok, 'MPI_GATHER INTEGER in place')
        call MPI_SCATTER(iall, n, MPI_INTEGER, MPI_IN_PLACE, n, MPI_INTEGER, root, comm, ierr)
        call check(ierr == MPI_SUCCESS .and. all(iall(rank * n + 1:(rank + 1) * n) == ig), &
          'MPI_SCATTER INTEGER in place')
      else
        call MPI_GATHER(ig, n, MPI_INTEGER, iall, n, MPI_INTEGER, root, comm, ierr)
        call check(ierr == MPI_SUCCESS, 'MPI_GATHER INTEGER in place (not the root)')
        ib = -1
        call MPI_SCATTER(iall, n, MPI_INTEGER, ib, n, MPI_INTEGER, root, comm, ierr)
        call check(ierr == MPI_SUCCESS .and. all(ib == ig), 'MPI_SCATTER INTEGER in place (not the root)')
      end if
    end do
    deallocate(iall)
  end do

  ! A communicator in reversed order: MPI's own path, same results.
  call MPI_COMM_SPLIT(MPI_COMM_WORLD, 0, nranks - rank, rev, ierr)
  call MPI_ALLREDUCE(ia, ib, n, MPI_INTEGER, MPI_SUM, rev, ierr)
  call check(ierr == MPI_SUCCESS .and. all(ib == iwant), 'MPI_ALLREDUCE on a reversed split')
  call MPI_COMM_FREE(rev, ierr)

  ! A strided vector (every third integer) at the root, as many contiguous integers on the
  ! other ranks: the same type signature, so one broadcast (topo-run packs the vector).
  call MPI_TYPE_VECTOR(n / 3, 1, 3, MPI_INTEGER, vec, ierr)
  call MPI_TYPE_COMMIT(vec, ierr)
  do i = 1, n
    if (rank == 0) then
      ia(i) = i
    else
      ia(i) = -1
    end if
  end do
  if (rank == 0) then
    call MPI_BCAST(ia, 1, vec, 0, MPI_COMM_WORLD, ierr)
    ok = all(ia == [(i, i = 1, n)])
  else
    call MPI_BCAST(ia, n / 3, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
    ok = all(ia(1:n / 3) == [(3 * i - 2, i = 1, n / 3)]) .and. all(ia(n / 3 + 1:) == -1)
  end if
  call check(ierr == MPI_SUCCESS .and. ok, 'MPI_BCAST strided vector at the root, INTEGER elsewhere')
  call MPI_TYPE_FREE(vec, ierr)
  call MPI_COMM_FREE(comms(2), ierr)

  if (rank == 0) print '(I0, " passed, ", I0, " failed")', passed, failed
  call MPI_FINALIZE(ierr)
  if (failed > 0) stop 1

contains

  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    logical :: all_ok
    integer :: e
    ! PMPI_ALLREDUCE: the check itself never takes topo-run's path.
    call PMPI_ALLREDUCE(cond, all_ok, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD, e)
    if (all_ok) then
      passed = passed + 1
    else
      failed = failed + 1
      if (rank == 0) print '("FAIL ", A)', what
    end if
  end subroutine check
end program preload_check
