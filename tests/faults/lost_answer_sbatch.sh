#!/bin/sh
# An exec prefix for fault tests: sbatch submits the job for real, and the portal gets another
# answer than the job id, as LOST_ANSWER says: "timeout" (what sbatch prints when slurmctld took the
# job and its answer was lost) or "garbage" (exit 0 with something that is no job id). Other
# commands run as usual.
case "$*" in
  *sbatch*)
    "$@" >/dev/null || exit
    if [ "$LOST_ANSWER" = garbage ]; then
      echo "Submitted batch job (id withheld)"
      exit 0
    fi
    echo "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation" >&2
    exit 1 ;;
esac
exec "$@"
