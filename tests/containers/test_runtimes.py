"""The runtimes adapter: exact command lines for all four runtimes, quoting, and refusals of
hostile references and paths (Apptainer and enroot are not installable here: their lines are
what these tests show)."""

import shlex
import subprocess

import pytest

from portal.containers.configured import default_binds, runtime_get
from portal.containers.references import ReferenceInvalid, path_check, reference_parse, registry_check
from portal.containers.runtimes import (
    Apptainer,
    Bind,
    Charliecloud,
    Enroot,
    Launch,
    LaunchInvalid,
    Podman,
    RuntimeUnavailable,
)

HOME = "/home/alice"
BINDS = (Bind(HOME, HOME), Bind("/data", "/data", read_only=True))
REF = "nvcr.io/nvidia/pytorch:24.05-py3"
PODMAN_GLOBAL = ["--runtime=runc", "--cgroup-manager=cgroupfs", "--events-backend=file"]


def launch(image: str, **fields) -> Launch:
    return Launch(image=image, binds=BINDS, workdir=f"{HOME}/work", gpus=True, **fields)


def test_apptainer_exec_with_nv_and_binds():
    runtime = Apptainer(binary="/usr/bin/apptainer")
    assert runtime.prefix(launch("/opt/gpuportal/images/pytorch.sif")) == [
        "/usr/bin/apptainer",
        "exec",
        "--nv",
        "--bind",
        "/home/alice:/home/alice",
        "--bind",
        "/data:/data:ro",
        "--pwd",
        "/home/alice/work",
        "/opt/gpuportal/images/pytorch.sif",
    ]
    # A registry reference runs through Apptainer's docker:// transport.
    assert runtime.prefix(Launch(image=REF))[-1] == f"docker://{REF}"
    assert "--nv" not in runtime.prefix(Launch(image=REF, gpus=False))


def test_charliecloud_ch_run_on_a_directory_image():
    runtime = Charliecloud(binary="/usr/bin/ch-run")
    assert runtime.prefix(launch(f"{HOME}/gpuportal/images/py")) == [
        "/usr/bin/ch-run",
        "--bind=/home/alice:/home/alice",
        "--bind=/data:/data",
        "--cd=/home/alice/work",
        "/home/alice/gpuportal/images/py",
        "--",
    ]
    with pytest.raises(LaunchInvalid, match="local image"):
        runtime.prefix(Launch(image=REF))


def test_podman_rootless_run_with_cdi_devices():
    runtime = Podman(binary="/usr/bin/podman", options={"global_args": PODMAN_GLOBAL, "cdi": True})
    assert runtime.prefix(launch(REF), gpu_ids=["0", "3"]) == [
        "/usr/bin/podman",
        *PODMAN_GLOBAL,
        "run",
        "--rm",
        "--network=host",
        "--userns=keep-id",
        "--security-opt=label=disable",
        "--volume=/home/alice:/home/alice",
        "--volume=/data:/data:ro",
        "--workdir=/home/alice/work",
        "--env=CUDA_VISIBLE_DEVICES",
        "--device=nvidia.com/gpu=0",
        "--device=nvidia.com/gpu=3",
        REF,
    ]
    with pytest.raises(LaunchInvalid):
        runtime.prefix(launch(REF), gpu_ids=["0;rm -rf /"])
    # Without a CDI spec (this bed's fake GPUs) only the variable goes in.
    plain = Podman(binary="/usr/bin/podman", options={"global_args": PODMAN_GLOBAL})
    assert not any(a.startswith("--device") for a in plain.prefix(launch(REF), gpu_ids=["0"]))
    with pytest.raises(LaunchInvalid, match="global_args"):
        Podman(binary="/usr/bin/podman", options={"global_args": ["--log-level debug; id"]}).prefix(
            launch(REF)
        )


