"""The notebook templates users get, read from the checkout (templates/notebooks/).

Tests find a template by what it is: its kernel, the ~/logs folder its runs write to, or a line of
its code; never by its file name. Renaming a notebook changes nothing in the tests
(tests/notebooks/test_notebooks.py::test_renaming_a_notebook_changes_only_its_name).
"""

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[1] / "templates" / "notebooks"
_LOGS = re.compile(r"~/logs/([a-z0-9-]+)")


@dataclass(frozen=True)
class NotebookTemplate:
    path: Path
    kernel: str  # the kernelspec it opens with
    logs: str | None  # the folder under ~/logs its runs write to (its README line says which)

    @property
    def name(self) -> str:
        return self.path.name

    def code_cells(self) -> list[str]:
        nb = nbformat.read(self.path, as_version=4)
        return [cell.source for cell in nb.cells if cell.cell_type == "code"]

    def code_cell_with(self, text: str) -> int:
        """The index, among the code cells, of the first one containing `text`."""
        return next(i for i, source in enumerate(self.code_cells()) if text in source)


def notebook_templates(directory: Path = NOTEBOOKS) -> list[NotebookTemplate]:
    found = []
    for path in sorted(directory.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        prose = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
        folders = set(_LOGS.findall(prose))
        assert len(folders) <= 1, f"{path.name} names several ~/logs folders: {folders}"
        found.append(NotebookTemplate(path, nb.metadata.kernelspec.name, folders.pop() if folders else None))
    return found


def notebook_template(*, logs: str | None = None, code: str | None = None,
                      directory: Path = NOTEBOOKS) -> NotebookTemplate:
    """The one template whose runs log to ~/logs/`logs`, or whose code contains `code`."""
    matches = [template for template in notebook_templates(directory)
               if (logs is None or template.logs == logs)
               and (code is None or any(code in source for source in template.code_cells()))]
    assert len(matches) == 1, f"expected one template (logs={logs!r}, code={code!r}), found {matches}"
    return matches[0]


def cluster_notebook(directory: Path = NOTEBOOKS) -> NotebookTemplate:
    """The "using this cluster" template: it prints the job's Slurm variables and GPUs."""
    return notebook_template(code='"CUDA_VISIBLE_DEVICES"', directory=directory)
