// With several clusters (#38): the partition and environment pickers offer only what the picked
// cluster's file offers. Each such option lists its clusters in data-clusters; the server checks
// again (a 400 naming the field).
(function () {
  "use strict";
  const picker = document.getElementById("id_cluster");
  if (!picker) return;
  const selects = ["id_partition", "id_environment"].map((id) => document.getElementById(id)).filter(Boolean);

  function offer() {
    for (const select of selects) {
      for (const option of select.options) {
        if (option.dataset.clusters === undefined) continue;
        option.hidden = option.disabled = !option.dataset.clusters.split(" ").includes(picker.value);
      }
      const chosen = select.selectedOptions[0];
      if (chosen && chosen.disabled) {
        const first = Array.from(select.options).find((option) => !option.disabled);
        if (first) {
          first.selected = true;
          select.dispatchEvent(new Event("change"));
        }
      }
    }
  }
  picker.addEventListener("change", offer);
  offer();
})();
