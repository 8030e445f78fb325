"""The container runtimes adapter: the only code that builds container command lines.

One class per runtime. Each turns a `Launch` (image, binds, variables, working directory, GPUs)
into an argv prefix the program's own argv follows, and into the shell lines of a pull job. Every
value is checked again here (image reference grammar, plain absolute paths, variable names) and
comes out as one argv element, or shlex-quoted in shell text: nothing a user typed is ever
interpreted by a shell. A runtime the site has not enabled, or whose binary is missing, is refused
with a message that says so.

Plain Python, no Django: the hub's spawner builds its servers' containers with it too. The runtimes
as this site configured them (CONTAINERS_RUNTIMES) are in portal.containers.configured.
"""

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import ClassVar

from portal.containers.references import PATH, Reference, reference_parse

# A trailing * (Podman only): every variable of the job with that prefix.
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}\*?$")
# Where a pull job finds the registry login and key: set only in sbatch's environment (exported
# to the job by name), never in the script or on a command line.
USERNAME_VARIABLE = "GPUPORTAL_REGISTRY_USERNAME"
PASSWORD_VARIABLE = "GPUPORTAL_REGISTRY_PASSWORD"  # noqa: S105 (a variable's name)
# containers-auth.json(5), written by a Podman pull job: printf's format, registry and auth as arguments.
_AUTH_JSON = '{"auths":{"%s":{"auth":"%s"}}}\\n'
# Rootless Podman's run state (in its runtime dir) outlives a job Slurm killed: the pause process
# and conmon die with the job, its "running" containers stay, and Podman 4 then fails every later
# call of the user ("cannot re-exec process to join the existing user namespace"). With none of
# those processes left (a pid another program has taken since does not count), the state goes,
# and Podman starts afresh as it does after a boot. Runtime dir: XDG_RUNTIME_DIR, else /run/user/UID
# if it is ours, else /tmp.
_PODMAN_STALE_STATE = """\
podman_run=${XDG_RUNTIME_DIR:-/run/user/$(id -u)}
[ -d "$podman_run" ] && [ -O "$podman_run" ] || podman_run=/tmp/podman-run-$(id -u)
podman_tmp=$podman_run/libpod/tmp
podman_alive() { kill -0 "$1" 2>/dev/null && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]; }
if [ -d "$podman_tmp" ] && ! podman_alive "$(cat "$podman_tmp/pause.pid" 2>/dev/null)" "podman pause"; then
  podman_live=
  for pidfile in "$podman_run"/containers/*-containers/*/userdata/conmon.pid; do
    [ -f "$pidfile" ] && podman_alive "$(cat "$pidfile")" conmon && podman_live=1
  done
  [ -n "$podman_live" ] || rm -f "$podman_tmp/pause.pid" "$podman_tmp/alive"
fi"""


class RuntimeUnavailable(Exception):
    """The runtime is not enabled here or not installed; the message says which."""


class LaunchInvalid(ValueError):
    """Something in a launch would not be safe on a command line; the message says what."""


@dataclass(frozen=True)
class Bind:
    source: str
    target: str
    read_only: bool = False

    def __post_init__(self) -> None:
        for path in (self.source, self.target):
            if not isinstance(path, str) or not PATH.fullmatch(path) or os.path.normpath(path) != path:
                raise LaunchInvalid(f"bind path {str(path)[:100]!r} is not a plain absolute path")

    @classmethod
    def parse(cls, text: str, *, home: str) -> "Bind":
        """'SRC[:DST][:ro]' from the settings, `{home}` standing for the user's home directory."""
        parts = text.replace("{home}", home).split(":")
        read_only = parts[-1] == "ro" and len(parts) > 1
        if read_only or parts[-1] == "rw":
            parts = parts[:-1]
        if len(parts) not in (1, 2):
            raise LaunchInvalid(f"bind {text!r}: use SRC[:DST][:ro]")
        return cls(parts[0], parts[-1], read_only)


@dataclass(frozen=True)
class Launch:
    """What to run a program in. `image`: a path (directory, SquashFS, .sif) or a reference."""

    image: str
    binds: tuple[Bind, ...] = ()
    env: tuple[str, ...] = ("CUDA_VISIBLE_DEVICES",)  # names passed on from the job's environment
    workdir: str = ""
    gpus: bool = False

    def __post_init__(self) -> None:
        if bad := [name for name in self.env if not ENV_NAME.fullmatch(name)]:
            raise LaunchInvalid(f"not variable names: {bad!r}")
        if self.workdir and (
            not PATH.fullmatch(self.workdir) or os.path.normpath(self.workdir) != self.workdir
        ):
            raise LaunchInvalid(f"working directory {self.workdir[:100]!r} is not a plain absolute path")


