// Resumable uploads from the Files page: the tus 1.0 protocol against /api/v1/files/uploads/.
// Each file is sent in chunks; a dropped connection (or a reload) resumes from the offset the
// server reports (HEAD), never from the start. An upload's address is kept in localStorage under
// the file's folder, name, size and date, so picking the same file again continues it.
(function () {
  const box = document.getElementById("upload");
  if (!box) return;
  // Big chunks: each PATCH costs a sudo and a helper start (~40 ms), so 16 MiB ones capped an
  // upload near 0.1x a local cp; a drop loses at most one chunk's unsent part anyway, since the
  // server keeps every byte it received and HEAD says where to go on.
  const CHUNK = 64 * 1024 * 1024;
  const RETRIES = 30;
  const input = document.getElementById("upload-input");
  const progress = document.getElementById("upload-progress");
  const status = document.getElementById("upload-status");
  const csrf = document.querySelector("input[name=csrfmiddlewaretoken]").value;
  const tus = { "Tus-Resumable": "1.0.0", "X-CSRFToken": csrf };

  function b64(text) {
    const bytes = new TextEncoder().encode(text);
    let binary = "";
    bytes.forEach((byte) => { binary += String.fromCharCode(byte); });
    return btoa(binary);
  }

  function say(text) { status.textContent = text; }

  async function detail(response) {
    try { return (await response.json()).detail; } catch (error) { return `HTTP ${response.status}`; }
  }

  async function create(file, key) {
    const stored = localStorage.getItem(key);
    if (stored) {
      const head = await fetch(stored, { method: "HEAD", headers: tus, credentials: "same-origin" });
      if (head.ok) return stored;
      localStorage.removeItem(key);
    }
    const metadata = `root ${b64(box.dataset.root)},folder ${b64(box.dataset.folder)},filename ${b64(file.name)}`;
    const response = await fetch(box.dataset.endpoint, {
      method: "POST", credentials: "same-origin",
      headers: { ...tus, "Upload-Length": String(file.size), "Upload-Metadata": metadata },
    });
    if (response.status !== 201) throw new Error(await detail(response));
    const location = response.headers.get("Location");
    localStorage.setItem(key, location);
    return location;
  }

  async function offsetOf(location) {
    const head = await fetch(location, { method: "HEAD", headers: tus, credentials: "same-origin" });
    if (!head.ok) throw new Error(`the upload is gone (HTTP ${head.status})`);
    return Number(head.headers.get("Upload-Offset"));
  }

  async function send(file) {
    const key = `gpuportal-upload:${box.dataset.root}:${box.dataset.folder}:${file.name}:${file.size}:${file.lastModified}`;
    const location = await create(file, key);
    let offset = await offsetOf(location);
    let failures = 0;
    progress.hidden = false;
    while (offset < file.size || file.size === 0) {
      progress.value = file.size ? offset / file.size : 1;
      say(`Uploading ${file.name}: ${Math.floor(progress.value * 100)} %`);
      try {
        const response = await fetch(location, {
          method: "PATCH", credentials: "same-origin",
          headers: { ...tus, "Upload-Offset": String(offset), "Content-Type": "application/offset+octet-stream" },
          body: file.slice(offset, offset + CHUNK),
        });
        if (response.status === 204) {
          offset = Number(response.headers.get("Upload-Offset"));
          failures = 0;
          if (file.size === 0) break;
          continue;
        }
        if (response.status !== 409 && response.status < 500) throw new Error(await detail(response));
      } catch (error) {
        if (!(error instanceof TypeError)) throw error;  // a network error: resume below
      }
      failures += 1;
      if (failures > RETRIES) throw new Error("the connection keeps dropping; pick the file again to resume");
      say(`Connection lost; resuming ${file.name}…`);
      await new Promise((resolve) => setTimeout(resolve, Math.min(1000 * failures, 10000)));
      offset = await offsetOf(location);  // where the server really is
    }
    localStorage.removeItem(key);
    progress.value = 1;
  }

  document.getElementById("upload-button").addEventListener("click", async () => {
    const files = Array.from(input.files);
    if (!files.length) { say("Pick one or more files first."); input.focus(); return; }
    try {
      for (const file of files) await send(file);
      say(`Uploaded ${files.length} file${files.length > 1 ? "s" : ""}.`);
      window.location.reload();
    } catch (error) {
      say(`Upload failed: ${error.message}`);
    }
  });
})();
