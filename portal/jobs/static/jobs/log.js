// Live tail of a job's stdout/stderr through the log API, plus its state; stops once the job ended
// and both files are read to the end. No page reloads.
(function () {
  const box = document.getElementById("log");
  if (!box) return;
  const job = box.dataset.job;
  const offsets = { stdout: 0, stderr: 0 };
  const complete = { stdout: false, stderr: false };
  const status = document.getElementById("log-status");
  const stateBox = document.getElementById("job-state");

  async function readStream(stream) {
    const response = await fetch(`/api/v1/jobs/${job}/log/?stream=${stream}&offset=${offsets[stream]}`,
                                 { credentials: "same-origin" });
    if (response.status === 429) {  // the portal's per-user rate limit: wait as told, then read on
      const seconds = Number(response.headers.get("Retry-After")) || 5;
      status.textContent = `Reading again in ${seconds} s (too many reads at once).`;
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
      return true;
    }
    if (!response.ok) { status.textContent = `${stream}: ${(await response.json()).detail}`; complete[stream] = true; return; }
    const chunk = await response.json();
    if (chunk.text) document.getElementById(stream).append(chunk.text);
    offsets[stream] = chunk.next_offset;
    complete[stream] = chunk.complete;
    return chunk.next_offset < chunk.size;  // more to read right away
  }

  async function refreshState() {
    const response = await fetch(`/api/v1/jobs/${job}/`, { credentials: "same-origin" });
    if (!response.ok) return;
    const body = await response.json();
    const badge = stateBox.querySelector(".badge");
    if (badge.dataset.state !== body.state) {
      badge.dataset.state = body.state;
      badge.textContent = body.state.replaceAll("_", " ").toLowerCase();
      document.getElementById("live-status").textContent = `Job state: ${badge.textContent}`;  // base.html
      badge.className = "badge " + (body.state === "COMPLETED" ? "ok" : ["RUNNING", "PENDING", "QUEUED_IN_PORTAL"].includes(body.state) ? "warn" : "bad");
      document.getElementById("job-reason").textContent = body.reason || "—";
      document.getElementById("slurm-id").textContent = body.slurm_job_id || "—";
      if (body.exit_code !== null) document.getElementById("exit-code").textContent = body.exit_code;
      const cancel = document.getElementById("cancel-button");
      if (cancel && !["RUNNING", "PENDING", "QUEUED_IN_PORTAL", "SUSPENDED"].includes(body.state)) cancel.remove();
    }
  }

  async function tick() {
    try {
      let more = true;
      while (more) more = (await readStream("stdout")) || (await readStream("stderr"));
      await refreshState();
      status.textContent = complete.stdout && complete.stderr ? "The job has ended; output complete." :
        `Following the output (updated ${new Date().toLocaleTimeString()}).`;
    } catch (error) {
      status.textContent = `Could not refresh: ${error}`;
    }
    if (!(complete.stdout && complete.stderr)) setTimeout(tick, 2000);
  }
  tick();
})();
