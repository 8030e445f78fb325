"""The documentation site built once per test session, from the checkout, as CI builds it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.prefix) / "bin" / "mkdocs"


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    done = subprocess.run([MKDOCS, "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return site
