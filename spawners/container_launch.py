"""A server inside a container: the runtime's command line that the server's command follows.

The containers adapter (portal/containers/runtimes.py) builds it. Besides the site's binds (home,
data), the hub's own Python environment (Jupyter + batchspawner, run by the image's python3) and the
servers' settings are bound at their own paths, read-only.
"""

import sys

from portal.containers.runtimes import RUNTIMES, Bind, Launch
from spawners.batch_script import SINGLEUSER_CONFIG_DIR
from spawners.options import ContainerChoice
from spawners.reports import TRACKING_ENV

# What a server inside a container gets from the job's environment (Podman and enroot pass only
# what they are told): the hub's variables, the GPUs, the portal's and TensorBoard's settings.
CONTAINER_ENV = ("CUDA_VISIBLE_DEVICES", "JUPYTERHUB_*", "JPY_*", "JUPYTER_CONFIG_PATH",
                 "TENSORBOARD_PROXY_URL", "GPUPORTAL_*", *TRACKING_ENV, "HOME", "USER", "PATH", "LANG",
                 "SLURM_*")


def container_prefix(container: ContainerChoice, *, runtimes: dict[str, dict], binds: list[str],
                     home: str) -> str:
    """Bash lines setting RUN to the runtime's command for the server (`runtimes`: the hub's
    configured runtimes; `binds`: 'SRC[:DST][:ro]', {home} the user's). Raises LaunchInvalid."""
    config = dict(runtimes[container.runtime])
    runtime = RUNTIMES[container.runtime](binary=str(config.pop("binary")), options=config)
    env = tuple(name for name in CONTAINER_ENV if runtime.name == "podman" or "*" not in name)
    site = tuple(Bind.parse(text, home=home) for text in binds)
    # Jupyter + batchspawner, and the servers' own settings (TensorBoard's launcher).
    jupyter = (Bind(sys.prefix, sys.prefix, read_only=True),
               Bind(str(SINGLEUSER_CONFIG_DIR), str(SINGLEUSER_CONFIG_DIR), read_only=True))
    launch = Launch(image=container.image, binds=(*site, *jupyter), env=env, workdir=home, gpus=True)
    return runtime.shell_prefix(launch)
