"""CSV cells a spreadsheet shows as text and never runs as a formula (names and Slurm reasons come
from users and the cluster)."""

from datetime import datetime


def csv_cell(value: object) -> str:
    text = "" if value is None else value.isoformat() if isinstance(value, datetime) else str(value)
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
