// The MLflow client prints links into MLflow's own web UI, whatever the tracking server
// ("View run at <server>/#/experiments/14/runs/<run_id>"). The fragment never reaches the server,
// so every page reads it here and replaces itself with the portal's page for that run (or
// experiment); that page answers an id the user may not see as it always does (404). Logged out,
// the page sends the user to log in with it as `next`, so they land on the run after logging in.
// The script tag carries the two pages' URLs (data-run-url, data-experiment-url).
(function () {
  "use strict";
  const urls = document.currentScript.dataset;
  // #/experiments/<id>[/runs/<run_id>], then perhaps more of MLflow's route (/artifacts/..., ?query).
  const FRAGMENT = /^#\/experiments\/([^/?#]+)(?:\/runs\/([^/?#]+))?(?:[/?].*)?$/;
  function follow() {
    const found = FRAGMENT.exec(window.location.hash);
    if (!found) return;
    const [, experiment, run] = found;
    window.location.replace(run ? `${urls.runUrl}?runs=${encodeURIComponent(run)}`
                                : `${urls.experimentUrl}?experiment=${encodeURIComponent(experiment)}`);
  }
  follow();
  window.addEventListener("hashchange", follow);  // a link pasted while already on the page
})();
