"""Template loading, parameter validation, and shell quoting of everything that reaches a script."""

import shlex
import subprocess

import pytest

from portal.jobs.job_templates import (
    JobPaths,
    Parameter,
    ParameterInvalid,
    TemplateError,
    catalog,
    script_body_render,
    template_load,
    templates_load,
)

JOB = JobPaths(id="x", dir="/home/alice/gpuportal/jobs/job-x", stdout="/o", stderr="/e")
INJECTIONS = ["$(id)", "`id`", "a; rm -rf ~", "x\n#SBATCH --gres=gpu:8", "'; id; '", "a && b | c > /tmp/x"]


def _write(root, slug, toml, script="set -euo pipefail\necho {{ params.word }}\n"):
    folder = root / slug
    folder.mkdir(parents=True)
    (folder / "template.toml").write_text(toml)
    (folder / "script.sh.j2").write_text(script)
    return folder


BASIC = 'name = "T"\ndescription = "d"\n[parameters.word]\ntype = "string"\ndefault = "hi"\n'


def test_shipped_templates_all_load():
    found = catalog()
    assert found.errors == {}
    assert {"custom", "pytorch-train", "pytorch-multinode", "resnet50-benchmark", "nccl-allreduce",
            "storage-benchmark", "gpu-p2p-bandwidth"} <= set(found.templates)


@pytest.mark.parametrize("slug", sorted(catalog().templates))
def test_shipped_scripts_are_valid_bash_with_strict_mode(slug):
    template = catalog().templates[slug]
    values = {p.name: p.clean(None) for p in template.parameters}
    for smoke in ([False, True] if template.smoke_parameter else [None]):
        if smoke is not None:
            values[template.smoke_parameter] = smoke
        body = script_body_render(template=template, values=values, job=JOB)
        assert body.startswith("set -euo pipefail\n")
        subprocess.run(["bash", "-n"], input=body, text=True, check=True)


@pytest.mark.parametrize("value", INJECTIONS)
def test_every_interpolated_value_is_quoted(tmp_path, value):
    # A permissive pattern: only quoting stands between the value and the shell.
    _write(tmp_path, "t", 'name = "T"\ndescription = "d"\n[parameters.word]\ntype = "string"\n'
                          'pattern = "(?s).*"\nmax_length = 500\n')
    template = template_load(tmp_path / "t")
    body = script_body_render(template=template, values={"word": value}, job=JOB)
    assert body.endswith(f"echo {shlex.quote(value)}\n")
    out = subprocess.run(["bash", "-c", body], capture_output=True, text=True, check=True).stdout
    assert out == value + "\n"


@pytest.mark.parametrize("value", INJECTIONS)
def test_default_string_pattern_refuses_shell_metacharacters(value):
    with pytest.raises(ParameterInvalid):
        Parameter("word", "string").clean(value)


def test_custom_commands_stay_one_quoted_argument():
    template = catalog().templates["custom"]
    values = {p.name: p.clean(None) for p in template.parameters}
    values["commands"] = "echo $(whoami); echo `date`; exit 3"
    body = script_body_render(template=template, values=values, job=JOB)
    assert "bash -euo pipefail -c 'echo $(whoami); echo `date`; exit 3'" in body


@pytest.mark.parametrize("value", ["#SBATCH --gres=gpu:8", "echo\n  # SBATCH --mem=1T", "#sbatch -t 9"])
def test_text_parameter_refuses_sbatch_lines(value):
    with pytest.raises(ParameterInvalid, match="#SBATCH"):
        Parameter("commands", "text", max_length=1000).clean(value)


@pytest.mark.parametrize(("parameter", "raw", "message"), [
    (Parameter("n", "integer", minimum=1, maximum=4), 5, "at most 4"),
    (Parameter("n", "integer", minimum=1, maximum=4), 0, "at least 1"),
    (Parameter("n", "integer"), "2; id", "whole number"),
    (Parameter("n", "integer"), True, "whole number"),
    (Parameter("n", "integer", required=True), None, "required"),
    (Parameter("x", "number"), float("nan"), "finite"),
    (Parameter("x", "number"), float("inf"), "finite"),
    # Exactly the schema's JSON type: no text for a number, no true for a number, no text for a
    # boolean, no list for a string (an `arguments` one included).
    (Parameter("n", "integer"), "3", "whole number"),
    (Parameter("n", "integer"), 3.0, "whole number"),
    (Parameter("x", "number"), "1.5", "a number"),
    (Parameter("x", "number"), False, "a number"),
    (Parameter("b", "boolean"), "true", "true or false"),
    (Parameter("b", "boolean"), 1, "true or false"),
    (Parameter("s", "string"), ["a"], "text"),
    (Parameter("s", "string"), 5, "text"),
    (Parameter("a", "arguments"), ["--lr", "0.1"], "text"),
    (Parameter("c", "choice", choices=("8", "1K")), 8, "one of"),
    (Parameter("p", "path"), ["/data"], "text"),
    (Parameter("c", "choice", choices=("fp32", "amp")), "fp64", "one of: fp32, amp"),
    (Parameter("b", "boolean"), "maybe", "true or false"),
    (Parameter("s", "string"), "two\nlines", "single line"),
    (Parameter("s", "string", max_length=3), "abcd", "At most 3"),
])
def test_validation_messages(parameter, raw, message):
    with pytest.raises(ParameterInvalid, match=message):
        parameter.clean(raw)


