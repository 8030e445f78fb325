// With several clusters (#38): the partition and environment pickers offer only what the picked
// cluster offers. Each such option lists its clusters in data-clusters; a partition whose size
// differs between clusters has an option per size. The server checks again (a 400 naming the field).
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
        // The same partition as that cluster has it (its size may differ), else the first offered.
        const usable = Array.from(select.options).filter((option) => !option.disabled);
        const next = usable.find((option) => option.value === chosen.value) || usable[0];
        if (next) {
          next.selected = true;
          select.dispatchEvent(new Event("change"));
        }
      }
    }
  }
  picker.addEventListener("change", offer);
  offer();
})();
