"""One definition of what Slurm's job states mean (slurm/states.py), used by everything that
follows a Slurm job, the hub's spawner included."""

import ast
from pathlib import Path

import pytest

from portal.jobs.services.sync import slurm_state_map
from slurm import states

ROOT = Path(__file__).resolve().parents[2]
# Every job state code Slurm 22.05 prints (squeue(1) "JOB STATE CODES").
SLURM_STATES = {
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "CONFIGURING", "COMPLETING", "DEADLINE", "FAILED", "NODE_FAIL",
    "OUT_OF_MEMORY", "PENDING", "PREEMPTED", "RUNNING", "RESV_DEL_HOLD", "REQUEUE_FED", "REQUEUE_HOLD",
    "REQUEUED", "RESIZING", "REVOKED", "SIGNALING", "SPECIAL_EXIT", "STAGE_OUT", "STOPPED", "SUSPENDED",
    "TIMEOUT",
}


def test_every_state_is_live_or_final_never_both():
    assert states.LIVE | states.FINAL == SLURM_STATES
    assert not states.LIVE & states.FINAL
    assert states.HELD <= states.PENDING
    assert not (states.PENDING & states.RUNNING) and not (states.RUNNING & states.SUSPENDED)


@pytest.mark.parametrize(("raw", "live"), [
    ("CANCELLED by 10001", False), ("COMPLETED+", False), ("completing", True), ("STOPPED", True),
    ("REQUEUE_HOLD", True), ("OUT_OF_MEMORY", False), ("", False), ("NO_SUCH_STATE", False),
])
def test_raw_states(raw, live):
    assert states.is_live(raw) is live
    assert states.is_final(raw) is (not live and states.base_state(raw) in SLURM_STATES)


def test_the_jobs_state_machine_maps_every_state():
    assert all(slurm_state_map(state) is not None for state in SLURM_STATES)


def _state_sets(path: Path) -> list[int]:
    """Lines of set/frozenset/tuple literals naming two or more Slurm states, and outside slurm/ of
    comparisons with a Slurm state spelt out (`state == "RUNNING"` misses CONFIGURING, REQUEUED...)."""
    comparisons = ROOT / "slurm" not in path.parents
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Set | ast.Tuple | ast.List):
            names = {elt.value for elt in node.elts if isinstance(elt, ast.Constant)} & SLURM_STATES
            if len(names) >= 2 and {"PENDING", "RUNNING", "COMPLETING", "REQUEUED"} & names:
                found.append(node.lineno)
        elif comparisons and isinstance(node, ast.Compare) and any(
                isinstance(side, ast.Constant) and side.value in SLURM_STATES
                for side in (node.left, *node.comparators)):
            found.append(node.lineno)
    return found


@pytest.mark.parametrize(("raw", "pending", "running"), [
    ("PENDING", True, False), ("REQUEUED", True, False), ("REQUEUE_HOLD", True, False),
    ("CONFIGURING", False, True), ("COMPLETING", False, True), ("running", False, True),
    ("SUSPENDED", False, False), ("CANCELLED by 10001", False, False),
])
def test_pending_and_running_are_the_sets_not_the_words(raw, pending, running):
    assert (states.is_pending(raw), states.is_running(raw)) == (pending, running)


def test_live_states_are_defined_once_and_the_spawner_imports_them():
    code = [path for folder in ("portal", "slurm", "spawners") for path in (ROOT / folder).rglob("*.py")
            if "migrations" not in path.parts and path != ROOT / "slurm/states.py"]
    assert {str(path.relative_to(ROOT)): lines for path in code if (lines := _state_sets(path))} == {}
    assert "from slurm.states import" in (ROOT / "spawners/slurm_spawner.py").read_text()
