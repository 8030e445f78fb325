#!/usr/bin/env bash
# Stops the portal's processes and the local cluster; state stays on disk for the next `make up`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# The hub and proxy stop; notebook servers are Slurm jobs and end with the cluster below. Without
# its account (a purged machine) no hub runs.
if getent passwd "$HUB_USER" >/dev/null; then "$ROOT/spawners/hub.sh" stop; fi
for name in apps-gateway celery-beat celery-worker gunicorn; do
  pidfile="$RUN/$name.pid"
  [[ -f "$pidfile" ]] || continue
  pid=$(cat "$pidfile")
  # Each was started with setsid: end its whole process group (gunicorn and celery fork workers).
  kill -TERM -- "-$pid" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null && [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]] || break
    sleep 0.2
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$pidfile"
done
# The local image registry (scripts/containers/setup.sh); its data and image stay.
[[ -x "$ROOT/scripts/containers/setup.sh" ]] && "$ROOT/scripts/containers/setup.sh" stop
"$ROOT/slurm/dev/down.sh"
