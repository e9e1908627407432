! internal-error: with MPI_ERRORS_RETURN on MPI_COMM_WORLD, calls MPI_BCAST, MPI_REDUCE,
! MPI_ALLREDUCE and MPI_BARRIER. A call that returns an error is reported ("rank R:
! MPI_X returned error class C") and the job is aborted with MPI_ABORT (code 3), as an
! application that checks its error codes does. The end-to-end tests make one rank's call
! fail inside topo-run's PMPI library (TOPO_RUN_FAULT=panic:MPI_X): the error must reach the
! program, and the call must not be run a second time through MPI.
!
!   mpif90 -o internal-error internal-error.f90
program internal_error
  use mpi
  implicit none
  integer :: ierr, rank, size, cls, v(4), s(4)
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  v = rank + 1
  call MPI_BCAST(v, 4, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call check('MPI_BCAST')
  v = rank + 1
  call MPI_REDUCE(v, s, 4, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  call check('MPI_REDUCE')
  call MPI_ALLREDUCE(v, s, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check('MPI_ALLREDUCE')
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call check('MPI_BARRIER')
  if (rank == 0) print '(a)', 'no call returned an error'
  call MPI_FINALIZE(ierr)
contains
  subroutine check(what)
    character(*), intent(in) :: what
    integer :: e
    if (ierr /= MPI_SUCCESS) then
      call MPI_ERROR_CLASS(ierr, cls, e)
      print '(a,i0,a,a,a,i0)', 'rank ', rank, ': ', what, ' returned error class ', cls
      flush(6)
      call MPI_ABORT(MPI_COMM_WORLD, 3, e)
    end if
  end subroutine check
end program internal_error
