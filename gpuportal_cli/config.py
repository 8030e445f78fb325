"""The user's config file (`$XDG_CONFIG_HOME/gpuportal/config.toml`): the portal URL, a personal
token and a default cluster. It holds a secret, so it is written 0600 in a 0700 folder, and replaced
atomically."""

import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

URL_ENV = "GPUPORTAL_URL"
TOKEN_ENV = "GPUPORTAL_TOKEN"  # noqa: S105 - the variable's name, not a token
CLUSTER_ENV = "GPUPORTAL_CLUSTER"
# Slurm's ClusterName, as the portal's cluster files take it (slurm/clusters.py).
CLUSTER_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")


class ConfigError(Exception):
    """The config file cannot be read, or a setting is missing or malformed."""


@dataclass
class Config:
    url: str = ""
    token: str = ""
    token_id: int | None = None
    username: str = ""
    cluster: str = ""  # where work goes when a command names none; empty: the portal's default


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "gpuportal" / "config.toml"


def cluster_name(name: str) -> str:
    """A cluster's name as the portal knows it (the cluster page shows it), or ConfigError."""
    name = name.strip()
    if not CLUSTER_NAME.fullmatch(name):
        raise ConfigError(f"Cluster {name!r} is not a cluster's name: lower-case letters, digits, '-' and "
                          "'_', starting with a letter (see `gpuportal clusters`).")
    return name


def normalize_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"Portal URL {url!r} must start with http:// or https://.")
    return url


def load() -> tuple[Config, bool]:
    """The stored config, and whether its file is readable by others (the caller warns)."""
    path = config_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        exposed = bool(path.stat().st_mode & 0o077)
    except FileNotFoundError:
        return Config(), False
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"Cannot read {path}: {error}") from error
    token_id = data.get("token_id")
    return Config(url=str(data.get("url", "")), token=str(data.get("token", "")),
                  token_id=token_id if isinstance(token_id, int) else None,
                  username=str(data.get("username", "")), cluster=str(data.get("cluster", ""))), exposed


def _toml_value(value: str | int) -> str:
    # A JSON string (ASCII, \uXXXX escapes) is a valid TOML basic string.
    return str(value) if isinstance(value, int) else json.dumps(value)


def save(config: Config) -> Path:
    path = config_path()
    lines = ["# Written by `gpuportal login`. It holds your personal API token: keep it private."]
    for key in ("url", "username", "cluster", "token", "token_id"):
        value = getattr(config, key)
        if value not in ("", None):
            lines.append(f"{key} = {_toml_value(value)}")
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Created 0600 from the start: the token is never readable by others, not even briefly.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
        tmp.chmod(0o600)  # in case a leftover file had other bits
        tmp.replace(path)
    except OSError as error:
        raise ConfigError(f"Cannot write {path}: {error.strerror}") from error
    return path


def resolve(config: Config, *, url: str | None, cluster: str | None = None) -> Config:
    """Settings in force: --url (--cluster), then the environment, then the file."""
    given = url or os.environ.get(URL_ENV) or config.url
    chosen = normalize_url(given) if given else ""
    # The stored token and default cluster belong to the stored portal: never used with another URL.
    same = bool(config.url) and chosen == normalize_url(config.url)
    named = cluster or os.environ.get(CLUSTER_ENV) or (config.cluster if same else "")
    return Config(url=chosen, token=os.environ.get(TOKEN_ENV) or (config.token if same else ""),
                  token_id=config.token_id, username=config.username,
                  cluster=cluster_name(named) if named else "")
