// What the page parts that refresh themselves (core/live.js, servers/servers.js) share.
(function () {
  "use strict";
  // Each render masks the CSRF token anew: a part whose forms alone differ by it has not changed, and
  // swapping it would move the focus of whoever is using it.
  const TOKEN = /(name="csrfmiddlewaretoken" value=")[^"]*"/g;
  window.portalBare = (html) => html.replace(TOKEN, '$1"');

  // What a swap changed, said to screen readers (WCAG 4.1.3): an element with data-announce (e.g. a
  // session's state badge) says its sentence in the page's live region (#live-status, base.html)
  // when the sentence is new: "Session tour: ready".
  function sentences(root) {
    return new Set([...root.querySelectorAll("[data-announce]")].map((e) => e.dataset.announce));
  }
  window.portalAnnounce = function (before, after) {
    const region = document.getElementById("live-status");
    if (!region) return;
    const old = sentences(before);
    const fresh = [...sentences(after)].filter((s) => !old.has(s));
    if (fresh.length) region.textContent = fresh.join(". ");
  };
})();