@dataclass(frozen=True)
class Runtime:
    binary: str
    options: Mapping[str, object] = field(default_factory=dict)

    name: ClassVar[str]
    title: ClassVar[str]
    # Which image forms it runs: local paths, registry references, or both.
    runs_paths: ClassVar[bool] = False
    runs_references: ClassVar[bool] = False

    def image(self, image: str) -> str:
        """The image as this runtime's command line wants it; LaunchInvalid if it is neither a
        plain absolute path nor a valid reference, or a form this runtime does not run."""
        if image.startswith("/"):
            if not self.runs_paths:
                raise LaunchInvalid(f"{self.title} runs images from a registry reference, not a path")
            if not PATH.fullmatch(image) or os.path.normpath(image) != image:
                raise LaunchInvalid(f"image path {image[:100]!r} is not a plain absolute path")
            return image
        if not self.runs_references:
            raise LaunchInvalid(f"{self.title} runs a local image (a path), not a registry reference")
        try:
            return self.reference(reference_parse(image))
        except ValueError as error:
            raise LaunchInvalid(str(error)) from None

    def reference(self, reference: Reference) -> str:
        return str(reference)

    def prefix(self, launch: Launch) -> list[str]:
        """The argv that runs a program inside the image: the program's argv follows it."""
        raise NotImplementedError

    def shell_prefix(self, launch: Launch, variable: str = "RUN") -> str:
        """Bash lines that set the array `variable` to `prefix` (values quoted)."""
        return f"{variable}=({shlex.join(self.prefix(launch))})"

    def pull_lines(self, *, reference: Reference, destination: str, mount_points: Sequence[str]) -> list[str]:
        """Shell lines of a pull job: pull `reference` (credentials from PASSWORD_VARIABLE and
        USERNAME_VARIABLE when set) and leave a runnable image at `destination`."""
        raise LaunchInvalid(f"{self.title} images are not pulled by the portal")

    def local_image(self, *, reference: Reference, destination: str) -> str:
        """What `prefix` runs once `pull_lines` is done: the destination path, or a reference."""
        return destination


class Apptainer(Runtime):
    """Apptainer / SingularityCE: `apptainer exec --nv --bind SRC:DST[:ro] IMAGE PROGRAM...`.
    It passes the job's environment into the container itself; `docker://` references are pulled
    into the user's cache on first use."""

    name = "apptainer"
    title = "Apptainer"
    runs_paths = True
    runs_references = True

    def reference(self, reference: Reference) -> str:
        return f"docker://{reference}"

    def prefix(self, launch: Launch) -> list[str]:
        argv = [self.binary, "exec"]
        if launch.gpus:
            argv.append("--nv")
        for bind in launch.binds:
            argv += ["--bind", f"{bind.source}:{bind.target}" + (":ro" if bind.read_only else "")]
        if launch.workdir:
            argv += ["--pwd", launch.workdir]
        return [*argv, self.image(launch.image)]

    def pull_lines(self, *, reference: Reference, destination: str, mount_points: Sequence[str]) -> list[str]:
        return [
            f'[ -z "${{{PASSWORD_VARIABLE}:-}}" ] || export APPTAINER_DOCKER_USERNAME="${USERNAME_VARIABLE}" '
            f'APPTAINER_DOCKER_PASSWORD="${PASSWORD_VARIABLE}"',
            shlex.join([self.binary, "pull", "--force", f"{destination}.tmp", self.reference(reference)]),
            shlex.join(["mv", "-f", f"{destination}.tmp", destination]),
        ]

    def local_image(self, *, reference: Reference, destination: str) -> str:
        return destination


