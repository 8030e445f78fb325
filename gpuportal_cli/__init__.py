"""`gpuportal`: the portal's command-line client. It talks only to the REST API (/api/v1/)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gpuportal")
except PackageNotFoundError:  # run from a checkout that is not installed
    __version__ = "0"
