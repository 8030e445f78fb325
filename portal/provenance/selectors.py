"""Reading provenance records: one job's (its owner only), and two side by side."""

from dataclasses import dataclass
from typing import Any

from portal.accounts.models import User
from portal.provenance.models import Provenance


def provenance_get(*, user: User, job_id: int) -> Provenance | None:
    """The record of one of the user's own jobs; None for another user's (callers answer 404)."""
    return Provenance.objects.select_related("job").filter(job_id=job_id, job__user=user).first()


@dataclass(frozen=True)
class Difference:
    field: str
    this: Any
    other: Any
    same: bool


def provenance_facts(record: Provenance) -> dict[str, Any]:
    """What made the run, field by field (what a rerun must match); run-time facts (times, ids,
    node) are not among them."""
    captured = record.captured or {}
    return {
        "template": record.template,
        "parameters": record.parameters,
        "resources": record.resources,
        "image.reference": record.image_reference,
        "image.digest": record.image_digest,
        "environment.name": record.environment,
        "environment.hash": record.environment_hash,
        "code": [{key: item.get(key) for key in ("path", "commit", "remote", "diff")}
                 for item in captured.get("code", [])],
        "inputs": [{key: item.get(key) for key in ("path", "kind", "size", "sha256")}
                   for item in captured.get("inputs", [])],
        "gpu": captured.get("gpu", {}),
    }


def provenance_diff(this: Provenance, other: Provenance) -> list[Difference]:
    """The two records field by field, each marked same or different."""
    mine, theirs = provenance_facts(this), provenance_facts(other)
    return [Difference(field=name, this=mine[name], other=theirs[name], same=mine[name] == theirs[name])
            for name in mine]
