"""A 1,000-task sweep submitted as one Slurm job array vs. the same work as separate jobs, same run.

  /var/lib/gpuportal/venv/bin/python bench/sweep_submit.py [--rounds 3] [--separate 10]

Times what the portal's worker and request do for a sweep (portal.sweeps): validation of every
task (job_prepare once, the template's argument rule per task, the group's limits), rendering of
the one array script, and its one real `sbatch --array=0-999%4` as alice. Against it, in the same
run: one plain job (job_prepare + its sbatch), and `--separate` separate per-task jobs extrapolated
to 1,000 (what a portal without arrays must do). Every Slurm job is cancelled right after it is
submitted; the sbatch calls are counted. Target from issue 21: <= 1 s, with one sbatch.
Django runs on the benchmarks' own database (bench_jobs, bench/jobs_common.py).
"""

import argparse
import statistics
import time

from jobs_common import setup


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--separate", type=int, default=10)
    args = parser.parse_args()
    setup()
    from portal.accounts.models import User
    from portal.cluster.services import cluster_refresh
    from portal.jobs.services.prepare import job_prepare
    from portal.sweeps.services import SweepSpec, sweep_prepare, sweep_script
    from slurm.adapter import Slurm
    from slurm.runner import SlurmRunner

    slurm = Slurm.from_settings()
    cluster_refresh(slurm=slurm)  # the partitions job_prepare checks against
    alice, _ = User.objects.get_or_create(username="alice")
    calls: list[str] = []
    run = SlurmRunner.run

    def counted(self, command, argv, **kwargs):
        calls.append(command)
        return run(self, command, argv, **kwargs)

    SlurmRunner.run = counted
    base = {"args": "--epochs 1 --train-limit 300", "gpus": 1, "time_limit": 10}
    spec = SweepSpec(template="pytorch-train", parameters=base, method="grid",
                     space={"lr": [round(0.001 * (i + 1), 3) for i in range(10)],
                            "batch-size": [16 * (i + 1) for i in range(10)], "seed": list(range(10))},
                     concurrency=4, objective="accuracy/test", direction="max", name="bench-sweep")

    def submit(script: str) -> str:
        return slurm.submit(script=script, user="alice", comment="gpuportal:bench")

    def cancel(job_id: str) -> None:
        slurm.cancel(job_id=job_id, user="alice")

    sweeps, prepares, sbatches, counts = [], [], [], []
    for _ in range(args.rounds):
        calls.clear()
        start = time.perf_counter()
        draft = sweep_prepare(user=alice, spec=spec)
        script = sweep_script(draft=draft, sweep_id=0)
        prepared = time.perf_counter()
        job_id = submit(script)
        done = time.perf_counter()
        counts.append(calls.count("sbatch"))
        cancel(job_id)
        assert len(draft.tasks) == 1000 and "#SBATCH --array=0-999%4" in script
        sweeps.append(done - start)
        prepares.append(prepared - start)
        sbatches.append(done - prepared)

    def plain(args_text: str) -> float:
        start = time.perf_counter()
        job = job_prepare(user=alice, template="pytorch-train", parameters={**base, "args": args_text},
                          name="bench-plain")
        job_id = submit(job.script)
        took = time.perf_counter() - start
        cancel(job_id)
        return took

    one = [plain(base["args"]) for _ in range(args.rounds)]
    separate = [plain(f"{base['args']} --lr 0.01 --batch-size {16 * (i + 1)} --seed {i}")
                for i in range(args.separate)]
    per_job = statistics.median(separate)

    print(f"1,000-task sweep, one array job (median of {args.rounds}, sbatch calls per sweep: {counts}):")
    print(f"  validate 1,000 tasks + render      {statistics.median(prepares) * 1000:8.0f} ms")
    print(f"  the one sbatch --array=0-999%4     {statistics.median(sbatches) * 1000:8.0f} ms")
    print(f"  total                              {statistics.median(sweeps) * 1000:8.0f} ms   "
          f"(target <= 1000 ms, one sbatch)")
    print("Baselines, same run:")
    print(f"  one plain job (prepare + sbatch)   {statistics.median(one) * 1000:8.0f} ms")
    print(f"  1,000 separate jobs                {per_job * 1000:8.1f} s     "
          f"(median of {args.separate} x 1,000: {per_job * 1000:.0f} ms each, 1,000 sbatch calls)")


if __name__ == "__main__":
    main()
