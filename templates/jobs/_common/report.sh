# gpuportal_report '<json body>': tell the portal about a transition of this job, e.g.
#   gpuportal_report '{"event":"ready"}'
#   gpuportal_report "{\"event\":\"started\",\"node\":\"$(hostname)\"}"
# Plain bash, no template syntax: job scripts and the notebook session's batch script include this
# file verbatim. The job's own token (GPUPORTAL_REPORT_TOKEN, valid for this job alone) and the
# portal's address (GPUPORTAL_URL) come in the environment sbatch was given; without either, this
# does nothing. The token never reaches a command line: curl reads its header from stdin. Never
# fails the job: a portal that did not answer within 3 s is asked once more (reports are idempotent;
# a busy portal must not lose a job's exit), then it gives up, 7 s at most: the portal's poll cycle
# catches whatever a report missed.
gpuportal_report() {
  [[ -n ${GPUPORTAL_REPORT_TOKEN:-} && -n ${GPUPORTAL_URL:-} ]] || return 0
  # -q first: no ~/.curlrc (one with --verbose would print the header to the job's log).
  curl -q -s -o /dev/null -m 3 --retry 1 --retry-delay 1 -H 'Content-Type: application/json' \
    --data-binary "${1:-}" \
    -K - "${GPUPORTAL_URL%/}/api/v1/reports/" \
    <<<"header = \"Authorization: Report $GPUPORTAL_REPORT_TOKEN\"" || true
}
