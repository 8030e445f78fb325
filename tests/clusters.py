"""The bed's two clusters as cluster files (#38), for tests of a site with several."""

from pathlib import Path

DEFAULT = 'name = "gpuportal"\ntitle = "GPU cluster"\ndefault = true\n'
B = 'name = "cluster-b"\ntitle = "Cluster B"\n'


def clusters_dir(tmp_path: Path, *, b: str = "", name: str = "clusters.d") -> str:
    """A CLUSTERS_DIR of gpuportal (the default) and cluster-b, with `b`'s lines added to cluster-b's."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "gpuportal.toml").write_text(DEFAULT)
    (folder / "cluster-b.toml").write_text(B + b)
    return str(folder)
