"""Every program that the code, the templates, the scripts and the tests call comes from the install
manifest (scripts/packages.txt): a Debian package listed there or one that such a package depends on
(`dpkg -S`), Debian's required base system, the portal's or a framework environment's venv (PyPI,
from pyproject.toml and scripts/envs/*.txt), the locked npm packages, or a program the manifest says
a real site provides. A program installed by hand, or by nothing, fails here: that is a missing
install step that a machine with history would hide.
"""

import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.called_programs import notebook_programs, python_programs, shell_programs

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "scripts" / "packages.txt"
STATE = os.environ.get("GPUPORTAL_STATE", "/var/lib/gpuportal")
VENV = Path(os.environ.get("GPUPORTAL_VENV", f"{STATE}/venv"))
ENVS = Path(os.environ.get("GPUPORTAL_ENVS", "/opt/gpuportal/envs"))
SYSTEM_PATH = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
_FUNCTION = re.compile(r"^\s*(?:function\s+)?([A-Za-z_][\w-]*)\s*\(\)", re.MULTILINE)


def manifest(kind: str) -> set[str]:
    names = set()
    for line in MANIFEST.read_text().splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#") and fields[0] == kind:
            names.add(fields[2])
    return names


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split("\n")
    return [ROOT / name for name in out if name and "node_modules/" not in name and (ROOT / name).is_file()]


def is_shell(path: Path) -> bool:
    if path.name.endswith((".sh", ".sh.j2")):
        return True
    with path.open("rb") as f:
        head = f.readline(100)
    return head.startswith(b"#!") and head.rstrip().endswith((b"/bash", b"/sh", b" bash", b" sh"))


def calls() -> dict[str, set[str]]:
    """program -> the files that call it."""
    found: dict[str, set[str]] = {}
    for path in tracked():
        if is_shell(path):
            programs = shell_programs(path.read_text())
        elif path.suffix == ".py":
            programs = python_programs(path.read_text())
        elif path.suffix == ".ipynb":
            programs = notebook_programs(path)
        else:
            continue
        for program in programs:
            found.setdefault(program, set()).add(str(path.relative_to(ROOT)))
    return found


@cache
def shell_words() -> set[str]:
    """Builtins, keywords and every shell function the repository defines."""
    builtins = subprocess.run(["bash", "-c", "compgen -b -k"], capture_output=True, text=True, check=True)
    functions = {name for path in tracked() if is_shell(path) for name in _FUNCTION.findall(path.read_text())}
    return set(builtins.stdout.split()) | functions


@cache
def debian_allowed() -> set[str]:
    """The manifest's Debian packages, everything they depend on, and Debian's required base."""
    rows = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package}\t${db:Status-Status}\t${Priority}\t${Depends}, ${Pre-Depends}"
         "\t${Provides}\n"], capture_output=True, text=True, check=True).stdout
    depends, providers, allowed = {}, {}, set()
    for row in rows.splitlines():
        package, status, priority, deps, provides = (row.split("\t") + [""] * 5)[:5]
        if status != "installed":
            continue
        depends[package] = {alt.split()[0].split(":")[0] for dep in deps.split(",") for alt in dep.split("|")
                            if alt.strip()}
        for virtual in provides.split(","):
            if virtual.strip():
                providers.setdefault(virtual.split()[0], set()).add(package)
        if priority == "required":
            allowed.add(package)
    todo = list(manifest("debian"))
    while todo:
        package = todo.pop()
        for real in {package} | providers.get(package, set()):
            if real in depends and real not in allowed:
                allowed.add(real)
                todo.extend(depends[real])
    return allowed


def dpkg_owner(path: str) -> str | None:
    candidates = {path, os.path.realpath(path)}
    candidates |= {p.replace("/usr/", "/", 1) for p in candidates if p.startswith("/usr/")}
    candidates |= {f"/usr{p}" for p in list(candidates) if not p.startswith("/usr/")}
    for candidate in candidates:
        found = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True, check=False)
        owners = [line.split(":")[0] for line in found.stdout.splitlines()
                  if not line.startswith("diversion ")]
        if found.returncode == 0 and owners:
            return owners[0].split(",")[0].strip()
    return None


def pip_and_npm_dirs() -> list[str]:
    dirs = [str(VENV / "bin"), *(str(env / "bin") for env in sorted(ENVS.glob("*")))]
    for lockfile in manifest("npm"):
        dirs.append(str(ROOT / Path(lockfile).parent / "node_modules" / ".bin"))
    return dirs


def why_not_installed(program: str) -> str | None:
    """None when the manifest installs `program`; else what is wrong."""
    if program in shell_words() or program in manifest("site"):
        return None
    if not program.startswith("/") and shutil.which(program, path=os.pathsep.join(pip_and_npm_dirs())):
        return None
    path = program if program.startswith("/") else shutil.which(program, path=os.pathsep.join(SYSTEM_PATH))
    if path is None or not Path(path).exists():
        return "nothing installs it"
    owner = dpkg_owner(path)
    if owner is None:
        return f"{path} belongs to no Debian package (installed by hand?)"
    if owner not in debian_allowed():
        return f"{path} is from Debian's {owner}, which scripts/packages.txt does not list"
    return None


@pytest.mark.integration
def test_every_called_program_comes_from_the_manifest():
    if not VENV.exists() or shutil.which("dpkg") is None:
        pytest.skip("needs the installed bed (make up) and dpkg")
    problems = [f"{program}: {why} (called in {', '.join(sorted(files))})"
                for program, files in sorted(calls().items()) if (why := why_not_installed(program))]
    assert not problems, "programs no install step provides:\n" + "\n".join(problems)


def test_the_scan_finds_a_program_in_every_position():
    script = """#!/bin/bash
set -e
frob-a --x | frob-b
if frob-c; then x=$(frob-d "$(frob-e)"); fi
"${RUN[@]}" frob-f --directory="$T"
sudo -u alice -- frob-g
cat <<'EOF'
not-a-command here
EOF
case $1 in start|stop) frob-h ;; esac
echo "a | not-b; not-c $(frob-i)"
ITEMS=(not-d not-e)
[[ -n $x && $y == z ]] && frob-j
(( i++ )) || frob-k
for not-f in a b; do frob-l; done
{% if params.smoke %}frob-m{% endif %}
"""
    found = {name for name in shell_programs(script) if name.startswith(("frob", "not"))}
    assert found == {f"frob-{c}" for c in "abcdefghijklm"}
    python = ('subprocess.run(["sudo", "-u", "alice", "frob-n", "x"])\n'
              'subprocess.Popen(("frob-o",))\nsubprocess.run([f"{x}/y"])')
    assert python_programs(python) == {"frob-n", "frob-o"}


@pytest.mark.integration
def test_a_program_nothing_installs_is_named():
    if shutil.which("dpkg") is None:
        pytest.skip("needs dpkg")
    assert why_not_installed("frobnicate-gpus") == "nothing installs it"
    assert why_not_installed("sbatch") is None  # slurm-client is in the manifest
    assert why_not_installed("ls") is None  # coreutils: Debian's required base
