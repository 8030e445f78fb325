// A page part that refreshes itself: an element with an id, data-live-url (the same part alone, from
// the portal's database) and data-live="true" is asked for again every data-interval ms and swapped
// in when it changed, its charts rendered anew; it stops once the part it gets says data-live="false".
// Each ask carries the ETag of the last answer: a part that did not change is a bodiless 304.
(function () {
  "use strict";
  if (window.portalLive) return;  // a page whose parts each load it follows each part once
  window.portalLive = true;
  function follow(box) {
    const interval = Number(box.dataset.interval || 10000);
    let seen = window.portalBare(box.innerHTML);
    let etag = null;
    async function poll() {
      try {
        // no-store: the 304 comes to this script instead of the browser's cache answering for it.
        const headers = etag ? {"If-None-Match": etag} : {};
        const response = await fetch(box.dataset.liveUrl, {credentials: "same-origin", cache: "no-store", headers});
        if (response.ok) {
          etag = response.headers.get("ETag");
          const html = await response.text();
          const next = new DOMParser().parseFromString(html, "text/html").getElementById(box.id);
          if (next && (window.portalBare(next.innerHTML) !== seen || next.dataset.live !== box.dataset.live)) {
            seen = window.portalBare(next.innerHTML);
            window.portalAnnounce(box, next);
            box.replaceWith(next);
            box = next;
            if (window.portalCharts) window.portalCharts.render(box);  // pages with charts load charts.js
          }
        }
      } catch (error) {
        // The network blinked: the next round tries again.
      }
      if (box.dataset.live === "true") window.setTimeout(poll, interval);
    }
    window.setTimeout(poll, interval);
  }
  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("[data-live-url][data-live='true']").forEach(follow);
  });
})();