def test_podman_shell_prefix_adds_each_allocated_gpu_at_run_time():
    runtime = Podman(binary="/usr/bin/podman", options={"global_args": PODMAN_GLOBAL, "cdi": True})
    text = runtime.shell_prefix(launch(REF))
    script = f"{text}\nprintf '%s\\n' \"${{RUN[@]}}\""
    out = subprocess.run(
        ["bash", "-c", script],
        env={"CUDA_VISIBLE_DEVICES": "1,2"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[-3:] == ["--device=nvidia.com/gpu=1", "--device=nvidia.com/gpu=2", REF]
    hostile = subprocess.run(
        ["bash", "-c", script],
        env={"CUDA_VISIBLE_DEVICES": "$(id),1"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert "--device=nvidia.com/gpu=1" in hostile and not any(
        "id" in line and "gpu" in line and "(" in line for line in hostile
    )


def test_enroot_through_pyxis_srun():
    runtime = Enroot(binary="/usr/bin/srun")
    assert runtime.prefix(launch(REF)) == [
        "/usr/bin/srun",
        "--container-image=nvcr.io#nvidia/pytorch:24.05-py3",
        "--container-mounts=/home/alice:/home/alice,/data:/data:ro",
        "--container-workdir=/home/alice/work",
        "--container-env=CUDA_VISIBLE_DEVICES",
    ]
    assert (
        runtime.prefix(Launch(image="/opt/gpuportal/images/pytorch.sqsh"))[1]
        == "--container-image=/opt/gpuportal/images/pytorch.sqsh"
    )


HOSTILE_REFERENCES = [
    "",
    "UPPER/case:1",
    "nvcr.io/nvidia/pytorch",
    "a:1;id",
    "a:1 b",
    "$(id):1",
    "a:1\nb",
    "a/../b:1",
    "a:" + "x" * 200,
    "-rf:1",
    "a:1`id`",
    "a:1'",
    "docker://a:1",
    "a@sha256:xyz",
    "x" * 300 + ":1",
    None,
    7,
    ["a:1"],
]


@pytest.mark.parametrize("text", HOSTILE_REFERENCES, ids=repr)
def test_hostile_references_are_refused(text):
    with pytest.raises(ReferenceInvalid):
        reference_parse(text)
    for runtime in (Apptainer(binary="/a"), Podman(binary="/p"), Enroot(binary="/s")):
        if isinstance(text, str) and not text.startswith("/"):
            with pytest.raises(LaunchInvalid):
                runtime.prefix(Launch(image=text))


@pytest.mark.parametrize(
    "text,registry,path,tag",
    [
        ("nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io", "nvidia/pytorch", "24.05-py3"),
        (
            "127.0.0.1:5000/gpuportal/python:3.11-bookworm",
            "127.0.0.1:5000",
            "gpuportal/python",
            "3.11-bookworm",
        ),
        ("library/python:3.11", "docker.io", "library/python", "3.11"),
        ("localhost/a:1", "localhost", "a", "1"),
    ],
)
def test_references_parse(text, registry, path, tag):
    parsed = reference_parse(text)
    assert (parsed.registry, parsed.path, parsed.tag) == (registry, path, tag)
    digest = reference_parse(f"{text}@sha256:{'a' * 64}")
    assert digest.digest == f"sha256:{'a' * 64}"


HOSTILE_PATHS = [
    "relative/img",
    "/opt/gpuportal/images/../../etc",
    "/opt/gpuportal/images/a b",
    "/opt/gpuportal/images/a:b",
    "/opt/gpuportal/images/a,b",
    "/opt/gpuportal/images/$(id)",
    "/opt/gpuportal/images/a\n",
    "/etc/shadow",
    "/opt/gpuportal/imagesX/a",
    "/opt/gpuportal/images",
    "/opt/gpuportal/images//a",
    "/opt/gpuportal/images/a;id",
]


@pytest.mark.parametrize("path", HOSTILE_PATHS, ids=repr)
def test_paths_outside_the_image_directories_or_odd_are_refused(path):
    with pytest.raises(ReferenceInvalid):
        path_check(path, allowed=["/opt/gpuportal/images"])


@pytest.mark.parametrize("path", ["/a b", "/a:b", "/a,b", "relative", "/a/../b", "/$(id)"])
def test_binds_and_workdirs_refuse_what_a_command_line_would_split(path):
    with pytest.raises(LaunchInvalid):
        Bind(path, "/x")
    with pytest.raises(LaunchInvalid):
        Bind("/x", path)
    with pytest.raises(LaunchInvalid):
        Launch(image=REF, workdir=path)
    with pytest.raises(LaunchInvalid):
        Charliecloud(binary="/usr/bin/ch-run").prefix(Launch(image=path))
    with pytest.raises(LaunchInvalid):
        Launch(image=REF, env=("A;B",))


def test_registry_hosts():
    assert registry_check("NVCR.io") == "nvcr.io"
    for bad in ["", "a b", "https://nvcr.io", "nvcr.io/x", "a:b:c", "$(id)"]:
        with pytest.raises(ReferenceInvalid):
            registry_check(bad)


def test_shell_prefix_quotes_every_element():
    runtime = Charliecloud(binary="/usr/bin/ch-run")
    text = runtime.shell_prefix(launch(f"{HOME}/gpuportal/images/py"))
    assert text == "RUN=(" + shlex.join(runtime.prefix(launch(f"{HOME}/gpuportal/images/py"))) + ")"
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_pull_lines_never_hold_the_key_and_are_valid_bash():
    ref = reference_parse("127.0.0.1:5000/gpuportal/python:3.11-bookworm")
    for runtime in (
        Apptainer(binary="/usr/bin/apptainer"),
        Charliecloud(binary="/usr/bin/ch-run"),
        Podman(binary="/usr/bin/podman", options={"global_args": PODMAN_GLOBAL}),
        Enroot(binary="/usr/bin/srun"),
    ):
        lines = runtime.pull_lines(
            reference=ref, destination=f"{HOME}/gpuportal/images/py", mount_points=["/data", HOME]
        )
        text = "\n".join(lines)
        subprocess.run(["bash", "-n"], input=text, text=True, check=True)
        assert "GPUPORTAL_REGISTRY_PASSWORD" in text  # by reference, never by value


def test_podman_pull_writes_a_0600_auth_file_from_the_environment(tmp_path):
    """Run the Podman pull lines with a stand-in `podman` that shows what it got."""
    fake = tmp_path / "podman"
    fake.write_text('#!/bin/sh\nstat -c %a "$REGISTRY_AUTH_FILE"; cat "$REGISTRY_AUTH_FILE"; echo "$@"\n')
    fake.chmod(0o755)
    ref = reference_parse("127.0.0.1:5000/gpuportal/python:3.11-bookworm")
    lines = Podman(binary=str(fake)).pull_lines(reference=ref, destination="/x", mount_points=[])
    out = subprocess.run(
        ["bash", "-euc", "\n".join(lines)],
        capture_output=True,
        text=True,
        check=True,
        env={
            "PATH": "/usr/bin:/bin",
            "TMPDIR": str(tmp_path),
            "GPUPORTAL_REGISTRY_USERNAME": "$oauthtoken",
            "GPUPORTAL_REGISTRY_PASSWORD": "s3cret'\"$x",
        },
    ).stdout
    mode, auth, argv = out.splitlines()
    assert mode == "600"
    assert auth == '{"auths":{"127.0.0.1:5000":{"auth":"JG9hdXRodG9rZW46czNjcmV0JyIkeA=="}}}'
    assert "s3cret" not in argv and argv.endswith(
        "pull --quiet 127.0.0.1:5000/gpuportal/python:3.11-bookworm"
    )


def test_runtime_settings(settings):
    settings.CONTAINERS_RUNTIMES = {
        **settings.CONTAINERS_RUNTIMES,
        "apptainer": {"enabled": False, "binary": "/usr/bin/apptainer"},
        "enroot": {"enabled": True, "binary": "/nonexistent/srun"},
    }
    with pytest.raises(RuntimeUnavailable, match="not enabled"):
        runtime_get("apptainer")
    with pytest.raises(RuntimeUnavailable, match="not installed"):
        runtime_get("enroot")
    with pytest.raises(RuntimeUnavailable, match="Unknown"):
        runtime_get("docker")
    assert default_binds("charliecloud", home=HOME)[0] == Bind(HOME, HOME)
