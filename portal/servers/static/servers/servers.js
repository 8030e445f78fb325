// The servers page without reloads: while a card is on its way (queued, starting, stopping), fetch
// the cards every 2 s and swap them in; a profile button fills the form with its values.
(function () {
  "use strict";
  const root = document.getElementById("servers");
  const INTERVAL = 2000;

  function swap(html) {
    const fresh = new DOMParser().parseFromString(html, "text/html");
    for (const id of ["active-cards", "recent-sessions"]) {
      const current = document.getElementById(id);
      const next = fresh.getElementById(id);
      if (!current || !next) continue;
      if (id === "recent-sessions" && current.open) next.open = true;
      if (current.innerHTML !== next.innerHTML) current.replaceWith(next);
    }
  }

  function moving() {
    const cards = document.getElementById("active-cards");
    return cards && cards.dataset.moving === "true";
  }

  async function poll() {
    if (moving()) {
      try {
        const response = await fetch(root.dataset.cardsUrl, {credentials: "same-origin"});
        if (response.ok) swap(await response.text());
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
