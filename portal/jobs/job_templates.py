"""Declarative job templates: `templates/jobs/<slug>/template.toml` + `script.sh.j2`.

Admins add a template by dropping a folder in. Parameters are validated (type, bounds, choices,
pattern) before rendering: a value has exactly the JSON type its schema gives (a form's text is
parsed first, `Parameter.from_form`), and a `path` must lie under the user's own folders
(portal.core.paths). The Jinja environment quotes every `{{ value }}` with `shlex.quote` (its
`finalize` hook), so a template cannot print an unquoted user value even by mistake. The `#SBATCH`
header is generated here, never by a template, so it always comes first and says exactly what the
form allowed.
"""

import logging
import math
import re
import shlex
import tomllib
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from django.conf import settings

from portal.core.fields import number_from_text
from portal.core.paths import MAX_LENGTH as PATH_MAX_LENGTH
from portal.core.paths import path_shape_problem
from portal.environments.models import NAME_PATTERN as ENVIRONMENT_NAME_PATTERN

logger = logging.getLogger(__name__)

SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
# Safe by default: a string parameter refuses shell metacharacters and newlines unless its
# template gives a pattern of its own (values are quoted anyway; this is for clear 400s).
DEFAULT_STRING_PATTERN = r"^[A-Za-z0-9._,:=+/@ -]*$"
_SBATCH_LINE = re.compile(r"^\s*#\s*SBATCH", re.IGNORECASE | re.MULTILINE)
# Parameters every template gets; a template may not redefine them.
BUILTIN_PARAMETERS = ("partition", "time_limit", "environment", "modules", "inputs")
# The bound of a number parameter whose template names none: fits a 32-bit int, and any shell.
NUMBER_LIMIT = 2**31 - 1
TYPES = ("integer", "number", "boolean", "string", "choice", "text", "arguments", "path", "paths")
# Types whose value is text: "" is a value of theirs, not "not given".
TEXT_TYPES = ("string", "choice", "text", "arguments", "path")
# A `paths` value's length: the inputs a job records (each hashed within the job's bounds).
PATHS_MAX = 100


class TemplateError(Exception):
    """A template folder is broken; the message says which file and what is wrong."""


class ParameterInvalid(ValueError):
    """A parameter value was refused; the message is fit to show a user."""


class ShellWords(str):
    """Text already quoted for the shell (made only by the `argv` filter here)."""

    __slots__ = ()


def _quote(value: Any) -> str:
    if isinstance(value, ShellWords):
        return value
    if isinstance(value, bool):
        return "1" if value else "0"
    return shlex.quote(str(value))


