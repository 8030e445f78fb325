// The header's menus (base.html). Each menu is a <details>, so it opens with Enter or Space without
// this script; the script adds what a menu bar is expected to do: one menu open at a time, Escape and
// a click elsewhere close it, and below 760 px the menus fold behind the Menu button.
(function () {
  "use strict";
  document.documentElement.classList.add("js");  // before the first paint: no flash of an open panel
  function menus() { return document.querySelectorAll(".site-header details.menu"); }
  function closeAll(except) {
    menus().forEach((menu) => { if (menu !== except) menu.open = false; });
  }
  document.addEventListener("DOMContentLoaded", () => {
    const toggle = document.querySelector(".menu-toggle");
    const panel = document.getElementById("nav-panel");
    menus().forEach((menu) => menu.addEventListener("toggle", () => { if (menu.open) closeAll(menu); }));
    toggle.addEventListener("click", () => {
      const open = toggle.getAttribute("aria-expanded") !== "true";
      toggle.setAttribute("aria-expanded", String(open));
      panel.classList.toggle("open", open);
    });
    document.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      const open = document.querySelector(".site-header details.menu[open]");
      if (open) {
        open.open = false;
        open.querySelector("summary").focus();
      } else if (panel.classList.contains("open")) {
        toggle.click();
        toggle.focus();
      }
    });
    document.addEventListener("click", (event) => {
      if (!event.target.closest(".site-header details.menu")) closeAll(null);
    });
    // Tabbing out of a menu closes it, as leaving it with the mouse would.
    document.addEventListener("focusin", (event) => {
      if (!event.target.closest(".site-header details.menu")) closeAll(null);
    });
  });
})();
