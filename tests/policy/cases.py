"""One table of over-limit requests that the form, the REST API and the hub API (the spawner's own
check) all refuse with the same field and message. Shaped for the local cluster (gpu and debug, two
nodes of 4 GPUs, debug limited to 1 h) and the group limits of `POLICY_GROUPS` below."""

POLICY_GROUPS = {
    "*": {"max_gpus": 2, "max_hours": 8, "max_sessions": 1},
    "portal-users": {"max_gpus": 4, "max_hours": 24, "max_sessions": 3},
}
PROFILE = {"name": "one-gpu", "title": "1 GPU · 8 h", "partition": "gpu", "gpus": 1, "hours": 8}

# (options asked for, field, message)
OVER_LIMITS = [
    ({"gpus": 5}, "gpus", "Partition gpu has at most 4 GPUs per node."),
    ({"gpus": -1}, "gpus", "The number of GPUs cannot be negative."),
    ({"gpus": 3, "nodes": 2}, "gpus", "Your group's limit is 4 GPUs across your sessions; 0 are in use."),
    ({"partition": "nope"}, "partition", "Unknown partition 'nope'; choose one of: debug, gpu."),
    ({"partition": "debug", "hours": 2}, "hours", "Partition debug allows at most 1 h."),
    ({"hours": 30}, "hours", "Your group allows at most 24 h per session."),
    ({"hours": 0}, "hours", "The session time must be more than 0 hours."),
    ({"nodes": 3}, "nodes", "Partition gpu allows 1 to 2 node(s)."),
    ({"profile": "huge"}, "profile", "Unknown profile 'huge'; yours: one-gpu."),
    ({"profile": "one-gpu", "gpus": 5}, "gpus", "Partition gpu has at most 4 GPUs per node."),
]