class Charliecloud(Runtime):
    """Charliecloud: `ch-run --bind=SRC:DST --cd=DIR IMAGE -- PROGRAM...` on a directory or
    SquashFS image. ch-run passes the environment on; bind targets must exist in the image (the
    pull makes them), and binds are read-write (the host's permissions still hold)."""

    name = "charliecloud"
    title = "Charliecloud"
    runs_paths = True

    def prefix(self, launch: Launch) -> list[str]:
        argv = [self.binary]
        argv += [f"--bind={bind.source}:{bind.target}" for bind in launch.binds]
        if launch.workdir:
            argv.append(f"--cd={launch.workdir}")
        return [*argv, self.image(launch.image), "--"]

    def pull_lines(self, *, reference: Reference, destination: str, mount_points: Sequence[str]) -> list[str]:
        ch_image = str(PurePosixPath(self.binary).with_name("ch-image"))
        ch_convert = str(PurePosixPath(self.binary).with_name("ch-convert"))
        storage = str(PurePosixPath(destination).with_name(".ch-image"))
        ref = str(reference)
        return [
            f"export CH_IMAGE_STORAGE={shlex.quote(storage)}",
            f'if [ -n "${{{PASSWORD_VARIABLE}:-}}" ]; then export CH_IMAGE_AUTH=yes '
            f'CH_IMAGE_USERNAME="${USERNAME_VARIABLE}" CH_IMAGE_PASSWORD="${PASSWORD_VARIABLE}"; fi',
            # No build cache: it is a git repository, and a pull needs none.
            shlex.join([ch_image, "--no-cache", "pull", ref]),
            shlex.join(["rm", "-rf", "--one-file-system", f"{destination}.tmp"]),
            shlex.join([ch_convert, "-i", "ch-image", "-o", "dir", ref, f"{destination}.tmp"]),
            shlex.join([ch_image, "--no-cache", "delete", ref]),
            # ch-run binds only onto directories that exist in the image.
            *(shlex.join(["mkdir", "-p", f"{destination}.tmp{target}"]) for target in mount_points),
            shlex.join(["rm", "-rf", "--one-file-system", destination]),
            shlex.join(["mv", f"{destination}.tmp", destination]),
        ]


class Podman(Runtime):
    """Rootless Podman as HPC centres run it: `podman run --rm --userns=keep-id --network=host
    -v SRC:DST[:ro] --env=NAME IMAGE PROGRAM...`, images in the user's own storage, GPUs through
    CDI (`--device=nvidia.com/gpu=N` for each allocated GPU) where the site has a CDI spec.
    `options["global_args"]` go before `run` (here: runc and cgroupfs, no systemd session)."""

    name = "podman"
    title = "Podman"
    runs_references = True

    def _global(self) -> list[str]:
        args = [str(a) for a in self.options.get("global_args", ())]  # type: ignore[union-attr]
        if bad := [a for a in args if not re.fullmatch(r"--[a-z-]+=[A-Za-z0-9._/-]+", a)]:
            raise LaunchInvalid(f"podman global_args must be --name=value: {bad!r}")
        return args

    def _run(self, launch: Launch) -> list[str]:
        argv = [
            self.binary,
            *self._global(),
            "run",
            "--rm",
            "--network=host",
            "--userns=keep-id",
            "--security-opt=label=disable",
        ]
        for bind in launch.binds:
            argv.append(f"--volume={bind.source}:{bind.target}" + (":ro" if bind.read_only else ""))
        if launch.workdir:
            argv.append(f"--workdir={launch.workdir}")
        argv += [f"--env={name}" for name in launch.env]
        return argv

    @property
    def cdi(self) -> bool:
        return bool(self.options.get("cdi"))

    def prefix(self, launch: Launch, gpu_ids: Sequence[str] = ()) -> list[str]:
        """`gpu_ids`: the allocated GPUs' ids (CUDA_VISIBLE_DEVICES) when known."""
        devices = []
        if launch.gpus and self.cdi:
            if bad := [g for g in gpu_ids if not re.fullmatch(r"[0-9]{1,3}|GPU-[0-9a-f-]{36}", g)]:
                raise LaunchInvalid(f"not GPU ids: {bad!r}")
            devices = [f"--device=nvidia.com/gpu={g}" for g in gpu_ids]
        return [*self._run(launch), *devices, self.image(launch.image)]

    def shell_prefix(self, launch: Launch, variable: str = "RUN") -> str:
        # The GPUs are known only when the job runs: each id Slurm put in CUDA_VISIBLE_DEVICES
        # (digits only) becomes a CDI device.
        lines = [_PODMAN_STALE_STATE, f"{variable}=({shlex.join(self._run(launch))})"]
        if launch.gpus and self.cdi:
            lines.append(
                f"for gpu in ${{CUDA_VISIBLE_DEVICES//,/ }}; do [[ $gpu =~ ^[0-9]+$ ]] && "
                f'{variable}+=("--device=nvidia.com/gpu=$gpu"); done'
            )
        lines.append(f"{variable}+=({shlex.quote(self.image(launch.image))})")
        return "\n".join(lines)

    def pull_lines(self, *, reference: Reference, destination: str, mount_points: Sequence[str]) -> list[str]:
        # The key reaches podman through an auth file the job writes itself, mode 0600, removed
        # on exit; printf is a shell builtin, so the key is in no process's argv.
        return [
            _PODMAN_STALE_STATE,
            f'if [ -n "${{{PASSWORD_VARIABLE}:-}}" ]; then',
            '  REGISTRY_AUTH_FILE=$(mktemp "${TMPDIR:-/tmp}/gpuportal-auth.XXXXXX")',
            "  trap 'rm -f \"$REGISTRY_AUTH_FILE\"' EXIT",
            "  export REGISTRY_AUTH_FILE",
            # The registry host passed the reference grammar: nothing in it needs JSON escaping.
            f"  printf {shlex.quote(_AUTH_JSON)} {shlex.quote(reference.registry)} "
            f'"$(printf \'%s:%s\' "${USERNAME_VARIABLE}" "${PASSWORD_VARIABLE}" | base64 -w0)" '
            '>"$REGISTRY_AUTH_FILE"',
            "fi",
            shlex.join([self.binary, *self._global(), "pull", "--quiet", str(reference)]),
        ]

    def local_image(self, *, reference: Reference, destination: str) -> str:
        return str(reference)