def _argv(values: Iterable[Any]) -> ShellWords:
    """`{{ words|argv }}`: a list of words, each quoted on its own."""
    return ShellWords(" ".join(shlex.quote(str(value)) for value in values))


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str
    label: str = ""
    help: str = ""
    default: Any = None
    required: bool = False
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    pattern: str | None = None
    max_length: int = 200

    @property
    def title(self) -> str:
        return self.label or self.name.replace("_", " ").capitalize()

    def clean(self, raw: Any) -> Any:
        """The validated value of `raw`, a JSON value (None means "not given"), or ParameterInvalid."""
        if raw is None:
            if self.required and self.default is None:
                raise ParameterInvalid("This parameter is required.")
            raw = self.default
            if raw is None:
                return None
        return getattr(self, f"_clean_{self.type}")(raw)

    def from_form(self, text: str | None) -> Any:
        """The JSON value a form field's text stands for (a checkbox: "on" or absent). Text that does
        not parse stays text, which `clean` refuses with its usual message."""
        if self.type == "boolean":
            return text == "on"
        if self.type == "paths":  # one a line
            return [line.strip() for line in (text or "").splitlines() if line.strip()]
        if self.type in TEXT_TYPES:
            return text or ""
        return number_from_text(text, int if self.type == "integer" else float) if text else None

    @property
    def lower(self) -> float:
        """Every number is bounded, in the schema and here, even where a template names no bound."""
        return -NUMBER_LIMIT if self.minimum is None else self.minimum

    @property
    def upper(self) -> float:
        return NUMBER_LIMIT if self.maximum is None else self.maximum

    def _bounds(self, value: float) -> None:
        if value < self.lower:
            raise ParameterInvalid(f"Must be at least {self.lower:g}.")
        if value > self.upper:
            raise ParameterInvalid(f"Must be at most {self.upper:g}.")

    # bool is an int in Python, but true is no number in JSON.
    def _clean_integer(self, raw: Any) -> int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ParameterInvalid("Must be a whole number.")
        self._bounds(raw)
        return raw

    def _clean_number(self, raw: Any) -> float:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise ParameterInvalid("Must be a number.")
        if isinstance(raw, float) and not math.isfinite(raw):
            raise ParameterInvalid("Must be a finite number.")
        self._bounds(raw)
        return float(raw)

    def _clean_boolean(self, raw: Any) -> bool:
        if not isinstance(raw, bool):
            raise ParameterInvalid("Must be true or false.")
        return raw

    def _text(self, raw: Any) -> str:
        if not isinstance(raw, str):
            raise ParameterInvalid("Must be text.")
        if len(raw) > self.max_length:
            raise ParameterInvalid(f"At most {self.max_length} characters.")
        if "\x00" in raw:
            raise ParameterInvalid("Must not contain NUL characters.")
        return raw

    def _clean_string(self, raw: Any) -> str:
        value = self._text(raw)
        if "\n" in value or "\r" in value:
            raise ParameterInvalid("Must be a single line.")
        if not re.fullmatch(self.pattern or DEFAULT_STRING_PATTERN, value):
            raise ParameterInvalid("Contains characters that are not allowed here "
                                   f"(allowed: {self.pattern or DEFAULT_STRING_PATTERN}).")
        if self.required and not value:
            raise ParameterInvalid("This parameter is required.")
        return value

    def _clean_choice(self, raw: Any) -> str:
        if not isinstance(raw, str) or raw not in self.choices:
            raise ParameterInvalid(f"Must be one of: {', '.join(self.choices)}.")
        return raw

    def _clean_text(self, raw: Any) -> str:
        value = self._text(raw).replace("\r\n", "\n")
        if _SBATCH_LINE.search(value):
            raise ParameterInvalid("#SBATCH lines are not allowed: resources come from the form.")
        if self.required and not value.strip():
            raise ParameterInvalid("This parameter is required.")
        return value

    def _clean_arguments(self, raw: Any) -> str:
        """One line of text, kept as given; the script splits it (`shell_split`)."""
        value = self._clean_string(raw) if self.pattern else self._text(raw)
        if "\n" in value or "\r" in value:
            raise ParameterInvalid("Must be a single line.")
        try:
            shlex.split(value)
        except ValueError as error:
            raise ParameterInvalid(f"Cannot split into arguments: {error}.") from None
        return value

    def _clean_path(self, raw: Any) -> str:
        """Its shape only: whether it lies under the user's folders is `path_problem`'s, with their
        home (`job_prepare`). Relative paths start at the home directory."""
        value = self._clean_string(raw)
        if value and (problem := path_shape_problem(value, relative=True)):
            raise ParameterInvalid(problem)
        return value

    def _clean_paths(self, raw: Any) -> list[str]:
        """A list of paths (the form's text, one a line: `from_form`), each as a `path`, once."""
        if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
            raise ParameterInvalid("Must be a list of paths.")
        if len(raw) > PATHS_MAX:
            raise ParameterInvalid(f"At most {PATHS_MAX} paths.")
        for item in raw:
            if problem := path_shape_problem(item, relative=True):
                raise ParameterInvalid(f"{item[:80]!r}: {problem}")
        return list(dict.fromkeys(raw))

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"title": self.title, "description": self.help}
        if self.type == "paths":
            schema.update(type="array", maxItems=PATHS_MAX,
                          items={"type": "string", "maxLength": PATH_MAX_LENGTH},
                          description=f"{self.help} (paths under your home directory, your scratch or the "
                                      "shared data; relative paths start at your home)".strip())
            return schema
        if self.type in ("integer", "number", "boolean"):
            schema["type"] = self.type
        elif self.type == "choice":
            schema.update(type="string", enum=list(self.choices))
        else:
            schema.update(type="string", maxLength=self.max_length)
        if self.type in ("string", "path"):
            schema["pattern"] = self.pattern or DEFAULT_STRING_PATTERN
        if self.type == "text":
            schema["contentMediaType"] = "text/x-shellscript"
        if self.type == "arguments":
            schema["description"] = f"{self.help} (split into arguments like a shell would)".strip()
        if self.type == "path":
            schema["description"] = (f"{self.help} (a path under your home directory, your scratch or the "
                                     "shared data; relative paths start at your home)").strip()
        if self.type in ("integer", "number"):
            schema.update(minimum=self.lower, maximum=self.upper)
        if self.default is not None:
            schema["default"] = self.default
        return schema


