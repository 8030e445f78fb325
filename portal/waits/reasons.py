"""Slurm's pending reasons in plain words: the one table the card, the job page, the API and the CLI
use. Every code this Slurm can print has words (tests/waits/test_reasons.py asks the bed's libslurm
for all of them); the limit codes (AssocGrpGRESMinutes, QOSMaxGRESPerUser...) are read by their
parts, so a family's new member still reads right.

`squeue` prints the scheduler's own description where it has one ('ReqNodeNotAvail,
UnavailableNodes:gpu-node1', 'launch failed requeued held'): the words are looked up by the whole
text, then by the code before its first comma.
"""

import re

_WORDS = {
    "None": "Slurm has not looked at it yet; it does at its next scheduling pass, within a minute.",
    "Priority": "Other jobs waiting for the same partition have a higher priority and go first. "
                "It moves up as it waits (age) and as others' jobs start.",
    "Resources": "The GPUs, CPUs or memory it asks for are in use by running jobs; it starts when "
                 "enough of them end.",
    "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions":
        "The nodes it could use are busy, down, drained or kept for jobs of a higher-priority partition.",
    "Dependency": "It waits for another job it depends on (--dependency) to finish.",
    "DependencyNeverSatisfied": "A job it depends on ended in a way that can never satisfy the "
                                "dependency: it will never start. Cancel it.",
    "BeginTime": "It was asked not to start before a later time (--begin).",
    "JobHeldUser": "Held by its owner (scontrol hold): it starts only once released (scontrol release).",
    "JobHeldAdmin": "Held by an administrator: ask them to release it.",
    "launch failed requeued held": "Slurm could not launch it on its node, put it back in the queue "
                                   "and held it: ask an administrator.",
    "JobHoldMaxRequeue": "It was requeued too many times and is held: ask an administrator.",
    "JobLaunchFailure": "Slurm could not launch it (a file system problem, a missing program...): "
                        "ask an administrator.",
    "Cleaning": "It is being requeued; its previous run is still being cleaned up.",
    "Prolog": "Its node's start-up script (prolog) is still running.",
    "ReqNodeNotAvail": "A node it needs is down, drained, reserved or not responding; an "
                       "administrator has to bring it back.",
    "NodeDown": "A node it needs is down.",
    "FrontEndDown": "No front-end node is available to run it.",
    "PartitionDown": "Its partition is down: it starts when an administrator brings it back up.",
    "PartitionInactive": "Its partition is inactive and starts no jobs.",
    "PartitionNodeLimit": "It asks for more (or fewer) nodes than its partition allows, or the nodes "
                          "it needs are down or drained.",
    "PartitionTimeLimit": "Its time limit is longer than its partition allows: it will not start. "
                          "Cancel it and ask for less time or another partition.",
    "PartitionConfig": "It breaks a limit of its partition: it will not start as it is.",
    "Reservation": "It waits for its reservation to begin.",
    "ReservationDeleted": "The reservation it asked for no longer exists: it will not start.",
    "Licenses": "It waits for a license to become free.",
    "BadConstraints": "Its requirements (constraints, features) can never be met on this cluster.",
    "Constraints": "Its constraints cannot be met right now.",
    "SchedDefer": "It asked for an immediate allocation, which this cluster defers.",
    "SystemFailure": "Slurm, a file system or the network failed: ask an administrator.",
    "InvalidAccount": "Its project (Slurm account) is not valid for you: cancel it and pick another.",
    "InvalidQOS": "Its quality of service (QOS) is not valid: cancel it and pick another.",
    "QOSNotAllowed": "Its quality of service (QOS) is not allowed for your project or partition.",
    "AccountNotAllowed": "Its project (Slurm account) may not use this partition.",
    "AccountingPolicy": "It breaks a limit of your project or QOS.",
    "AssociationJobLimit": "Your project has as many jobs as it may have.",
    "AssociationResourceLimit": "Your project uses all the resources it may use at once.",
    "AssociationTimeLimit": "Your project has reached its time limit.",
    "QOSJobLimit": "Its QOS has as many jobs as it may have.",
    "QOSResourceLimit": "Its QOS uses all the resources it may use at once.",
    "QOSTimeLimit": "Its QOS has reached its time limit.",
    "QOSUsageThreshold": "Its QOS is over its usage threshold.",
    "JobArrayTaskLimit": "Its job array already runs as many tasks at once as it may.",
    "MaxMemPerLimit": "It asks for more memory per CPU or per node than allowed.",
    "InactiveLimit": "It reached the cluster's inactivity limit.",
    "DeadLine": "It cannot finish before its deadline (--deadline).",
    "FedJobLock": "It waits for the clusters of the federation to agree on it.",
    "PowerNotAvail": "Not enough power is available to run it.",
    "PowerReserved": "Power is reserved for other jobs.",
    "BurstBufferResources": "It waits for burst-buffer space.",
    "BurstBufferStageIn": "Its files are being staged into the burst buffer.",
    "BurstBufferOperation": "A burst-buffer operation for it failed.",
    # Reasons of an ended job (Slurm keeps the last one), in case one is shown while it leaves the queue.
    "NonZeroExitCode": "It ended with a non-zero exit code.",
    "TimeLimit": "It reached its time limit.",
    "OutOfMemory": "It ran out of memory.",
    "BlockMaxError": "Its block has too many errors.",
    "BlockFreeAction": "Its block is being freed.",
}

