"""Run by build.sh with an environment's own python: detects the framework versions by importing them,
then writes <env>/gpuportal-env.json and the env's Jupyter kernelspec.

Only the standard library is used here; the frameworks are imported, not trusted from the requirements.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import re
import sys
from pathlib import Path

HEADER = re.compile(r"^#\s*gpuportal:\s*(.*)$")


def header_read(requirements: Path) -> dict[str, str]:
    """The `# gpuportal: frameworks=a,b display=Name {a}` line of a requirements file."""
    for line in requirements.read_text().splitlines():
        found = HEADER.match(line)
        if found:
            # display= runs to the end of the line (it may contain spaces).
            head, _, display = found.group(1).partition("display=")
            fields = dict(part.split("=", 1) for part in head.split())
            fields["display"] = display.strip()
            return fields
    raise SystemExit(f"{requirements}: no '# gpuportal: frameworks=... display=...' line")


def versions_detect(modules: list[str]) -> dict[str, str]:
    found = {}
    for name in modules:
        module = importlib.import_module(name)
        found[name] = str(getattr(module, "__version__", "unknown"))
    return found


def extras_detect(frameworks: dict[str, str]) -> dict[str, object]:
    """What the build can run on: the CUDA a torch wheel was built for, JAX's default backend."""
    extras: dict[str, object] = {}
    if "torch" in frameworks:
        import torch

        extras["torch_cuda_build"] = torch.version.cuda
    if "jax" in frameworks:
        import jax

        extras["jax_backend"] = jax.default_backend()
    return extras


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--requirements", type=Path, required=True)
    parser.add_argument("--kernels-dir", type=Path, required=True)
    args = parser.parse_args()

    # TensorFlow and JAX are chatty on import; the build log only wants the versions.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    header = header_read(args.requirements)
    frameworks = versions_detect(header["frameworks"].split(","))
    # "2.14.1+cu130" -> "2.14" for the display name; the manifest keeps the full version.
    major_minor = {name: ".".join(version.split("+")[0].split(".")[:2])
                   for name, version in frameworks.items()}
    display = f"Python {platform.python_version_tuple()[0]} ({header['display'].format(**major_minor)})"
    env = Path(sys.prefix)
    python = env / "bin" / "python"

    manifest = {
        "name": args.name,
        "python": platform.python_version(),
        "frameworks": frameworks,
        **extras_detect(frameworks),
        "kernel": args.name,
        "display_name": display,
        "executable": str(python),
    }
    (env / "gpuportal-env.json").write_text(json.dumps(manifest, indent=2) + "\n")

    kernel_dir = args.kernels_dir / args.name
    kernel_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": display,
        "language": "python",
        # jupyter_client substitutes ${PATH}: `!torchrun`, `!pip` in a notebook then use this env.
        "env": {"PATH": f"{env / 'bin'}:${{PATH}}", "TF_CPP_MIN_LOG_LEVEL": "2"},
        "metadata": {"debugger": True, "gpuportal": {"env": str(env), "frameworks": frameworks}},
    }
    (kernel_dir / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n")
    # Jupyter shows the generic Python logo when a kernelspec has none; borrow ipykernel's.
    for logo in ("logo-32x32.png", "logo-64x64.png", "logo-svg.svg"):
        source = env / "share/jupyter/kernels/python3" / logo
        if source.exists():
            (kernel_dir / logo).write_bytes(source.read_bytes())
    print(json.dumps(manifest))


if __name__ == "__main__":
    main()
