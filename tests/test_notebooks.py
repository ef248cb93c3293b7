"""The notebooks in notebooks/ run top to bottom, show pictures, write no files, show streamed
text as one output, and each jupytext source (NAME.py, the one to review and edit) matches its
paired NAME.ipynb.

A notebook that trains for a time budget reads it from TINYGRAD_LITE_NOTEBOOK_MINUTES; here it is
SHORT_BUDGET_MINUTES, so the run proves the notebook works without taking the full minute.

Needs the `notebooks` extra (nbclient, jupytext, ipykernel); skipped without it. Select these
tests alone with `-m notebooks` or leave them out with `-m "not notebooks"`.
"""
import os
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.notebooks

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("[0-9]*.py"))
IMAGE_TYPES = ("image/svg+xml", "image/png")
TIMEOUT_PER_CELL = 600
SHORT_BUDGET_MINUTES = "0.25"
SYNC_HINT = "edit the .py, then run `jupytext --sync notebooks/{name}.py`"


def _cells(notebook) -> list:
    return [(cell.cell_type, cell.source.strip()) for cell in notebook.cells]


def _files_under(directory: Path) -> set:
    return {p.relative_to(directory) for p in directory.rglob("*") if "__pycache__" not in p.parts}


def _kernel_manager():
    """A manager for this interpreter's own ipykernel: only the built-in spec, which runs
    sys.executable, so a `python3` kernelspec installed elsewhere cannot take over."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    specs = KernelSpecManager(kernel_dirs=[], ensure_native_kernel=True)
    return KernelManager(kernel_name="python3", kernel_spec_manager=specs)


def test_there_are_at_least_three_notebooks():
    assert len(SOURCES) >= 3, f"expected >= 3 notebooks in {NOTEBOOKS}, found {[p.name for p in SOURCES]}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_paired_ipynb_matches_the_source_and_has_no_outputs(source):
    jupytext = pytest.importorskip("jupytext")
    nbformat = pytest.importorskip("nbformat")
    paired = source.with_suffix(".ipynb")
    assert paired.is_file(), f"{paired.name} is missing; {SYNC_HINT.format(name=source.stem)}"
    from_source = jupytext.read(source)
    stored = nbformat.read(paired, as_version=4)
    nbformat.validate(stored)
    assert _cells(stored) == _cells(from_source), (
        f"{paired.name} and {source.name} have different cells; {SYNC_HINT.format(name=source.stem)}")
    with_outputs = [i for i, cell in enumerate(stored.cells)
                    if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)]
    assert not with_outputs, (f"{paired.name} stores outputs in cells {with_outputs}; commit it without "
                              f"outputs ({SYNC_HINT.format(name=source.stem)})")
    assert stored.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_runs_shows_pictures_and_writes_no_files(source, monkeypatch):
    jupytext = pytest.importorskip("jupytext")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nbformat = pytest.importorskip("nbformat")
    notebook = jupytext.read(source)
    notebook.cells.insert(0, nbformat.v4.new_code_cell("import sys; print(sys.prefix)"))
    before = _files_under(NOTEBOOKS)
    monkeypatch.setenv("TINYGRAD_LITE_NOTEBOOK_MINUTES", SHORT_BUDGET_MINUTES)  # the kernel inherits it
    with tempfile.TemporaryDirectory() as cwd:
        client = nbclient.NotebookClient(notebook, km=_kernel_manager(), timeout=TIMEOUT_PER_CELL,
                                         resources={"metadata": {"path": cwd}})
        try:  # cleanup_kc: shut the kernel down and close its sockets now (nbclient keeps a kernel
            # whose manager it was given alive, and its sockets then warn when collected)
            client.execute(cleanup_kc=True)
        except nbclient.exceptions.CellExecutionError as exc:
            pytest.fail(f"{source.name} failed:\n{exc}")
        left = sorted(os.listdir(cwd))
    assert not left, f"{source.name} wrote {left} into its working directory"
    written = sorted(str(p) for p in _files_under(NOTEBOOKS) - before)
    assert not written, f"{source.name} wrote {written} into notebooks/"

    prefix = "".join(out.get("text", "") for out in notebook.cells[0].outputs).strip()
    assert prefix == sys.prefix, f"the kernel ran in {prefix!r}, not in this interpreter's {sys.prefix!r}"
    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]
    assert not [out for out in outputs if out.output_type == "error"]
    images = [kind for out in outputs for kind in out.get("data", {}) if kind in IMAGE_TYPES]
    assert images, f"{source.name} displayed no picture (expected {' or '.join(IMAGE_TYPES)} outputs)"
    graphs_not_drawn = [cell.source.splitlines()[-1] for cell in notebook.cells
                        if cell.cell_type == "code" and "draw_graph(" in cell.source
                        and not any(kind in out.get("data", {}) for out in cell.outputs for kind in IMAGE_TYPES)]
    assert not graphs_not_drawn, f"{source.name}: no picture from the cells ending {graphs_not_drawn}"
    streamed = [len(cell.outputs) for cell in notebook.cells if cell.cell_type == "code" and "generate(" in cell.source]
    assert all(n == 1 for n in streamed), (f"{source.name}: a cell streaming generate's tokens made {streamed} "
                                           "outputs; show them in one display updated in place")
