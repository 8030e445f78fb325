"""CUDA sample p2pBandwidthLatencyTest: matrices printed as titled blocks of "index values..." rows.

Bandwidths are GB/s and latencies us, as printed. Titles changed across CUDA releases
(e.g. "(P2P Writes)" was added), so blocks are recognised by keywords, not exact titles.
"""

import re

from portal.benchmarks.parsers._common import failure, find_error, to_float, to_int

_ERRORS = [
    r"^.*CUDA error.*$",
    r"^.*cudaGetDeviceCount returned.*$",
    r"^.*(?:require|need)s? (?:two|2) or more GPUs.*$",
    r"^.*Waiving.*$",
]
_ROW = re.compile(r"^\s*(\d+)((?:\s+\S+)+)\s*$")


def parse(text: str) -> dict:
    matrices = _matrices(text)
    if not matrices:
        return failure(find_error(text, _ERRORS) or "no p2pBandwidthLatencyTest matrices found")
    connectivity = [
        [int(v) if v in (0, 1) else None for v in row] for row in matrices.get("connectivity", [])
    ]
    unidirectional = matrices.get("uni_enabled")
    devices = len(re.findall(r"^Device: \d+,", text, re.MULTILINE))
    return {
        "parsed": True,
        "num_gpus": devices or len(connectivity) or None,
        "connectivity": connectivity or None,
        "any_p2p": _any_p2p(connectivity) if connectivity else None,
        "p2p_enabled_unidirectional_gbps": unidirectional,
        "p2p_enabled_unidirectional_diag_gbps": (
            [row[i] if i < len(row) else None for i, row in enumerate(unidirectional)]
            if unidirectional
            else None
        ),
        "p2p_enabled_bidirectional_gbps": matrices.get("bi_enabled"),
        "p2p_enabled_latency_gpu_us": matrices.get("latency_enabled_gpu"),
    }


def _block_key(line: str) -> str | None:
    lowered = line.lower()
    if "connectivity matrix" in lowered:
        return "connectivity"
    enabled = "p2p=enabled" in lowered
    if "matrix" not in lowered or not (enabled or "p2p=disabled" in lowered):
        return None
    state = "enabled" if enabled else "disabled"
    if "latency" in lowered:
        return f"latency_{state}"
    return f"{'bi' if lowered.startswith('bidirectional') else 'uni'}_{state}"


def _matrices(text: str) -> dict[str, list[list[float | None]]]:
    matrices: dict[str, list[list[float | None]]] = {}
    key = None
    for line in text.splitlines():
        title = _block_key(line)
        if title:
            key = title
            continue
        stripped = line.strip()
        if key and stripped.startswith(("GPU", "CPU")) and key.startswith("latency"):
            # Latency blocks hold a GPU and a CPU sub-matrix; only GPU is reported.
            key = f"{key.split('_gpu')[0].split('_cpu')[0]}_{stripped[:3].lower()}"
            continue
        match = _ROW.match(line)
        if key and match and to_int(match.group(1)) == len(matrices.get(key, [])):
            matrices.setdefault(key, []).append([to_float(v) for v in match.group(2).split()])
    return matrices


def _any_p2p(connectivity: list[list[int | None]]) -> bool:
    return any(value == 1 for i, row in enumerate(connectivity) for j, value in enumerate(row) if i != j)
