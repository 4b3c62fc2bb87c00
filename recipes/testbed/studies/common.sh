# Shared set-up of the testbed's study scripts (sourced from the repository root, not run): one thread a job (two
# jobs share the two cores), and wait_all, which waits for each background job by its id so that a failed job
# stops the script (a bare `wait` returns 0).
export OMP_NUM_THREADS=1
PIDS=()
wait_all() { for PID in "${PIDS[@]}"; do wait "$PID"; done; PIDS=(); }
