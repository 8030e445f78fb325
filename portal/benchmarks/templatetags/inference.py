"""The "Benchmark inference of this model" link on a training job's page."""

from typing import Any
from urllib.parse import urlencode

from django import template
from django.urls import reverse

from portal.core.errors import InvalidInput
from portal.jobs.models import Job, JobState
from portal.jobs.services.prepare import job_logdir, unix_account

register = template.Library()

# pytorch-train's default script: it saves the network inference-benchmark's mnist-cnn loads.
DEFAULT_SCRIPT = "templates/mnist_ddp.py"


@register.inclusion_tag("benchmarks/_inference_link.html", takes_context=True)
def inference_link(context: dict[str, Any], job: Job) -> dict[str, Any]:
    """The composer of the inference-benchmark template, filled with the checkpoint a completed
    pytorch-train job saved (model.pt in its TensorBoard folder); nothing for other jobs."""
    parameters = job.parameters or {}
    if (job.template != "pytorch-train" or parameters.get("smoke") or job.state != JobState.COMPLETED
            or job.user_id != context["request"].user.pk):
        return {"href": ""}
    try:
        home = unix_account(job.user.username).pw_dir
    except InvalidInput:
        return {"href": ""}
    query = {
        "model": "mnist-cnn" if parameters.get("entrypoint", DEFAULT_SCRIPT) == DEFAULT_SCRIPT else "custom",
        "checkpoint": f"{job_logdir(home=home, job_uuid=job.uuid)}/model.pt",
    }
    return {"href": f"{reverse('jobs:compose', args=['inference-benchmark'])}?{urlencode(query)}"}
