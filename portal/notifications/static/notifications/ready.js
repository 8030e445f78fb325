// A browser notification when a server of the user's becomes ready. Works whether the servers page
// reloads itself (states are remembered per tab in sessionStorage) or updates its cards in place
// (a MutationObserver sees each card's data-state change). A server started from this tab counts
// as waiting from the click on.
(() => {
  "use strict";
  const KEY = "gpuportal.serverStates";
  const WAITING = new Set(["submitting", "queued", "starting"]);
  const supported = "Notification" in window;

  function remembered() {
    try { return JSON.parse(sessionStorage.getItem(KEY) || "{}"); } catch (e) { return {}; }
  }

  function notify(name, card) {
    if (!supported || Notification.permission !== "granted") return;
    const link = card.querySelector("a[id^='open-']");
    const note = new Notification(`Server ${name} is ready`, {
      body: "JupyterLab is waiting for you.", tag: `gpuportal-server-${name}`,
    });
    note.onclick = () => { window.focus(); if (link) window.open(link.href, "_blank", "noopener"); };
  }

  function check() {
    const before = remembered();
    const now = {};
    document.querySelectorAll("[data-server][data-state]").forEach((card) => {
      const name = card.dataset.server;
      now[name] = card.dataset.state;
      if (now[name] === "ready" && WAITING.has(before[name])) notify(name, card);
    });
    sessionStorage.setItem(KEY, JSON.stringify(now));
    offer(Object.values(now).some((state) => WAITING.has(state)));
  }

  // Permission can only be asked on a click: a button, shown while something is on its way.
  function offer(waiting) {
    let button = document.getElementById("notify-ready");
    const wanted = supported && waiting && Notification.permission === "default";
    if (!wanted) { if (button) button.remove(); return; }
    if (button) return;
    button = document.createElement("button");
    button.type = "button";
    button.id = "notify-ready";
    button.textContent = "Notify me when it is ready";
    button.addEventListener("click", () => Notification.requestPermission().then(() => check()));
    const cards = document.getElementById("servers") || document.querySelector(".cards");
    if (cards) cards.before(button);
  }

  function settings() {
    const button = document.querySelector("[data-notify-permission]");
    const status = document.querySelector("[data-notify-status]");
    if (!button) return;
    const show = () => {
      if (status) status.textContent = supported ? `Now: ${Notification.permission}` : "Not supported here";
    };
    button.addEventListener("click", () => { if (supported) Notification.requestPermission().then(show); });
    show();
  }

  // A server this tab asks for counts as on its way, even if it is ready by the next page.
  function remember(form) {
    form.addEventListener("submit", (event) => {
      const name = form.elements.name && form.elements.name.value;
      if (!name || (event.submitter && event.submitter.formAction !== form.action)) return;
      sessionStorage.setItem(KEY, JSON.stringify({...remembered(), [name]: "submitting"}));
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    settings();
    const form = document.getElementById("start-form");
    if (form) remember(form);
    if (!document.getElementById("servers") && !document.querySelector("[data-server]")) return;
    check();
    new MutationObserver(check).observe(document.body, {
      subtree: true, childList: true, attributes: true, attributeFilter: ["data-state"],
    });
  });
})();
