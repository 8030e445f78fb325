"""MLflow's search grammar (mlflow/utils/search_utils.py), parsed without eval into plain clauses:

    metrics.accuracy > 0.9 and params.lr = '0.01' and tags.`mlflow.runName` LIKE 'sweep-%'

Clauses joined by AND (any case); keys quoted with backticks or double quotes, or bare with dots
(tags.mlflow.source.type: everything after the first dot); `OR` is refused, as MLflow does. Also
order_by terms ("metrics.loss DESC") and opaque, checked page tokens."""

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from portal.tracking.validation import invalid

# The entity types MLflow names, and their aliases.
_KINDS = {"metric": "metric", "metrics": "metric", "param": "param", "params": "param",
          "parameter": "param", "parameters": "param", "tag": "tag", "tags": "tag",
          "attribute": "attribute", "attributes": "attribute", "attr": "attribute", "run": "attribute",
          "dataset": "dataset", "datasets": "dataset"}
NUMERIC_OPS = (">", ">=", "<", "<=", "=", "!=")
STRING_OPS = ("=", "!=", "LIKE", "ILIKE")
SET_OPS = ("IN", "NOT IN")
RUN_STRING_ATTRIBUTES = ("run_id", "run_name", "status", "artifact_uri", "user_id")
RUN_NUMERIC_ATTRIBUTES = ("start_time", "end_time", "created")
EXPERIMENT_STRING_ATTRIBUTES = ("name",)
EXPERIMENT_NUMERIC_ATTRIBUTES = ("creation_time", "last_update_time")

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<backtick>`[^`]*`)
  | (?P<dquote>"[^"]*")
  | (?P<squote>'[^']*')
  | (?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.]))
  | (?P<op>>=|<=|!=|<>|=|>|<)
  | (?P<punct>[(),])
  | (?P<word>[A-Za-z_][\w.\-/:]*)
""", re.VERBOSE)


@dataclass(frozen=True)
class Clause:
    kind: str  # metric, param, tag or attribute
    key: str
    op: str  # one of NUMERIC_OPS, STRING_OPS or SET_OPS
    value: Any  # float for numbers, str for strings, tuple[str, ...] for IN


@dataclass(frozen=True)
class OrderTerm:
    kind: str
    key: str
    ascending: bool


def _tokens(text: str, field: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise invalid(field, f"Invalid {field} '{text}'. Could not parse at character {position + 1}: "
                                 f"'{text[position:position + 20]}'")
        if match.lastgroup != "space":
            tokens.append((match.lastgroup or "", match.group()))
        position = match.end()
    return tokens


def _identifier(tokens: list[tuple[str, str]], at: int, field: str, text: str) -> tuple[str, str, int]:
    """(kind, key, next position): `metrics.acc`, metrics.`my key`, metrics."my key", tags.a.b; a
    bare name is an attribute (status), as in MLflow."""
    kind_of, word = tokens[at] if at < len(tokens) else ("", "")
    if kind_of != "word":
        raise invalid(field, f"Invalid identifier '{word}' in {field} '{text}': columns are named "
                             "'metrics.<key>', 'params.<key>', 'tags.<key>' or 'attributes.<key>'.")
    if "." not in word:
        return "attribute", word, at + 1
    prefix, _, key = word.partition(".")
    kind = _KINDS.get(prefix.lower())
    if kind is None:
        raise invalid(field, f"Invalid entity type '{prefix}' in {field} '{text}'. Valid values are "
                             "['metric', 'parameter', 'tag', 'attribute'].")
    if kind == "dataset":
        raise invalid(field, f"Filtering on datasets is not supported by this server ('{word}').")
    at += 1
    if not key:
        if at >= len(tokens) or tokens[at][0] not in ("backtick", "dquote"):
            raise invalid(field, f"Invalid identifier '{word}' in {field} '{text}': a key must follow.")
        key = tokens[at][1][1:-1]
        at += 1
    if not key:
        raise invalid(field, f"Invalid identifier '{word}' in {field} '{text}': the key is empty.")
    return kind, key, at


def _string_value(token: tuple[str, str], field: str, text: str) -> str:
    kind, value = token
    if kind not in ("squote", "dquote"):
        raise invalid(field, f"Invalid {field} '{text}': expected a quoted string, got '{value}'.")
    return value[1:-1]


def parse_filter(text: str, *, field: str = "filter",
                 string_attributes: tuple[str, ...] = RUN_STRING_ATTRIBUTES,
                 numeric_attributes: tuple[str, ...] = RUN_NUMERIC_ATTRIBUTES,
                 kinds: tuple[str, ...] = ("metric", "param", "tag", "attribute")) -> list[Clause]:
    """The clauses of a filter string ("" is none); InvalidInput naming `field` for anything else."""
    tokens = _tokens(text or "", field)
    clauses: list[Clause] = []
    at = 0
    while at < len(tokens):
        if clauses:
            word = tokens[at][1].upper() if tokens[at][0] == "word" else ""
            if word == "OR":
                raise invalid(field, f"Invalid clause(s) in {field} string: 'OR' is not supported; "
                                     "join clauses with AND.")
            if word != "AND":
                raise invalid(field, f"Invalid {field} '{text}': expected AND, got '{tokens[at][1]}'.")
            at += 1
        kind, key, at = _identifier(tokens, at, field, text)
        if kind not in kinds:
            raise invalid(field, f"Invalid entity type '{kind}' in {field} '{text}'.")
        if at >= len(tokens):
            raise invalid(field, f"Invalid {field} '{text}': a comparator must follow '{key}'.")
        op_kind, op = tokens[at]
        op = op.upper()
        at += 1
        if op_kind == "word" and op == "NOT" and at < len(tokens) and tokens[at][1].upper() == "IN":
            op, at = "NOT IN", at + 1
        if op == "<>":
            op = "!="
        if at >= len(tokens):
            raise invalid(field, f"Invalid {field} '{text}': a value must follow '{op}'.")
        numeric = kind == "metric" or (kind == "attribute" and key in numeric_attributes)
        if kind == "attribute" and key not in string_attributes + numeric_attributes:
            raise invalid(field, f"Invalid attribute key '{key}' specified. Valid keys are "
                                 f"{list(string_attributes + numeric_attributes)}")
        allowed = NUMERIC_OPS if numeric else STRING_OPS + (SET_OPS if kind == "attribute" else ())
        if op not in allowed:
            raise invalid(field, f"Invalid comparator '{op}' for {kind} '{key}'. Only {list(allowed)} "
                                 "are allowed.")
        value: Any
        if op in SET_OPS:
            value, at = _value_list(tokens, at, field, text)
        elif numeric:
            number_kind, number = tokens[at]
            if number_kind != "number":
                raise invalid(field, f"Expected numeric value type for {kind} '{key}'. Found {number}")
            value, at = float(number), at + 1
        else:
            value, at = _string_value(tokens[at], field, text), at + 1
        clauses.append(Clause(kind=kind, key=key, op=op, value=value))
    return clauses


def _value_list(tokens: list[tuple[str, str]], at: int, field: str, text: str) -> tuple[tuple[str, ...], int]:
    if tokens[at] != ("punct", "("):
        raise invalid(field, f"Invalid {field} '{text}': IN takes a list in parentheses.")
    values, at = [], at + 1
    while True:
        if at >= len(tokens):
            raise invalid(field, f"Invalid {field} '{text}': the list is not closed.")
        values.append(_string_value(tokens[at], field, text))
        at += 1
        if at < len(tokens) and tokens[at] == ("punct", ","):
            at += 1
            continue
        if at < len(tokens) and tokens[at] == ("punct", ")"):
            return tuple(values), at + 1
        raise invalid(field, f"Invalid {field} '{text}': the list is not closed.")


def parse_order_by(terms: list[str], *, field: str = "order_by",
                   attributes: tuple[str, ...] = RUN_STRING_ATTRIBUTES + RUN_NUMERIC_ATTRIBUTES,
                   kinds: tuple[str, ...] = ("metric", "param", "tag", "attribute")) -> list[OrderTerm]:
    """order_by terms: an identifier, then ASC or DESC (default ASC)."""
    parsed = []
    for text in terms:
        tokens = _tokens(text, field)
        kind, key, at = _identifier(tokens, 0, field, text)
        ascending = True
        if at < len(tokens) and tokens[at][0] == "word" and tokens[at][1].upper() in ("ASC", "DESC"):
            ascending, at = tokens[at][1].upper() == "ASC", at + 1
        if at != len(tokens) or kind not in kinds or (kind == "attribute" and key not in attributes):
            raise invalid(field, f"Invalid order_by clause '{text}'.")
        parsed.append(OrderTerm(kind=kind, key=key, ascending=ascending))
    return parsed


def _token_encode(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode()


def _token_decode(token: str, key: str) -> Any:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise invalid("page_token", "Invalid page_token: could not base64-decode.") from None
    if not isinstance(data, dict) or key not in data:
        raise invalid("page_token", f"Invalid page_token: decoded value={data!r}.")
    return data[key]


def _int(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and abs(value) < 2**63


def page_token_encode(offset: int) -> str:
    return _token_encode({"offset": offset})


def page_token_offset(token: str | None) -> int:
    """The offset a page token this server gave stands for; InvalidInput for anything else."""
    if not token:
        return 0
    offset = _token_decode(token, "offset")
    if not _int(offset) or not 0 <= offset <= 10**9:
        raise invalid("page_token", f"Invalid page_token: offset={offset!r}.")
    return offset


def history_token_encode(step: int, timestamp: int, pk: int) -> str:
    return _token_encode({"after": [step, timestamp, pk]})


def history_token_after(token: str | None) -> tuple[int, int, int] | None:
    """The (step, timestamp, id) a metric history page token continues after."""
    if not token:
        return None
    after = _token_decode(token, "after")
    if not isinstance(after, list) or len(after) != 3 or not all(_int(value) for value in after):
        raise invalid("page_token", f"Invalid page_token: after={after!r}.")
    return after[0], after[1], after[2]
