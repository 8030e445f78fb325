# Run by the job's prologue, as the job's user, with the system Python (-I): argv = the record's path,
# then the paths the template's path parameters name (relative ones from the home directory). Writes
# {"code": [...], "inputs": [...], "gpu": {...}} atomically; the portal reads it through job-files.
# Bounded: SHA-256 of at most HASH_BYTES in all and for HASH_SECONDS; a folder of more than
# LIST_FILES files, or past either bound, is recorded by its listing and sizes and marked so.
import hashlib
import json
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

HASH_BYTES = 2 * 1024**3
HASH_SECONDS = 10.0
LIST_FILES = 1000
DIFF_BYTES = 1024**2
started = time.monotonic()
budget = HASH_BYTES


def sha256(path: Path) -> str | None:
    global budget
    size = path.stat().st_size
    if size > budget or time.monotonic() - started > HASH_SECONDS:
        return None
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1024 * 1024):
            digest.update(chunk)
            if time.monotonic() - started > HASH_SECONDS:
                return None
    budget -= size
    return digest.hexdigest()


def entry(path: Path, shown: str) -> dict:
    info = path.stat()
    return {"path": shown, "size": info.st_size, "mtime": int(info.st_mtime), "sha256": sha256(path)}


def git(directory: Path, *args: str) -> bytes | None:
    try:
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, timeout=10,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def code(path: Path) -> dict | None:
    top_text = git(path if path.is_dir() else path.parent, "rev-parse", "--show-toplevel")
    if top_text is None:
        return None
    top = Path(top_text.decode().strip())
    diff = git(top, "diff", "HEAD") or b""
    return {"path": str(top), "commit": (git(top, "rev-parse", "HEAD") or b"").decode().strip(),
            "remote": (git(top, "remote", "get-url", "origin") or b"").decode().strip(),
            "diff": diff[:DIFF_BYTES].decode(errors="replace"), "diff_bytes": len(diff),
            "diff_truncated": len(diff) > DIFF_BYTES}


def folder(path: Path, shown: str) -> dict:
    files, total, over = [], 0, False
    for root, folders, names in os.walk(path):
        folders.sort()
        for name in sorted(names):
            full = Path(root) / name
            if full.is_symlink() or not full.is_file():
                continue
            if len(files) == LIST_FILES:
                over = True
                break
            files.append(entry(full, str(full.relative_to(path))))
            total += files[-1]["size"]
        if over:
            break
    over = over or any(item["sha256"] is None for item in files)
    if over:
        for item in files:
            item["sha256"] = None
    return {"path": shown, "kind": "folder", "size": total, "files": files, "over_bound": over}


def gpus() -> dict:
    none = {"model": "none", "driver": "none"}
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, timeout=10, check=False, text=True)
    except (OSError, subprocess.TimeoutExpired):
        return none
    rows = [[part.strip() for part in line.split(",")] for line in done.stdout.splitlines() if "," in line]
    if done.returncode or not rows:
        return none
    return {"model": "; ".join(sorted({row[0] for row in rows})), "driver": rows[0][1], "count": len(rows)}


home = Path(pwd.getpwuid(os.getuid()).pw_dir)
record: dict = {"version": 1, "code": [], "inputs": [], "gpu": gpus()}
seen = set()
for given in sys.argv[2:]:
    path = home / given  # an absolute `given` stays itself
    try:
        if path.is_dir():
            record["inputs"].append(folder(path, given))
        elif path.is_file():
            item = {**entry(path, given), "kind": "file"}
            record["inputs"].append({**item, "over_bound": item["sha256"] is None})
        else:
            record["inputs"].append({"path": given, "kind": "missing"})
            continue
    except OSError as error:
        record["inputs"].append({"path": given, "kind": "unreadable", "error": error.strerror})
        continue
    found = code(path)
    if found and found["path"] not in seen:
        seen.add(found["path"])
        record["code"].append(found)
record["seconds"] = round(time.monotonic() - started, 3)
target = Path(sys.argv[1])
partial = target.with_name(target.name + ".part")
with open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:  # noqa: PTH123 (a mode)
    json.dump(record, out)
partial.replace(target)