def test_clean_values_and_defaults():
    assert Parameter("n", "integer", default=8).clean(None) == 8
    assert Parameter("n", "integer").clean(3) == 3
    assert Parameter("x", "number").clean(2) == 2.0
    assert Parameter("b", "boolean").clean(True) is True
    # Kept as given, the text the schema says; the script splits it (the argv filter).
    assert Parameter("a", "arguments").clean("--lr 0.1 --name 'a b'") == "--lr 0.1 --name 'a b'"


@pytest.mark.parametrize(("kind", "text", "value"), [
    ("integer", "3", 3), ("integer", "", None), ("integer", None, None), ("integer", "3.5", "3.5"),
    ("number", "1.5", 1.5), ("number", "x", "x"), ("boolean", "on", True), ("boolean", None, False),
    ("string", None, ""), ("arguments", "--x 1", "--x 1"), ("path", "/data/x", "/data/x"),
])
def test_form_text_becomes_the_json_value_it_spells(kind, text, value):
    """The pages post text: it is parsed before the typed check (what does not parse is refused there)."""
    assert Parameter("p", kind).from_form(text) == value


def test_argv_filter_quotes_each_word(tmp_path):
    _write(tmp_path, "t", 'name = "T"\ndescription = "d"\n[parameters.args]\ntype = "arguments"\n'
                          'default = ""\n',
           "set -euo pipefail\nprintf '%s\\n' {{ params.args|shell_split|argv }}\n")
    template = template_load(tmp_path / "t")
    args = template.parameter("args").clean("'a b' '$(id)'")
    body = script_body_render(template=template, values={"args": args}, job=JOB)
    out = subprocess.run(["bash", "-c", body], capture_output=True, text=True, check=True).stdout
    assert out == "a b\n$(id)\n"


def test_json_schema_of_parameters():
    schema = catalog().templates["resnet50-benchmark"].json_schema()
    assert schema["additionalProperties"] is False
    assert schema["properties"]["precision"]["enum"] == ["fp32", "amp"]
    assert schema["properties"]["batch_size"] == {
        "title": "Batch size per GPU", "description": "", "type": "integer", "minimum": 1,
        "maximum": 1024, "default": 128}
    assert schema["properties"]["time_limit"]["default"] == 480


@pytest.mark.parametrize(("toml", "script", "message"), [
    ('description = "d"\n', None, "`name` is required"),
    ('name = "T"\ndescription = "d"\n[parameters.n]\ntype = "float"\n', None, "has type 'float'"),
    ('name = "T"\ndescription = "d"\n[parameters.partition]\ntype = "string"\n', None, "built in"),
    ('name = "T"\ndescription = "d"\n[parameters.n]\ntype = "integer"\nmax = 2\ndefault = 5\n', None,
     "default of 'n' is invalid"),
    ('name = "T"\ndescription = "d"\n[resources]\ngpus_per_node = "gpus"\n', None,
     "not an integer parameter"),
    ('name = = "T"', None, "template.toml"),
    (BASIC, "echo {{ params.word }}\n", "must `set -euo pipefail`"),
    (BASIC, "set -euo pipefail\necho {{ params.nope }}\n",
     "script.sh.j2 line 2: 'dict object' has no attribute 'nope'"),
    (BASIC, "set -euo pipefail\n{% if %}\n", "script.sh.j2 line 2"),
    (BASIC, "set -euo pipefail\n#SBATCH --mem=1T\n", "generated by the portal"),
])
def test_broken_templates_are_reported_clearly(tmp_path, toml, script, message):
    _write(tmp_path, "broken", toml, script or "set -euo pipefail\n")
    _write(tmp_path, "good", BASIC)
    found = templates_load(tmp_path)
    assert list(found.templates) == ["good"]
    assert message in found.errors["broken"]
    assert found.errors["broken"].startswith("templates/jobs/broken")


def test_missing_script_is_reported(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "template.toml").write_text(BASIC)
    with pytest.raises(TemplateError, match=r"script\.sh\.j2 is missing"):
        template_load(tmp_path / "t")


@pytest.fixture
def templates_dir(tmp_path, settings):
    settings.JOBS_TEMPLATES_DIR = str(tmp_path)
    catalog.cache_clear()
    yield tmp_path
    catalog.cache_clear()


def test_system_check_names_broken_templates(templates_dir):
    from portal.jobs.checks import job_templates_check

    _write(templates_dir, "broken", 'name = "T"\n')
    (warning,) = job_templates_check()
    assert warning.id == "jobs.W001" and "'broken'" in warning.msg and "description" in warning.msg
