// The servers page without reloads: while a card is on its way (queued, starting, stopping), fetch
// the cards every 2 s and swap them in, and every 5 s while a running session shows its GPUs (their
// figures and sparkline, gpus/_session_gpus.html); a profile button fills the form with its values.
(function () {
  "use strict";
  const root = document.getElementById("servers");
  const INTERVAL = 2000;
  const GPU_EVERY = 5000;
  // The HTML each part last came with: rendered charts change the page's own, so compare with this.
  const seen = {};
  for (const id of ["active-cards", "recent-sessions"]) {
    const part = document.getElementById(id);
    if (part) seen[id] = window.portalBare(part.innerHTML);
  }
  let lastFetch = 0;

  function swap(html) {
    const fresh = new DOMParser().parseFromString(html, "text/html");
    for (const id of ["active-cards", "recent-sessions"]) {
      const current = document.getElementById(id);
      const next = fresh.getElementById(id);
      if (!current || !next) continue;
      if (id === "recent-sessions" && current.open) next.open = true;
      if (seen[id] !== window.portalBare(next.innerHTML)) {
        seen[id] = window.portalBare(next.innerHTML);
        window.portalAnnounce(current, next);
        current.replaceWith(next);
        if (window.portalCharts) window.portalCharts.render(next);
      }
    }
  }

  function moving() {
    const cards = document.getElementById("active-cards");
    return cards && cards.dataset.moving === "true";
  }

  function gpusLive() {
    return document.querySelector('#active-cards [data-gpu-live="true"]') !== null;
  }

  // An idle-GPU warning that appears on a card (gpus/_idle_warning.html) is also a browser
  // notification, once the user allowed them; those shown with the page are no news.
  const warned = new Set();
  function idleWarnings(notify) {
    for (const banner of document.querySelectorAll("#active-cards [data-idle-warned]")) {
      const key = banner.dataset.serverName + "@" + banner.dataset.idleWarned;
      if (warned.has(key)) continue;
      warned.add(key);
      if (notify && "Notification" in window && Notification.permission === "granted") {
        new Notification("Idle GPUs: " + banner.dataset.serverName, {
          body: banner.querySelector("p").textContent.replace(/\s+/g, " ").trim(), tag: key});
      }
    }
  }
  idleWarnings(false);
  // Browsers ask for the permission only after a click of the user's.
  document.addEventListener("click", function () {
    if (document.querySelector("#active-cards [data-idle-watch]") && "Notification" in window &&
        Notification.permission === "default") Notification.requestPermission();
  }, {once: true});

  async function poll() {
    if (moving() || (gpusLive() && Date.now() - lastFetch >= GPU_EVERY)) {
      lastFetch = Date.now();
      try {
        const response = await fetch(root.dataset.cardsUrl, {credentials: "same-origin"});
        if (response.ok) {
          swap(await response.text());
          idleWarnings(true);
        }
      } catch (error) {
        // The network blinked: the next round tries again.
      }
    }
    window.setTimeout(poll, INTERVAL);
  }
  if (root) window.setTimeout(poll, INTERVAL);

  for (const button of document.querySelectorAll("button.profile")) {
    button.addEventListener("click", function () {
      const form = document.getElementById("start-form");
      for (const key of ["profile", "partition", "gpus", "hours", "nodes"]) {
        const field = form.elements[key];
        if (field) field.value = button.dataset[key];
      }
      for (const other of document.querySelectorAll("button.profile")) other.classList.remove("primary");
      button.classList.add("primary");
    });
  }
})();
