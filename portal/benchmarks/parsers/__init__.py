"""Pure parsers for GPU benchmark outputs: `parse(tool, text)` -> dict with at least "parsed".

No Django here on purpose: the parsers run anywhere (workers, scripts, tests) on untrusted text.
"""

from collections.abc import Callable

from portal.benchmarks.parsers import (
    dle_resnet,
    fio,
    inference,
    mlperf,
    nccl,
    nvidia_smi,
    p2p,
    tf_cnn_benchmarks,
    trtexec,
)
from portal.benchmarks.parsers._common import failure

PARSERS: dict[str, Callable[[str], dict]] = {
    "fio": fio.parse,
    "nccl": nccl.parse,
    "tf_cnn_benchmarks": tf_cnn_benchmarks.parse,
    "dle_resnet": dle_resnet.parse,
    "mlperf": mlperf.parse,
    "p2p": p2p.parse,
    "nvidia_smi": nvidia_smi.parse,
    "inference": inference.parse,
    "trtexec": trtexec.parse,
}


def parse(tool: str, text: str) -> dict:
    parser = PARSERS.get(tool.strip().lower()) if isinstance(tool, str) else None
    if parser is None:
        return failure(f"unknown tool {tool!r}; known tools: {', '.join(sorted(PARSERS))}")
    if not isinstance(text, str):
        return failure(f"text must be str, got {type(text).__name__}")
    try:
        return parser(text)
    except Exception as exc:
        # Last line of defence for the "never crashes" contract; the fuzz tests aim to keep this unused.
        return failure(f"{tool} parser error: {type(exc).__name__}: {exc}")