class Enroot(Runtime):
    """NVIDIA enroot through Slurm's pyxis plugin: `srun --container-image=IMAGE
    --container-mounts=SRC:DST[:ro],... --container-workdir=DIR --container-env=NAME,...
    PROGRAM...`. Registry references use enroot's `registry#path:tag` form; a local image is a
    SquashFS file (.sqsh) made by `enroot import`."""

    name = "enroot"
    title = "enroot (pyxis)"
    runs_paths = True
    runs_references = True

    def reference(self, reference: Reference) -> str:
        return f"{reference.registry}#{str(reference).split('/', 1)[1]}"

    def prefix(self, launch: Launch) -> list[str]:
        argv = [self.binary, f"--container-image={self.image(launch.image)}"]
        if launch.binds:
            argv.append(
                "--container-mounts="
                + ",".join(f"{b.source}:{b.target}" + (":ro" if b.read_only else "") for b in launch.binds)
            )
        if launch.workdir:
            argv.append(f"--container-workdir={launch.workdir}")
        # pyxis passes the job's environment itself; these names are kept over the image's.
        if names := [name for name in launch.env if not name.endswith("*")]:
            argv.append("--container-env=" + ",".join(names))
        return argv

    def pull_lines(self, *, reference: Reference, destination: str, mount_points: Sequence[str]) -> list[str]:
        enroot = str(self.options.get("enroot", "/usr/bin/enroot"))
        # enroot reads registry logins from a netrc-style file; the job writes it 0600.
        return [
            _PODMAN_STALE_STATE,
            f'if [ -n "${{{PASSWORD_VARIABLE}:-}}" ]; then',
            '  export ENROOT_CONFIG_PATH=$(mktemp -d "${TMPDIR:-/tmp}/gpuportal-enroot.XXXXXX")',
            "  trap 'rm -rf \"$ENROOT_CONFIG_PATH\"' EXIT",
            f"  printf 'machine %s login %s password %s\\n' {shlex.quote(reference.registry)} "
            f'"${USERNAME_VARIABLE}" "${PASSWORD_VARIABLE}" >"$ENROOT_CONFIG_PATH/.credentials"',
            "fi",
            shlex.join(["rm", "-f", f"{destination}.tmp"]),
            shlex.join(
                [enroot, "import", "--output", f"{destination}.tmp", f"docker://{self.reference(reference)}"]
            ),
            shlex.join(["mv", "-f", f"{destination}.tmp", destination]),
        ]


RUNTIMES: dict[str, type[Runtime]] = {cls.name: cls for cls in (Apptainer, Charliecloud, Podman, Enroot)}
CHOICES = [(name, cls.title) for name, cls in RUNTIMES.items()]