@dataclass(frozen=True)
class JobTemplate:
    slug: str
    name: str
    description: str
    parameters: tuple[Parameter, ...]
    # Where the Slurm resources come from: a parameter's name, or a fixed count.
    nodes: str | int = 1
    gpus_per_node: str | int = 0
    smoke_parameter: str | None = None
    # The parser (portal.benchmarks.parsers) for a benchmark template's stdout, e.g. "fio"; None: not one.
    benchmark: str | None = None
    # The software environment it runs in unless the user names one (its `environment` parameter's
    # default); where the site has no such environment, none.
    environment: str = ""
    # Paths the template always reads (relative ones from the user's home): the job records them
    # in its provenance, as it does its path parameters' and the user's `inputs`.
    inputs: tuple[str, ...] = ()
    directory: Path = field(default=Path(), compare=False)

    def parameter(self, name: str) -> Parameter | None:
        return next((p for p in self.parameters if p.name == name), None)

    def resource(self, values: Mapping[str, Any], which: str) -> int:
        source = getattr(self, which)
        return int(values[source]) if isinstance(source, str) else source

    def json_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {p.name: p.json_schema() for p in self.parameters},
            "required": [p.name for p in self.parameters if p.required and p.default is None],
            "additionalProperties": False,
        }


def builtin_parameters(*, environment: str = "") -> tuple[Parameter, ...]:
    """Partition and time limit (bounded per partition when validated), the software environment
    (checked against the usable ones when validated; `environment` is the template's default), module
    and container hooks."""
    return (
        Parameter("partition", "string", label="Partition", pattern=r"^[A-Za-z0-9_.-]*$",
                  help="Slurm partition; empty means the cluster's default.", default=""),
        Parameter("time_limit", "integer", label="Time limit (minutes)", minimum=1,
                  maximum=settings.SITE_MAX_WALLTIME_MINUTES, default=settings.JOBS_DEFAULT_TIME_MINUTES,
                  help="Wall-clock limit; at most the partition's maximum."),
        Parameter("environment", "string", label="Software environment", default=environment,
                  pattern=f"{ENVIRONMENT_NAME_PATTERN}|^$",
                  help="A software environment (GET /api/v1/environments/), activated before the "
                       "program runs; empty: none."),
        Parameter("modules", "string", label="Environment modules", default="",
                  pattern=r"^[A-Za-z0-9._/+-]+( [A-Za-z0-9._/+-]+)*$|^$",
                  help="Space-separated `module load` names, e.g. cuda/12.4 nccl."),
        Parameter("inputs", "paths", label="Inputs to record", default=[],
                  help="Files or folders the job reads, one a line: its provenance records each one's "
                       "size, time and SHA-256."),
    )


def parameter_from_spec(name: str, spec: Any, where: str) -> Parameter:
    if not isinstance(spec, dict):
        raise TemplateError(f"{where}: [parameters.{name}] must be a table")
    known = {"type", "label", "help", "default", "required", "min", "max", "choices", "pattern",
             "max_length"}
    if unknown := set(spec) - known:
        raise TemplateError(f"{where}: parameter {name!r} has unknown keys {sorted(unknown)}")
    kind = spec.get("type")
    if kind not in TYPES:
        raise TemplateError(f"{where}: parameter {name!r} has type {kind!r}; use one of {TYPES}")
    if kind == "choice" and not spec.get("choices"):
        raise TemplateError(f"{where}: choice parameter {name!r} needs `choices`")
    if pattern := spec.get("pattern"):
        try:
            re.compile(pattern)
        except re.error as error:
            raise TemplateError(f"{where}: parameter {name!r} has a bad pattern: {error}") from None
    parameter = Parameter(
        name=name, type=kind, label=spec.get("label", ""), help=spec.get("help", ""),
        default=spec.get("default"), required=bool(spec.get("required", False)),
        minimum=spec.get("min"), maximum=spec.get("max"),
        choices=tuple(str(c) for c in spec.get("choices", ())), pattern=pattern,
        max_length=int(spec.get("max_length", {"text": 20000, "path": PATH_MAX_LENGTH}.get(kind, 200))),
    )
    if parameter.default is not None:
        try:
            parameter.clean(parameter.default)
        except ParameterInvalid as error:
            raise TemplateError(f"{where}: default of {name!r} is invalid: {error}") from None
    return parameter


