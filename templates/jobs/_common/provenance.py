# Run by the job's prologue, as the job's user, with the system Python (-I): argv = the record's path,
# then the paths the template's path parameters name (relative ones from the home directory). Writes
# {"code": [...], "inputs": [...], "gpu": {...}} atomically; the portal reads it through job-files.
# The job's program waits for it, so at its start it hashes (SHA-256) at most START_BYTES in all and for
# START_SECONDS; what is past either bound is listed with its sizes and marked, and hashed after the
# program has started, by a child of this process in the background (niced, while the job's shell
# lives), which then writes the final record. A `.hashing` file beside the record says it is at work:
# the job's exit waits for it (a while), so that the portal reads the final record. A folder of more
# than LIST_FILES files is recorded by its first LIST_FILES files' listing and marked so.
import hashlib
import json
import os
import pwd
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

START_BYTES = 2 * 1024**3
START_SECONDS = 0.5
LIST_FILES = 1000
DIFF_BYTES = 1024**2
CHUNK = 1024**2
started = time.monotonic()
budget = START_BYTES
# What is left for the background: each entry (a dict in the record) and its file; and how far a
# file's hash had gone when it stopped (the background goes on from there).
deferred: list[tuple[dict, Path]] = []
partial: dict[Path, tuple] = {}


def sha256(path: Path, go_on: Callable[[], bool]) -> str | None:
    """The file's SHA-256, or None once `go_on()` says stop (checked every 64 MiB)."""
    digest, offset = partial.pop(path, None) or (hashlib.sha256(), 0)
    with path.open("rb") as handle:
        handle.seek(offset)
        for count, chunk in enumerate(iter(lambda: handle.read(CHUNK), b"")):
            digest.update(chunk)
            offset += len(chunk)
            if count % 64 == 63 and not go_on():
                partial[path] = (digest, offset)
                return None
    return digest.hexdigest()


def in_time() -> bool:
    return time.monotonic() - started < START_SECONDS


def entry(path: Path, shown: str) -> dict:
    global budget
    info = path.stat()
    item = {"path": shown, "size": info.st_size, "mtime": int(info.st_mtime), "sha256": None}
    if info.st_size <= budget and in_time():
        item["sha256"] = sha256(path, in_time)
    if item["sha256"] is None:
        deferred.append((item, path))
    else:
        budget -= info.st_size
    return item


def merkle(files: list[dict]) -> str | None:
    """A folder's hash: SHA-256 of its files' `sha256sum` lines, in path order; None until all are."""
    if any(item["sha256"] is None for item in files):
        return None
    lines = "".join(f"{item['sha256']}  {item['path']}\n" for item in sorted(files, key=lambda i: i["path"]))
    return hashlib.sha256(lines.encode()).hexdigest()


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
    shown = {"path": RERUN["trees"][str(top)], "worktree": str(top)} if str(top) in RERUN["trees"] else {
        "path": str(top)}
    return {**shown, "commit": (git(top, "rev-parse", "HEAD") or b"").decode().strip(),
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
    if over:  # not hashed at all: the listing is not the whole folder
        deferred[:] = [(item, where) for item, where in deferred if not any(item is f for f in files)]
        for item in files:
            item["sha256"] = None
    return {"path": shown, "kind": "folder", "size": total, "files": files, "listing_capped": over,
            "sha256": None if over else merkle(files), "over_bound": over or merkle(files) is None}


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
# A re-run: the files it uses instead of its path parameters' (copies in its scratch work trees), and
# those trees' originals, by which they are recorded.
RERUN = json.loads(os.environ.get("GPUPORTAL_RERUN") or '{"paths": {}, "trees": {}}')
record: dict = {"version": 1, "code": [], "inputs": [], "gpu": gpus()}
seen = set()
for given in sys.argv[2:]:
    copy = RERUN["paths"].get(given)
    path = Path(copy) if copy and Path(copy).exists() else home / given  # an absolute `given` stays itself
    try:
        if path.is_dir():
            record["inputs"].append(folder(path, given))
        elif path.is_file():
            item = entry(path, given)
            item.update(kind="file", over_bound=item["sha256"] is None)
            record["inputs"].append(item)
        else:
            record["inputs"].append({"path": given, "kind": "missing"})
            continue
    except OSError as error:
        record["inputs"].append({"path": given, "kind": "unreadable", "error": error.strerror})
        continue
    found = code(path)
    if found and path.is_file():  # a file the commit has is code (a re-run checks it out), else data
        tracked = git(path.parent, "ls-files", "--error-unmatch", path.name)
        record["inputs"][-1]["tracked"] = tracked is not None
    if found and found["path"] not in seen:
        seen.add(found["path"])
        record["code"].append(found)
record["seconds"] = round(time.monotonic() - started, 3)
target = Path(sys.argv[1])


def write() -> None:
    partial = target.with_name(target.name + ".part")
    with open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:  # noqa: PTH123
        json.dump(record, out)
    partial.replace(target)


def finish(shell: int) -> None:
    """In the background: hash what was deferred, while the job's shell lives; then the record."""
    begun = time.monotonic()

    def shell_lives() -> bool:
        try:
            os.kill(shell, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True

    for item, path in deferred:
        try:
            item["sha256"] = sha256(path, shell_lives)
        except OSError:
            continue
        if item["sha256"] is None:
            return  # the job is over: the record stays as it was, marked
        item["over_bound"] = False
    for item in record["inputs"]:
        if item.get("kind") == "folder" and not item["listing_capped"]:
            item["sha256"] = merkle(item["files"])
            item["over_bound"] = item["sha256"] is None
    record["background"] = {"state": "done", "files": len(deferred),
                            "seconds": round(time.monotonic() - begun, 3)}
    write()


if deferred:
    record["background"] = {"state": "hashing", "files": len(deferred),
                            "bytes": sum(item["size"] for item, _ in deferred)}
write()
if deferred:
    marker = target.with_name(target.name + ".hashing")
    marker.touch(mode=0o600)
    shell = os.getppid()
    if os.fork() == 0:
        try:
            os.nice(10)
            finish(shell)
        finally:
            marker.unlink(missing_ok=True)
            os._exit(0)
