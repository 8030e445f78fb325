"""NVIDIA DCGM's job statistics (`dcgmi stats`), optional: where a site's Slurm prolog and epilog
mark each job for DCGM (docs/admin/gpu-accounting.md), `dcgmi stats --job <id> --verbose` reads
back what DCGM saw of the job's GPUs. This module holds the exact command lines and reads that
report into the figures GpuSummary keeps: mean and max utilisation, peak memory, energy.

The report is a text table (the layout of published DCGM 2.x reports):

    | GPU ID: 0                          |                                         |
    | Energy Consumed (Joules)           | 145919                                  |
    | Max GPU Memory Used (bytes)        | 1095761920                              |
    | SM Utilization (%)                 | Avg: 56, Max: 98, Min: 0                |

a block per GPU ("GPU ID: N") with --verbose, a "Summary" block for all of them. Anything else
reads as no data, never as an error: the report is only ever an extra source of figures."""

import re
from dataclasses import dataclass

DCGMI = "dcgmi"


def group_create_argv(name: str) -> list[str]:
    """Once per node: a DCGM group of all its GPUs (prints the new group's id)."""
    return [DCGMI, "group", "--create", name, "--default"]


def stats_enable_argv(group_id: int) -> list[str]:
    """Once per node (and after each nv-hostengine start): DCGM starts watching the group."""
    return [DCGMI, "stats", "--group", str(group_id), "--enable"]


def job_start_argv(job_id: str, group_id: int) -> list[str]:
    """Slurm prolog: the job's window starts."""
    return [DCGMI, "stats", "--group", str(group_id), "--jstart", job_id]


def job_stop_argv(job_id: str) -> list[str]:
    """Slurm epilog: the job's window ends."""
    return [DCGMI, "stats", "--jstop", job_id]


def job_stats_argv(job_id: str) -> list[str]:
    """The report, per GPU; DCGM answers it while the window is still open, too."""
    return [DCGMI, "stats", "--job", job_id, "--verbose"]


def job_remove_argv(job_id: str) -> list[str]:
    """Slurm epilog, after the report was read: DCGM forgets the job."""
    return [DCGMI, "stats", "--jremove", job_id]


@dataclass(frozen=True)
class DcgmJobStats:
    """What DCGM saw of a job's GPUs, in GpuSummary's units; None where DCGM had no figure."""

    gpus: int
    util_mean: float | None
    util_max: float | None
    mem_used_max_mib: float | None
    energy_wh: float | None


_BLOCK = re.compile(r"^(?:GPU ID:\s*(?P<gpu>\d+)|Summary)$")
_AVG_MAX = re.compile(r"Avg:\s*(?P<avg>[0-9.]+),\s*Max:\s*(?P<max>[0-9.]+)")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
# DCGM 1.x called utilization.gpu "GPU Utilization", later releases "SM Utilization".
_UTIL_ROWS = ("SM Utilization (%)", "GPU Utilization (%)")


def _blocks(text: str) -> dict[int | None, dict[str, str]]:
    """{GPU id (None: the summary): {row name: value}}. A block starts at a one-cell row naming
    it ("| GPU ID: 0 |", "| Summary |"); two-cell rows are its figures; rows before any block,
    rules and section titles are left out."""
    blocks: dict[int | None, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        line = line.strip()
        if len(line) < 2 or not (line.startswith("|") and line.endswith("|")):
            continue
        cells = [cell.strip() for cell in line[1:-1].split("|")]
        if len(cells) == 1 and (header := _BLOCK.match(cells[0])):
            current = blocks.setdefault(int(header["gpu"]) if header["gpu"] else None, {})
        elif len(cells) == 2 and current is not None and cells[0]:
            current[cells[0]] = cells[1]
    return blocks


def _number(text: str | None) -> float | None:
    return float(text) if text is not None and _NUMBER.fullmatch(text) else None


def parse_job_stats(text: str, gpus: set[int] | None = None) -> DcgmJobStats | None:
    """`dcgmi stats --job <id> [--verbose]` -> the job's figures, or None when it holds none.
    `gpus` keeps only those GPU blocks (a group of all the node's GPUs reports them all). Mean
    utilisation is the mean of the GPUs' means; energy is the GPUs' sum; peak memory their max."""
    blocks = _blocks(text)
    per_gpu = {gpu: rows for gpu, rows in blocks.items() if gpu is not None and (gpus is None or gpu in gpus)}
    chosen = list(per_gpu.values()) or ([blocks[None]] if None in blocks and gpus is None else [])
    means: list[float] = []
    maxima: list[float] = []
    memory: list[float] = []
    energy: list[float] = []
    for rows in chosen:
        util = next((rows[name] for name in _UTIL_ROWS if name in rows), "")
        if match := _AVG_MAX.search(util):
            means.append(float(match["avg"]))
            maxima.append(float(match["max"]))
        if (used := _number(rows.get("Max GPU Memory Used (bytes)"))) is not None:
            memory.append(used / 1024**2)
        if (joules := _number(rows.get("Energy Consumed (Joules)"))) is not None:
            energy.append(joules / 3600)
    if not (means or memory or energy):
        return None
    return DcgmJobStats(
        gpus=len(chosen),
        util_mean=sum(means) / len(means) if means else None,
        util_max=max(maxima) if maxima else None,
        mem_used_max_mib=max(memory) if memory else None,
        energy_wh=sum(energy) if energy else None,
    )