@lru_cache(maxsize=8)
def _environment(root: Path) -> jinja2.Environment:
    """One environment per templates folder: Jinja caches compiled templates in it (and reloads a
    template whose file changed), so a submission does not recompile its script."""
    # Shell, not HTML: `finalize` quotes every value instead of autoescaping.
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(root), undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701
        finalize=_quote, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
    )
    environment.filters["argv"] = _argv
    environment.filters["shell_split"] = shlex.split  # an `arguments` value: {{ args|shell_split|argv }}
    return environment


def shell_template(text: str) -> jinja2.Template:
    """Shell text written elsewhere (a web app type's command), rendered by the same rules as the
    templates' scripts: every value quoted."""
    return _environment(Path(settings.JOBS_TEMPLATES_DIR)).from_string(text)


def template_load(directory: Path) -> JobTemplate:
    """Read and check one template folder; raises TemplateError saying what is wrong."""
    slug = directory.name
    where = f"templates/jobs/{slug}"
    if not SLUG.fullmatch(slug):
        raise TemplateError(f"{where}: folder name must be lowercase letters, digits and hyphens")
    try:
        spec = tomllib.loads((directory / "template.toml").read_text())
    except FileNotFoundError:
        raise TemplateError(f"{where}: template.toml is missing") from None
    except tomllib.TOMLDecodeError as error:
        raise TemplateError(f"{where}/template.toml: {error}") from None
    if not (directory / "script.sh.j2").is_file():
        raise TemplateError(f"{where}: script.sh.j2 is missing")
    for key in ("name", "description"):
        if not isinstance(spec.get(key), str) or not spec[key].strip():
            raise TemplateError(f"{where}/template.toml: `{key}` is required")
    own = spec.get("parameters", {})
    if clash := set(own) & set(BUILTIN_PARAMETERS):
        raise TemplateError(f"{where}: parameters {sorted(clash)} are built in; rename them")
    environment = spec.get("environment", "")
    if not isinstance(environment, str) or not re.fullmatch(f"{ENVIRONMENT_NAME_PATTERN}|^$", environment):
        raise TemplateError(f"{where}/template.toml: `environment` must be an environment's name")
    parameters = builtin_parameters(environment=environment) + tuple(
        parameter_from_spec(name, value, f"{where}/template.toml") for name, value in own.items()
    )
    inputs = spec.get("inputs", [])
    if not isinstance(inputs, list) or any(path_shape_problem(item, relative=True) for item in inputs):
        raise TemplateError(f"{where}/template.toml: `inputs` must be a list of paths")
    resources = spec.get("resources", {})
    template = JobTemplate(
        slug=slug, name=spec["name"].strip(), description=spec["description"].strip(),
        parameters=parameters, nodes=resources.get("nodes", 1),
        gpus_per_node=resources.get("gpus_per_node", 0), smoke_parameter=spec.get("smoke_parameter"),
        benchmark=spec.get("benchmark"), environment=environment, inputs=tuple(inputs), directory=directory,
    )
    for which in ("nodes", "gpus_per_node"):
        source = getattr(template, which)
        if isinstance(source, str):
            parameter = template.parameter(source)
            if parameter is None or parameter.type != "integer":
                raise TemplateError(f"{where}: resources.{which} names {source!r}, "
                                    "which is not an integer parameter")
        elif not isinstance(source, int) or source < 0:
            raise TemplateError(f"{where}: resources.{which} must be a parameter name or a count")
    if template.benchmark is not None and not (isinstance(template.benchmark, str)
                                               and SLUG.fullmatch(template.benchmark.replace("_", "-"))):
        raise TemplateError(f"{where}/template.toml: `benchmark` must name a result parser, e.g. \"fio\"")
    if template.smoke_parameter and getattr(template.parameter(template.smoke_parameter), "type",
                                            None) != "boolean":
        raise TemplateError(f"{where}: smoke_parameter must name a boolean parameter")
    _check_renders(template, where)
    return template


