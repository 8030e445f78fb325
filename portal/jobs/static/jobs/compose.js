// Keeps the form within what the chosen partition allows (GPUs per node, nodes, time limit) and
// shows the CPUs and memory that come with the GPUs.
(function () {
  const form = document.getElementById("composer");
  const partition = document.getElementById("id_partition");
  if (!form || !partition) return;
  const gpuInput = form.dataset.gpuField && document.getElementById("id_" + form.dataset.gpuField);
  const nodesInput = form.dataset.nodesField && document.getElementById("id_" + form.dataset.nodesField);
  const timeInput = document.getElementById("id_time_limit");
  const hint = document.getElementById("resources-hint");

  function cap(input, limit) {
    if (!input) return;
    const own = input.dataset.max ? Number(input.dataset.max) : Infinity;
    const max = Math.min(own, limit === "" ? Infinity : Number(limit));
    if (Number.isFinite(max)) input.max = max; else input.removeAttribute("max");
  }

  function update() {
    const p = partition.selectedOptions[0].dataset;
    cap(gpuInput, p.maxGpus);
    cap(nodesInput, p.maxNodes);
    cap(timeInput, p.maxTime);
    const gpus = gpuInput ? Number(gpuInput.value || 0) : 0;
    const cpus = gpus ? gpus * Number(p.cpusPerGpu) : Number(p.cpusWithoutGpu);
    const mem = gpus ? gpus * Number(p.memPerGpu) : Number(p.memWithoutGpu);
    hint.textContent = `Per node: ${gpus} GPU(s), ${cpus} CPUs, ${mem} GB memory` +
      (p.maxTime ? `; time limit at most ${p.maxTime} minutes.` : "; no time limit on this partition.");
  }
  partition.addEventListener("change", update);
  if (gpuInput) gpuInput.addEventListener("input", update);
  update();
})();
