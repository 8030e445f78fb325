// The "Use these" panel (efficiency/_suggest.html): the button fills the form's GPUs and time from
// what the user's recent runs used; on the session form a profile button fetches that profile's
// suggestion (GET /api/v1/profiles/<name>/suggested-resources/) and the panel says it politely.
(function () {
  "use strict";
  const root = document.getElementById("suggest");
  if (!root) return;
  const panel = document.getElementById("suggest-panel");
  const use = document.getElementById("suggest-use");
  const status = document.getElementById("suggest-status");
  const session = root.dataset.kind === "session";
  const form = document.getElementById(session ? "start-form" : "composer");
  if (!form) return;

  function field(name) {
    return name ? document.getElementById("id_" + name) : null;
  }

  function set(input, value) {
    if (!input || value === "") return;
    input.value = value;
    // compose.js keeps the resources line in step with the GPUs.
    input.dispatchEvent(new Event("input", {bubbles: true}));
    input.dispatchEvent(new Event("change", {bubbles: true}));
  }

  function show(suggestion) {
    panel.hidden = !suggestion;
    panel.dataset.gpus = suggestion && suggestion.gpus !== null ? suggestion.gpus : "";
    panel.dataset.timeMinutes = suggestion && suggestion.time_minutes !== null ? suggestion.time_minutes : "";
    document.getElementById("suggest-summary").textContent = suggestion ? suggestion.summary : "";
    document.getElementById("suggest-advice").textContent = suggestion ? suggestion.advice : "";
    use.hidden = !suggestion;
  }

  use.hidden = panel.hidden;
  use.addEventListener("click", function () {
    const gpus = panel.dataset.gpus;
    const minutes = panel.dataset.timeMinutes;
    // The suggestion counts every node's GPUs; the forms ask per node.
    const nodesInput = session ? form.elements.nodes : field(form.dataset.nodesField);
    const nodes = Math.max(1, Number(nodesInput && nodesInput.value) || 1);
    const perNode = gpus === "" ? "" : String(Math.ceil(Number(gpus) / nodes));
    if (session) {
      set(form.elements.gpus, perNode);
      set(form.elements.hours, minutes === "" ? "" : String(Number(minutes) / 60));
    } else {
      set(field(form.dataset.gpuField), perNode);
      set(field("time_limit"), minutes);
    }
    status.textContent = "Filled in the GPUs and the time from your recent runs.";
  });

  if (!session) return;
  let asked = "";  // the last profile pressed: an older answer arriving late is dropped
  for (const button of document.querySelectorAll("button.profile")) {
    button.addEventListener("click", async function () {
      const name = button.dataset.profile;
      asked = name;
      try {
        const response = await fetch(root.dataset.url.replace("/_/", "/" + encodeURIComponent(name) + "/"),
                                     {credentials: "same-origin", headers: {Accept: "application/json"}});
        if (asked !== name) return;
        if (!response.ok) {
          show(null);
          return;
        }
        const body = await response.json();
        if (asked !== name) return;
        show(body.suggestion);
        status.textContent = body.suggestion ? body.suggestion.summary + " " + body.suggestion.advice
          : body.detail;
      } catch (error) {
        // The network blinked: the panel keeps what it showed.
      }
    });
  }
})();
