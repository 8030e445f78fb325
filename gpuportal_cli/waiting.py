"""Why a queued job or session waits, as `job` and `session show` print it (the API's `waiting`)."""

from typing import Any

from gpuportal_cli.output import fields, when


def waiting_show(waiting: dict[str, Any] | None) -> None:
    """Nothing unless Slurm holds it pending."""
    if not waiting:
        return
    priority = waiting.get("priority")
    position = waiting.get("position")
    fairshare = waiting.get("fairshare")
    reason = waiting.get("reason")
    lines = {
        "why": f"{waiting['reason_text']} ({reason})" if reason else waiting["reason_text"],
        "start": when(waiting.get("estimated_start")) or "not known yet",
        "position": (f"{position} of {waiting['pending_in_partition']} waiting for {waiting['partition']}"
                     if position else ""),
        "priority": (f"{priority['total']} = age {priority['age']} + fair share {priority['fairshare']}"
                     f" + job size {priority['jobsize']} + partition {priority['partition']}"
                     f" + QOS {priority['qos']}"
                     if priority else ""),
        "fairshare": "" if fairshare is None else f"{fairshare:.2f} (1 = you used little lately)",
        "as_of": when(waiting.get("as_of")),
    }
    fields(lines, [("Why it waits", "why"), ("Estimated start", "start"), ("Position", "position"),
                   ("Priority", "priority"), ("Your fair share", "fairshare"), ("As of", "as_of")])
