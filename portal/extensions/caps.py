"""The walltime cap an extension may reach: the one place the extension reads it, from the policy."""

from portal.accounts.models import User
from portal.policy.services import policy_current, user_groups


def walltime_cap_minutes(*, user: User, partition: str, cluster: str) -> int:
    """The most total time (minutes) a session or job of `user` on `partition` of `cluster` may have:
    the user's groups' walltime maximum there, within the partition's own limit (capped by the site's
    maximum), which Slurm would not enforce on an operator's update."""
    policy = policy_current().on(cluster)
    hours = policy.rules_for(user_groups(user)).max_hours
    if (rules := policy.partitions.get(partition)) is not None:
        hours = min(hours, rules.max_hours)
    return int(hours * 60)
