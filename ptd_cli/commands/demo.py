"""``ptd demo [DIR]``: build a small example dataset and run every command on it."""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from typing import Any

import typer
from rich.text import Text

from .._common import ExitCode, errors_handled, fail, out_console

SHORT_HELP = "Build a small example dataset and run every command on it."

HELP = """Build a small example dataset (nested groups, per-row strings, several dtypes including bfloat16) as an HDF5 file, then run inspect, convert (h5 -> zarr -> h5), validate and memmap on it, printing each step. Files go to DIR (created if needed; the demo's own files in it are replaced), or to a temporary directory that is removed at the end."""

ROWS = 64


def make_example(path: str) -> None:
    """Write the demo dataset (an h5 file) at ``path``."""
    import torch

    import ptd

    g = torch.Generator().manual_seed(0)
    n = ROWS
    data = ptd.TensorDict(
        {
            "obs": torch.randn(n, 4, generator=g),
            "action": torch.randint(0, 4, (n,), generator=g),
            "reward": torch.randn(n, generator=g).to(torch.bfloat16),
            "done": torch.rand(n, generator=g) > 0.9,
            "pixels": torch.randint(0, 256, (n, 3, 8, 8), generator=g, dtype=torch.uint8),
            "next": ptd.TensorDict(
                {"obs": torch.randn(n, 4, generator=g), "step": torch.arange(n, dtype=torch.int32)},
                batch_size=[n],
            ),
            "label": ptd.NonTensorStack(*[f"episode-{i // 16}" for i in range(n)]),
            "env": ptd.NonTensorData("CartPole-v1", batch_size=[n]),
        },
        batch_size=[n],
    )
    ptd.PersistentTensorDict.from_dict(data, path, backend="h5").close()


def _step(console: Any, n: int, title: str, command: str) -> None:
    console.print()
    console.rule(Text(f"{n}. {title}", style="bold"), align="left")
    console.print(Text(f"$ {command}", style="dim"))


def demo(
    ctx: typer.Context,
    directory: str | None = typer.Argument(
        None,
        metavar="DIR",
        help="Where to write the files (default: a temporary directory).",
        show_default=False,
    ),
) -> None:
    console = out_console()
    keep = directory is not None
    with errors_handled(ctx, directory):
        root = (
            os.path.abspath(directory)
            if directory is not None
            else tempfile.mkdtemp(prefix="ptd-demo-")
        )
        if keep:
            if os.path.exists(root) and not os.path.isdir(root):
                raise fail(f"{root} exists and is not a directory")
            os.makedirs(root, exist_ok=True)
        try:
            _run(console, root)
        finally:
            if not keep:
                shutil.rmtree(root, ignore_errors=True)
    if keep:
        console.print(Text(f"done: the files are in {root}", style="bold green"))
    elif os.path.exists(root):  # pragma: no cover - rmtree could not remove everything
        console.print(Text(f"done: the files are in {root} (could not remove it)", style="bold"))
    else:
        console.print(
            Text(
                "done: the files were in a temporary directory, removed now "
                "(`ptd demo DIR` keeps them)",
                style="bold green",
            )
        )
    raise typer.Exit(int(ExitCode.OK))


def _run(console: Any, root: str) -> None:
    import ptd

    from .convert import print_summary as print_convert
    from .inspect import render
    from .memmap import print_summary as print_memmap
    from .validate import _render as render_report

    h5 = os.path.join(root, "demo.h5")
    zarr = os.path.join(root, "demo.zarr")
    back = os.path.join(root, "demo-roundtrip.h5")
    mm = os.path.join(root, "demo.memmap")
    schema = os.path.join(root, "demo-schema.json")
    rel = os.path.basename
    console.print(Text(f"working in {root}", style="dim"))

    _step(
        console,
        1,
        "build an example dataset",
        f"python: PersistentTensorDict.from_dict(..., {rel(h5)!r})",
    )
    for p in (h5, zarr, back, mm):
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.unlink(p)
    make_example(h5)
    console.print(f"wrote {rel(h5)}: {ROWS} rows", markup=False)

    _step(console, 2, "inspect it", f"ptd inspect {rel(h5)}")
    info = ptd.info(h5)
    render(info)
    with open(schema, "w", encoding="utf-8") as f:
        f.write(info.to_json())

    _step(
        console,
        3,
        "convert to Zarr (zstd) and back to HDF5",
        f"ptd convert {rel(h5)} --compression zstd && ptd convert {rel(zarr)} {rel(back)}",
    )
    for result in (ptd.convert(h5, zarr, compression="zstd"), ptd.convert(zarr, back)):
        print_convert(console, result, rel)
    render(ptd.info(zarr, depth=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        a = ptd.PersistentTensorDict.from_h5(h5)
        b = ptd.PersistentTensorDict.from_h5(back)
        try:
            same = _same(a.to_tensordict(), b.to_tensordict())
        finally:
            a.close()
            b.close()
    console.print(
        Text("round trip h5 -> zarr -> h5: values and dtypes equal", style="green")
        if same
        else Text("round trip h5 -> zarr -> h5 differs!", style="bold red")
    )

    _step(
        console,
        4,
        "validate all three against the batch size and the saved schema",
        f"ptd validate {rel(h5)} {rel(zarr)} {rel(back)} --schema {rel(schema)}",
    )
    for p in (h5, zarr, back):
        render_report(console, ptd.validate(p, schema=schema))
    console.print(Text("and a wrong batch size is caught:", style="dim"))
    console.print(Text(f"$ ptd validate {rel(zarr)} --batch-size 32", style="dim"))
    report = ptd.validate(zarr, batch_size=[32])
    render_report(console, report, "error")

    _step(
        console, 5, "export to a tensordict memmap directory", f"ptd memmap {rel(zarr)} {rel(mm)}"
    )
    try:
        from ptd.containers.memmap import export_memmap
    except ImportError:  # pragma: no cover - memmap support absent
        console.print("(memmap export is not available in this version)", markup=False)
    else:
        print_memmap(console, zarr, export_memmap(zarr, mm), rel)
    console.print()


def _same(a: Any, b: Any) -> bool:
    import torch

    ka = sorted(a.keys(True, True), key=str)
    kb = sorted(b.keys(True, True), key=str)
    if ka != kb:
        return False
    for k in ka:
        x, y = a.get(k), b.get(k)
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or x.dtype != y.dtype or not torch.equal(x, y):
                return False
        else:
            xv = x.tolist() if hasattr(x, "tolist") else getattr(x, "data", x)
            yv = y.tolist() if hasattr(y, "tolist") else getattr(y, "data", y)
            if xv != yv:
                return False
    return True
