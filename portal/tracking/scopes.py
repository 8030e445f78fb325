"""What a job's or session's tracking token may do on /api/2.0/mlflow/. It reads what its owner may
read, so the MLflow client finds experiments and runs by name. It writes only in its own lane: it
creates runs in its own experiment (and that experiment itself, which the client makes on first
use), and writes the runs it created and the job's own run. Renaming or deleting experiments, and
writing or deleting any other run of its owner's, is refused (PERMISSION_DENIED): a job's token
lives as long as the job, and must not be able to wreck the rest of its owner's tracking."""

from dataclasses import dataclass

from portal.core.errors import Forbidden
from portal.jobs.models import Job
from portal.sessions.models import Session
from portal.tracking.models import Run


@dataclass(frozen=True)
class TrackingGrant:
    """A valid tracking token: the job or session it names, and the names of its own experiments."""

    job: Job | None = None
    session: Session | None = None
    experiments: frozenset[str] = frozenset()

    @property
    def what(self) -> str:
        return "job's" if self.job is not None else "session's"

    def experiment_check(self, name: str) -> None:
        """Forbidden unless `name` is one of its own experiments."""
        if name not in self.experiments:
            raise Forbidden(f"This {self.what} tracking token may only use the experiment(s) "
                            f"{', '.join(sorted(self.experiments))}; use a personal API token for "
                            f"experiment '{name}'.", code="token_scope")

    def run_check(self, run: Run) -> None:
        """Forbidden unless the run is the job's or session's own (it made it, or the portal made it
        for the job)."""
        if self.job is not None:
            mine = run.job_id == self.job.pk
        else:
            mine = self.session is not None and run.session_id == self.session.pk
        if not mine:
            raise Forbidden(f"This {self.what} tracking token may only write its own runs, not run "
                            f"{run.run_id}.", code="token_scope")

    def refuse(self, action: str) -> Forbidden:
        return Forbidden(f"This {self.what} tracking token may not {action}; use a personal API token.",
                         code="token_scope")
