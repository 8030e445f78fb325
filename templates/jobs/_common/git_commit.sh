# gpuportal_git_commit <script>: tag the job's MLflow run (MLFLOW_RUN_ID, which the portal made) with
# the commit of the git repository holding <script>, as MLflow's mlflow.source.git.commit. Found here,
# as the job's user (the portal never reads users' files), and set with the job's own tracking token
# through the MLflow REST API. Never fails the job and gives up after 3 s.
gpuportal_git_commit() {
  [[ -n ${MLFLOW_RUN_ID:-} && -n ${MLFLOW_TRACKING_TOKEN:-} && -n ${MLFLOW_TRACKING_URI:-} ]] || return 0
  local commit
  commit=$(git -C "$(dirname -- "$1")" rev-parse HEAD 2>/dev/null) || return 0
  [[ $commit =~ ^[0-9a-f]{40,64}$ && $MLFLOW_RUN_ID =~ ^[0-9a-f]{32}$ ]] || return 0
  curl -q -s -o /dev/null -m 3 -H 'Content-Type: application/json' -K - \
    --data-binary "{\"run_id\":\"$MLFLOW_RUN_ID\",\"key\":\"mlflow.source.git.commit\",\"value\":\"$commit\"}" \
    "${MLFLOW_TRACKING_URI%/}/api/2.0/mlflow/runs/set-tag" \
    <<<"header = \"Authorization: Bearer $MLFLOW_TRACKING_TOKEN\"" || true
}
