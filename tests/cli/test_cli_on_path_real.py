"""The CLI where users are (#40): `make up` links `gpuportal` into /usr/local/bin, so a user's login
shell finds it with nothing set up, as every example in the user guide assumes."""

import subprocess

import pytest

from gpuportal_cli import __version__

pytestmark = pytest.mark.integration


def test_a_users_login_shell_finds_the_cli():
    done = subprocess.run(["/usr/sbin/runuser", "-u", "alice", "--", "bash", "-lc", "gpuportal --version"],
                          capture_output=True, text=True, timeout=60, cwd="/", check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"gpuportal, version {__version__}"