# The limit codes: who sets the limit, which kind, on what.
_LIMIT = re.compile(
    r"^(?:(?P<scope>Assoc|QOS)(?P<kind>Grp|Max|Min)|(?P<account>Max))"
    r"(?P<what>Cpu|CPU|GRES|Mem(?:ory)?|Node|Billing|Energy|License|BB|Unknown|Wall|Jobs|SubmitJobs?|Job)"
    r"(?P<rest>\w*)$"
)
_RESOURCES = {"cpu": "CPUs", "gres": "GPUs", "mem": "memory", "memory": "memory", "node": "nodes",
              "billing": "billed resources", "energy": "energy", "license": "licenses",
              "bb": "burst-buffer space", "unknown": "resources", "wall": "wall time"}
_HOURS = {"cpu": "CPU-hours", "gres": "GPU-hours", "mem": "memory-hours", "memory": "memory-hours",
          "node": "node-hours", "billing": "billing-hours", "energy": "energy", "license": "license-hours",
          "bb": "burst-buffer hours", "unknown": "resource-hours"}
_PER = {"PerJob": "one job", "PerNode": "one node", "PerUser": "one user", "PerAccount": "one project"}


def reason_text(reason: str, *, project: str = "", budget_gpu_hours: float | None = None) -> str:
    """Slurm's pending reason (as squeue prints it) in plain words; '' for none. `project`: the
    portal's name of the job's Slurm account, when it is a project (portal.projects), which the
    words for its spent GPU-hour budget name."""
    reason = reason.strip()
    if not reason:
        return ""
    code = reason.split(",", 1)[0].strip()
    if project and code == "AssocGrpGRESMinutes":
        budget = "" if budget_gpu_hours is None else f" {budget_gpu_hours:g}"
        return (f"Project {project} has used its{budget} GPU-hours; ask an admin or pick another project "
                "(cancel it and submit it under another).")
    words = _WORDS.get(reason) or _WORDS.get(code) or _limit_text(code)
    if words is None:
        return f"Slurm says “{reason}”, a reason the portal has no plain words for."
    # Keep the scheduler's detail ('UnavailableNodes:gpu-node1'): it names what to ask about.
    detail = reason[len(code):].lstrip(", ").strip()
    return f"{words} ({detail})" if detail and reason not in _WORDS else words


def _limit_text(code: str) -> str | None:
    match = _LIMIT.match(code)
    if match is None:
        return None
    what, rest = match["what"].lower(), match["rest"]
    whose = "your project (Slurm account)" if match["scope"] == "Assoc" else "its quality of service (QOS)"
    kind = match["kind"] or "Max"
    # Max*PerAccount: a QOS's limit for each project; Assoc*Max: for each user of the project.
    default = "one user" if match["scope"] == "Assoc" and what in {"jobs", "submitjob"} else "one job"
    per = "one project" if match["account"] else next((w for key, w in _PER.items() if key in rest), default)
    if what in {"jobs", "job", "submitjob", "submitjobs"}:
        held = "queued or running" if "submit" in what else "running"
        if kind == "Grp":
            return f"The jobs of {whose} are as many as it may have {held} at once; it waits for some to end."
        who = "Your project has" if per == "one project" else "You have"
        return f"{who} as many jobs {held} as {whose} allows {per}; it waits for one of them to end."
    if what == "wall":
        if kind == "Grp":
            return f"The running jobs of {whose} already hold all the wall time it may use at once."
        return f"Its time limit is longer than {whose} allows: cancel it and ask for less time."
    resource = _RESOURCES.get(what, "resources")
    hours = _HOURS.get(what, resource)
    if kind == "Min":
        return f"It asks for fewer {resource} than {whose} requires of a job."
    if kind == "Grp":
        if "RunMinutes" in rest:
            return (f"The running jobs of {whose} already hold as many {hours} as it may have committed "
                    "at once; it starts as they finish.")
        if "Minutes" in rest:
            return (f"{whose[0].upper()}{whose[1:]} has used up its budget of {hours}: it will not start "
                    "until an administrator raises the budget. Ask one, or cancel it and submit it under "
                    "another project.")
        return (f"The jobs of {whose} already use all the {resource} it may use at once; it starts when "
                "some of them end.")
    if "Minutes" in rest:
        return f"It asks for more {hours} than {whose} allows {per}: cancel it and ask for less."
    if per in {"one user", "one project"}:
        mine = "your project's" if per == "one project" else "your"
        return (f"With {mine} other jobs it would use more {resource} than {whose} allows {per}; it starts "
                "when some of them end.")
    return f"It asks for more {resource} than {whose} allows {per}: cancel it and ask for fewer."
