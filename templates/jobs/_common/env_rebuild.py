# Run by a re-run's prologue, as the job's user, with the system Python (-I): argv = the current
# environment (a venv), the target folder (a cache keyed by the lock's SHA-256), the recorded lock
# (`pip freeze --all` lines). Builds, once, a venv over the current one holding just the recorded
# versions of the packages that differ, then checks that its `pip freeze --all` is the lock; exits 1
# (and builds nothing) otherwise: a package the lock lacks cannot be taken out of the current one.
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

base, target, lock_text = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+)$")


def lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}


def freeze(python: Path) -> set[str]:
    done = subprocess.run([str(python), "-m", "pip", "freeze", "--all", "--disable-pip-version-check"],
                          capture_output=True, text=True, check=True)
    return lines(done.stdout)


def purelib(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()


lock = lines(lock_text)
if (target / ".gpuportal-lock").is_file():
    sys.exit(0)  # built before, by an earlier job (checked then)
target.parent.mkdir(parents=True, exist_ok=True)
building = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
try:
    subprocess.run([str(base / "bin/python"), "-m", "venv", "--without-pip", str(building)], check=True)
    python = building / "bin/python"
    packages, below = Path(purelib(python)), purelib(base / "bin/python")
    # The current environment's packages come after this one's own: a recorded version shadows it.
    (packages / "_gpuportal_base.pth").write_text(below + "\n")
    current = freeze(base / "bin/python")
    wanted = sorted(line for line in lock - current if PIN.match(line))
    if wanted:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-warn-conflicts",
                        "--disable-pip-version-check", *wanted], check=True)
    # The current environment's programs (torchrun...), started by this environment's interpreter.
    for program in (base / "bin").iterdir():
        mine = building / "bin" / program.name
        if mine.exists() or not program.is_file():
            continue
        with program.open("rb") as handle:
            first = handle.readline()
        if first.startswith(b"#!") and b"/bin/python" in first:  # pip's launchers name their venv's python
            mine.write_bytes(b"#!" + str(target / "bin/python").encode() + b"\n"
                             + program.read_bytes().split(b"\n", 1)[1])
            mine.chmod(0o755)
    # Built in a temporary folder, renamed once checked: activate and launchers name the final one.
    for program in (building / "bin").iterdir():
        if program.is_file() and not program.is_symlink() and str(building).encode() in program.read_bytes():
            program.write_bytes(program.read_bytes().replace(str(building).encode(), str(target).encode()))
    got = freeze(python)
    if got != lock:
        extra = sorted(got - lock)
        missing = sorted(lock - got)
        print(f"gpuportal: the rebuilt environment is not its lock: not in the lock {extra[:10]}, "
              f"not installed {missing[:10]}", file=sys.stderr)
        sys.exit(1)
    (building / ".gpuportal-lock").write_text("\n".join(sorted(lock, key=str.lower)) + "\n")
    try:
        building.rename(target)
    except OSError:  # another job built it meanwhile
        if not (target / ".gpuportal-lock").is_file():
            raise
finally:
    if building.exists():
        shutil.rmtree(building, ignore_errors=True)
