"""Writes for batch jobs, by concern: `prepare` (validate + render), `submission` (store, claim,
sbatch, cancel), `sync` (the state machine fed by the poll cycle) and `logs` (the job's own files).
The UI, the API, Celery and the poll cycle all call these."""
