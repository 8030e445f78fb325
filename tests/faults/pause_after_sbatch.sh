#!/bin/sh
# An exec prefix for fault tests: runs the command, and after an sbatch holds its answer back for a
# while, so a test can kill the worker between Slurm accepting the job and the portal recording it.
"$@"
rc=$?
case "$*" in
  *sbatch*) echo $$ >"$PAUSE_MARKER"; sleep 30 ;;
esac
exit $rc
