"""Short-lived Slurm JSON Web Tokens per user, for slurmrestd (slurm/rest.py).

A token comes from the one narrow privileged path: deploy/libexec/slurm-token, run through sudo as
root (`scontrol token` signs for any user, so it needs root or SlurmUser), which issues one only
for a member of gpuportal-users or the portal's own account, for at most 15 minutes. Each is kept
in this process until `renew_before` seconds before it expires; the portal never holds a
long-lived token, nor one of an administrator.
"""

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slurm.errors import SlurmUnreachable
from slurm.runner import SlurmRunner

MAX_LIFESPAN_SECONDS = 900  # deploy/libexec/slurm-token's cap


@dataclass
class TokenCache:
    # argv that prints a token for `<user> <lifespan>` appended, e.g. sudo -n .../slurm-token.
    command: Sequence[str]
    lifespan: int = 600
    renew_before: int = 120
    timeout: float = 20.0
    clock: Callable[[], float] = time.monotonic
    _tokens: dict[str, tuple[str, float]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.renew_before < self.lifespan <= MAX_LIFESPAN_SECONDS:
            raise ValueError(f"need 0 < renew_before < lifespan <= {MAX_LIFESPAN_SECONDS} s")
        if not self.command:
            raise ValueError("no token command")

    def token(self, user: str) -> str:
        """The cached token of `user`, or a new one when it has less than `renew_before` s left."""
        now = self.clock()
        with self._lock:
            cached = self._tokens.get(user)
            if cached is not None and cached[1] - self.renew_before > now:
                return cached[0]
        # Outside the lock: a slow `scontrol token` for one user holds up nobody else.
        token = self._issue(user)
        with self._lock:
            self._tokens[user] = (token, now + self.lifespan)
        return token

    def forget(self, user: str) -> None:
        with self._lock:
            self._tokens.pop(user, None)

    def _issue(self, user: str) -> str:
        program = Path(self.command[0])
        runner = SlurmRunner(bin_dir=program.parent, timeout=self.timeout)
        output = runner.run(program.name, [*self.command[1:], user, str(self.lifespan)]).strip()
        if not output or len(output.split()) != 1:
            raise SlurmUnreachable(f"the token command printed no token for {user}")
        return output
