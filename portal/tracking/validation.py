"""MLflow's input rules (mlflow/utils/validation.py of mlflow 3.x): key characters and lengths, value
lengths, batch sizes; and reading request fields as MLflow's handlers do. Every refusal is
InvalidInput naming the field, with MLflow's own wording (the API answers INVALID_PARAMETER_VALUE)."""

import json
import math
import posixpath
import re
from typing import Any

from portal.core.errors import InvalidInput

MAX_PARAMS_TAGS_PER_BATCH = 100
MAX_METRICS_PER_BATCH = 1000
MAX_ENTITIES_PER_BATCH = 1000
MAX_PARAM_VAL_LENGTH = 6000
MAX_TAG_VAL_LENGTH = 8000
MAX_EXPERIMENT_NAME_LENGTH = 500
MAX_EXPERIMENT_TAG_VAL_LENGTH = 20000
MAX_ENTITY_KEY_LENGTH = 250
MAX_RUN_NAME_LENGTH = 250
SEARCH_MAX_RESULTS_DEFAULT = 1000
SEARCH_MAX_RESULTS_THRESHOLD = 50000
INT64_MAX = 2**63 - 1
FLOAT_MAX = 1.7976931348623157e308  # what +-Infinity is stored as, as in MLflow's SQL store

_NAME = re.compile(r"^[/\w.\- :]*$")
_RUN_ID = re.compile(r"^[a-zA-Z0-9][\w\-]{0,255}$")
_EXPERIMENT_ID = re.compile(r"^[0-9]{1,18}$")
_BAD_CHARACTERS = ("Names may only contain alphanumerics, underscores (_), dashes (-), periods (.), "
                   "spaces ( ), colon(:) and slashes (/).")


def invalid(field: str, message: str) -> InvalidInput:
    return InvalidInput({field: [message]}, message)


def invalid_value(field: str, value: Any, reason: str = "") -> InvalidInput:
    shown = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    if isinstance(value, str) and len(value) > 250:
        shown = json.dumps(value[:250] + "...")
    tail = f": {reason}" if reason else "."
    return invalid(field, f"Invalid value {shown} for parameter '{field}' supplied{tail}")


def missing(field: str) -> InvalidInput:
    return invalid(field, f"Missing value for required parameter '{field}'. See the API docs for "
                          "more information about request parameters.")


def key_check(field: str, key: Any, what: str) -> str:
    """A metric, param or tag key: MLflow's characters, no path tricks, at most 250 characters."""
    if key is None or key == "":
        raise missing(field)
    if not isinstance(key, str):
        raise invalid_value(field, key, "Expected a string.")
    if len(key) > MAX_ENTITY_KEY_LENGTH:
        raise invalid(field, f"{what} '{key[:250]}' had length {len(key)}, which exceeded length "
                             f"limit of {MAX_ENTITY_KEY_LENGTH}")
    if not _NAME.match(key):
        raise invalid_value(field, key, _BAD_CHARACTERS)
    normal = posixpath.normpath(key)
    if normal != key or normal == "." or normal.startswith(("..", "/")):
        raise invalid_value(field, key, "Names may be treated as files in certain cases, and must not "
                                        f"resolve to other names when treated as such. This name would "
                                        f"resolve to '{normal}'")
    return key


def text_check(field: str, value: Any, what: str, limit: int) -> str:
    """A param or tag value: a string (numbers as MLflow's client sends them) within `limit`."""
    if value is None:
        value = ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise invalid_value(field, value, "Expected a string.")
    value = str(value)
    if len(value) > limit:
        raise invalid(field, f"{what} '{value[:250]}' had length {len(value)}, which exceeded length "
                             f"limit of {limit}")
    return value


def metric_value(field: str, value: Any) -> float:
    """A double as protobuf's JSON has it: a number or "NaN" / "Infinity" / "-Infinity". NaN stays
    NaN; +-Infinity becomes +-max float, as MLflow's own server stores them."""
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid_value(field, value, "Please specify value as a valid double (64-bit floating point)")
    value = float(value)
    if math.isinf(value):
        return FLOAT_MAX if value > 0 else -FLOAT_MAX
    return value


def int64(field: str, value: Any, *, required: bool = False, default: int | None = None,
          minimum: int = -INT64_MAX - 1) -> int | None:
    """An int64 field: a JSON number or a string of digits (protobuf's JSON writes int64 as strings)."""
    if value is None or value == "":
        if required:
            raise missing(field)
        return default
    if ((isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,19}", value))
            or (isinstance(value, float) and value.is_integer())):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= INT64_MAX:
        raise invalid_value(field, value, f"Parameter '{field}' must be an integer in range.")
    return value


def string(data: dict[str, Any], field: str, *, required: bool = False, limit: int | None = None) -> str:
    value = data.get(field)
    if value is None or value == "":
        if required:
            raise missing(field)
        return ""
    if not isinstance(value, str):
        raise invalid_value(field, value, "Expected a string.")
    if limit is not None and len(value) > limit:
        raise invalid(field, f"'{field}' exceeds the maximum length of {limit} characters")
    return value


def string_list(data: dict[str, Any], field: str) -> list[str]:
    value = data.get(field)
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise invalid_value(field, value, "Expected a list of strings.")
    return value


def object_list(data: dict[str, Any], field: str) -> list[dict[str, Any]]:
    value = data.get(field)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise invalid_value(field, value, "Expected a list of objects.")
    return value


def run_id_of(data: dict[str, Any]) -> str:
    """`run_id`, or the deprecated `run_uuid` the client still sends beside it."""
    run_id = data.get("run_id") or data.get("run_uuid")
    if run_id is None or run_id == "":
        raise missing("run_id")
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
        raise invalid_value("run_id", run_id, "Invalid run ID.")
    return run_id


def experiment_id_of(value: Any, field: str = "experiment_id") -> int:
    """MLflow's experiment ids are strings; the portal's are its primary keys ("0": the caller's
    Default experiment, which services resolve)."""
    if value is None or value == "":
        raise missing(field)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not _EXPERIMENT_ID.match(value):
        raise invalid_value(field, value, "Invalid experiment ID.")
    return int(value)


def max_results(data: dict[str, Any], *, default: int = SEARCH_MAX_RESULTS_DEFAULT,
                limit: int = SEARCH_MAX_RESULTS_THRESHOLD) -> int:
    value = int64("max_results", data.get("max_results"), default=default) or 0
    if not 1 <= value <= limit:
        raise invalid("max_results", f"Invalid value {value} for parameter 'max_results' supplied. It "
                                     f"must be at most {limit}, and at least 1.")
    return value