def _check_renders(template: JobTemplate, where: str) -> None:
    """Render with the defaults (and in smoke mode) so mistakes surface at startup, not at submit."""
    values = {p.name: p.clean(None) for p in template.parameters}
    variants = [values]
    if template.smoke_parameter:
        variants.append({**values, template.smoke_parameter: not values[template.smoke_parameter]})
    for variant in variants:
        try:
            body = script_body_render(template=template, values=variant, job=_SAMPLE_JOB)
        except jinja2.TemplateError as error:
            raise TemplateError(f"{where}/script.sh.j2{_line_of(error)}: {error}") from None
        if "set -euo pipefail" not in body:
            raise TemplateError(f"{where}/script.sh.j2: the script must `set -euo pipefail`")
        if _SBATCH_LINE.search(body):
            raise TemplateError(f"{where}/script.sh.j2: #SBATCH lines are generated by the portal; "
                                "map resources in template.toml instead")


def _line_of(error: jinja2.TemplateError) -> str:
    """' line N' of the template where rendering failed (Jinja puts template frames in tracebacks)."""
    lineno = getattr(error, "lineno", None)
    if lineno is None:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.endswith(".j2")]
        lineno = frames[-1].lineno if frames else None
    return f" line {lineno}" if lineno else ""


@dataclass(frozen=True)
class JobPaths:
    """What a script may know about its own job (all computed by the portal)."""

    id: str
    dir: str
    stdout: str
    stderr: str
    # The scalars the exit hook exports from the job's TensorBoard events, and where those go.
    metrics: str = ""
    logdir: str = ""
    # The notebook templates a session copies into ~/templates: a job copies them too (no file of the
    # user's is overwritten), so the training templates' default script is there for a new user.
    templates: str = ""
    # Where the job records its own provenance (templates/jobs/_common/provenance.py), and the paths
    # the template's path parameters name, which it records.
    provenance: str = ""
    inputs: tuple[str, ...] = ()
    # A re-run's code: each recorded work tree ({top, commit, tree: its scratch work tree, diff: in
    # base64}); and the path parameters' values that lie in one, with the file the job uses instead.
    code: tuple[Mapping[str, str], ...] = ()
    paths: tuple[tuple[str, str], ...] = ()

    @property
    def rerun(self) -> dict[str, Any]:
        """What the job's own provenance record needs to name a re-run's copies by the originals."""
        return {"paths": dict(self.paths), "trees": {tree["tree"]: tree["top"] for tree in self.code}}


_SAMPLE_JOB = JobPaths(id="sample", dir="/home/user/gpuportal/jobs/job-sample",
                       stdout="/home/user/out", stderr="/home/user/err", metrics="/home/user/metrics.json",
                       logdir="/home/user/logs/jobs/sample",
                       provenance="/home/user/gpuportal/jobs/job-sample.provenance.json", inputs=("data",))


def script_body_render(*, template: JobTemplate, values: Mapping[str, Any], job: JobPaths,
                       activation: Mapping[str, Any] | None = None) -> str:
    """`activation`: the chosen software environment (name, kind, path, modules) the prologue
    activates, or None."""
    environment = _environment(template.directory.parent)
    body = environment.get_template(f"{template.slug}/script.sh.j2")
    return body.render(params=dict(values), job=job, environment=activation,
                       template={"slug": template.slug, "name": template.name})


@dataclass(frozen=True)
class Catalog:
    templates: dict[str, JobTemplate]
    errors: dict[str, str]


def templates_load(root: Path) -> Catalog:
    templates: dict[str, JobTemplate] = {}
    errors: dict[str, str] = {}
    for directory in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        try:
            templates[directory.name] = template_load(directory)
        except TemplateError as error:
            errors[directory.name] = str(error)
            logger.error("job template refused: %s", error)
    return Catalog(templates=templates, errors=errors)


@lru_cache(maxsize=1)
def catalog() -> Catalog:
    """The templates found at startup; broken folders are left out and reported in `errors`."""
    return templates_load(Path(settings.JOBS_TEMPLATES_DIR))
