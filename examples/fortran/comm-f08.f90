! comm-f08: communicators freed where topo-run's PMPI library does not see it: through the
! Fortran 2008 bindings' profiling names (`use mpi_f08`, PMPI_Comm_free, which call MPI's
! own entry directly), while their collectives go through `use mpi` (which the library
! serves). Each round duplicates MPI_COMM_WORLD (a context of topo-run's), frees the
! duplicate with PMPI_Comm_free, then splits world in reversed order (not congruent to
! world), whose handle MPI may give the freed one's, and broadcasts from its rank 0
! (world's last rank). A context kept under the old handle would broadcast world rank 0's
! value instead. Last line: "N passed, M failed". MPI is finalized through mpi_f08's
! PMPI_Finalize too, which reaches MPI's finalize without passing through the library: its
! teardown (statistics included) must still run.
!
!   mpif90 -o comm-f08 comm-f08.f90
module f08_free
contains
  ! Frees the communicator of Fortran handle h through mpi_f08's PMPI_Comm_free.
  subroutine free_f08(h)
    use mpi_f08
    integer, intent(inout) :: h
    type(MPI_Comm) :: c
    c%MPI_VAL = h
    call PMPI_Comm_free(c)
    h = c%MPI_VAL
  end subroutine free_f08

  ! Finalizes MPI through mpi_f08's PMPI_Finalize.
  subroutine finalize_f08()
    use mpi_f08
    call PMPI_Finalize()
  end subroutine finalize_f08
end module f08_free

program comm_f08
  use mpi
  use f08_free
  implicit none
  integer :: ierr, rank, size, dup, rev, i, v, bad, passed, failed
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  passed = 0
  failed = 0
  do i = 1, 20
    bad = 0
    call MPI_COMM_DUP(MPI_COMM_WORLD, dup, ierr)
    v = rank
    call MPI_BCAST(v, 1, MPI_INTEGER, 0, dup, ierr)
    if (v /= 0) bad = bad + 1
    call free_f08(dup)
    call MPI_COMM_SPLIT(MPI_COMM_WORLD, 0, size - rank, rev, ierr)
    v = 100 + rank
    call MPI_BCAST(v, 1, MPI_INTEGER, 0, rev, ierr)
    if (v /= 100 + size - 1) bad = bad + 1
    v = rank
    call MPI_ALLREDUCE(MPI_IN_PLACE, v, 1, MPI_INTEGER, MPI_MAX, rev, ierr)
    if (v /= size - 1) bad = bad + 1
    call MPI_COMM_FREE(rev, ierr)
    call MPI_ALLREDUCE(MPI_IN_PLACE, bad, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (bad == 0) then
      passed = passed + 1
    else
      failed = failed + 1
    end if
  end do
  if (rank == 0) print '(i0,a,i0,a)', passed, ' passed, ', failed, ' failed'
  call finalize_f08()
end program comm_f08
