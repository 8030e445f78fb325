"""What Slurm's job states mean, defined once for everything that follows a Slurm job: the portal's
jobs, sessions, apps and pulls, its poll cycle, and the hub's spawner. No Django here: the spawner
imports this module too.

A job is *live* while Slurm may still run it or still holds its resources; *final* once it never
will again. Every state squeue or sacct can print is in exactly one of the two
(tests/slurm/test_states.py).
"""

# Waiting to start. REQUEUE_HOLD and RESV_DEL_HOLD are also HELD: they wait for somebody to release.
PENDING = frozenset({"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD"})
HELD = frozenset({"REQUEUE_HOLD", "RESV_DEL_HOLD"})
# Holding its allocation. COMPLETING (its processes are being cleaned up) and STOPPED (SIGSTOPped,
# resources kept) still hold the node and the GPUs, so they count as running, not as ended.
RUNNING = frozenset({"CONFIGURING", "RUNNING", "COMPLETING", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"})
SUSPENDED = frozenset({"SUSPENDED"})
LIVE = PENDING | RUNNING | SUSPENDED
FINAL = frozenset({"COMPLETED", "FAILED", "SPECIAL_EXIT", "CANCELLED", "REVOKED", "TIMEOUT", "OUT_OF_MEMORY",
                   "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE"})


# The final states the portal tells apart by name (how a job ended), so that nothing outside slurm/
# spells a Slurm state (tests/slurm/test_states.py).
COMPLETED, CANCELLED, TIMEOUT = "COMPLETED", "CANCELLED", "TIMEOUT"


def base_state(state: str) -> str:
    """'CANCELLED by 10001' -> 'CANCELLED', 'COMPLETED+' -> 'COMPLETED', ' running' -> 'RUNNING'."""
    return state.strip().split(" ", 1)[0].rstrip("+").upper()


def is_live(state: str) -> bool:
    return base_state(state) in LIVE


def is_final(state: str) -> bool:
    return base_state(state) in FINAL


def is_pending(state: str) -> bool:
    """Waiting to start: PENDING, but also REQUEUED and the held states."""
    return base_state(state) in PENDING


def is_running(state: str) -> bool:
    """Holding its allocation: RUNNING, but also CONFIGURING, COMPLETING and the rest of RUNNING."""
    return base_state(state) in RUNNING


def node_usable(state: str) -> bool:
    """Whether a node in this `sinfo` state can run jobs ('idle', 'mixed', 'allocated', 'mixed-'...):
    the GPUs of one that cannot (down, drained) are unavailable, never free."""
    return state.rstrip("*~#!%$@^-+").lower() in {"idle", "mixed", "allocated", "completing", "planned"}
