// A running job's GPU card without reloads: every 10 s ask for it again (gpus:job-card, from the
// portal's database) and swap it in when it changed, charts rendered anew; stops once the job ended.
(function () {
  "use strict";
  const INTERVAL = 10000;
  let box = document.getElementById("gpus-live");
  if (!box) return;
  let seen = box.innerHTML;

  async function poll() {
    try {
      const response = await fetch(box.dataset.url, {credentials: "same-origin"});
      if (response.ok) {
        const html = await response.text();
        const next = new DOMParser().parseFromString(html, "text/html").getElementById("gpus-live");
        if (next && next.innerHTML !== seen) {
          seen = next.innerHTML;
          box.replaceWith(next);
          box = next;
          window.portalCharts.render(box);
        }
      }
    } catch (error) {
      // The network blinked: the next round tries again.
    }
    if (box.dataset.live === "true") window.setTimeout(poll, INTERVAL);
  }
  window.setTimeout(poll, INTERVAL);
})();
