"""Scaling out: remote stores (an S3-compatible server on loopback), threaded and distributed
conversion (a Dask LocalCluster of 2 worker processes).

Everything here talks to 127.0.0.1 only: moto's standalone S3 server is started on a free
loopback port, credentials are fake and given explicitly, and the AWS variables that could send
botocore elsewhere (instance metadata, config files) are neutralised for the module.
"""

from __future__ import annotations

import logging
import math
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import ptd
from ptd import NonTensorData, NonTensorStack, PersistentTensorDict
from ptd.errors import (
    PtdTypeError,
    PtdValueError,
    RemoteAccessError,
    StoreExistsError,
    StoreNotFoundError,
    UnsupportedOperationError,
)
from ptd_cli.main import app

# aiobotocore may leave a coroutine behind when a request is cancelled (not our error to fail on)
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

BUCKET = "ptd-test"


# ----------------------------------------------------------------------------- fixtures
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3:
    """The loopback S3 server: its storage options, an s3fs filesystem, helpers."""

    def __init__(self, endpoint: str) -> None:
        import s3fs

        self.endpoint = endpoint
        self.options: dict[str, Any] = {
            "endpoint_url": endpoint,
            "key": "testing",
            "secret": "testing",
        }
        self.fs = s3fs.S3FileSystem(**self.options)

    def cli_options(self, options: dict[str, Any] | None = None) -> list[str]:
        out: list[str] = []
        for k, v in (options or self.options).items():
            out += ["-O", f"{k}={v}"]
        return out

    def objects(self, url: str) -> dict[str, bytes]:
        """Every object under ``url``: relative key -> bytes."""
        root = url.removeprefix("s3://").rstrip("/")
        self.fs.invalidate_cache()
        return {k[len(root) + 1 :]: self.fs.cat_file(k) for k in self.fs.find(root)}


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    pytest.importorskip("s3fs")
    server_mod = pytest.importorskip("moto.server")
    with pytest.MonkeyPatch.context() as mp:
        # never ask anything but the loopback server: no instance metadata, no user config
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        mp.setenv("AWS_CONFIG_FILE", os.devnull)
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        for var in (
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_PROFILE",
            "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_S3",
        ):
            mp.delenv(var, raising=False)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        port = _free_port()
        server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        try:
            s = S3(f"http://127.0.0.1:{port}")
            s.fs.mkdir(BUCKET)
            yield s
        finally:
            server.stop()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A Dask LocalCluster: 2 worker processes, 1 thread each, on loopback."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=logging.ERROR,
    ) as c:
        yield c


def _data(n: int = 40) -> dict[str, Any]:
    return {
        "obs": torch.randn(n, 5, 3),
        "action": torch.arange(n, dtype=torch.int64),
        "half": torch.randn(n, 2).to(torch.bfloat16),
        "done": torch.arange(n) % 3 == 0,
        "nested": {"reward": torch.randn(n, 1, dtype=torch.float64)},
        "label": NonTensorData("episode"),
        "tags": NonTensorStack(*[f"t{i}" for i in range(n)]),
    }


@pytest.fixture
def h5_src(tmp_path: Path) -> str:
    """An HDF5 store written by ptd: chunked by 7 rows, nested, non-tensors, bfloat16."""
    path = str(tmp_path / "src.h5")
    PersistentTensorDict.from_dict(_data(), path, batch_size=[40], chunks=(7,)).close()
    return path


@pytest.fixture
def zarr_src(tmp_path: Path) -> str:
    """A zstd-compressed zarr store chunked by 6 rows."""
    path = str(tmp_path / "src.zarr")
    h5 = str(tmp_path / "tmp.h5")
    PersistentTensorDict.from_dict(_data(), h5, batch_size=[40]).close()
    ptd.convert(h5, path, chunks=6, compression="zstd")
    return path


def _files(root: str) -> dict[str, bytes]:
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root).replace(os.sep, "/")] = Path(p).read_bytes()
    return out


def _h5_content(path: str) -> dict[str, Any]:
    """Every group's and dataset's attributes, every dataset's dtype, shape and raw bytes."""
    out: dict[str, Any] = {}

    def plain(attrs: Any) -> dict[str, Any]:
        return {k: np.asarray(v).tolist() for k, v in attrs.items()}

    with h5py.File(path, "r") as f:
        out["/"] = plain(f.attrs)

        def visit(name: str, node: Any) -> None:
            if isinstance(node, h5py.Dataset):
                data = np.asarray(node[()])
                raw = data.tobytes() if data.dtype.kind != "O" else repr(data.tolist()).encode()
                out[name] = (str(node.dtype), node.shape, raw, plain(node.attrs))
            else:
                out[name] = plain(node.attrs)

        f.visititems(visit)
    return out


def _invoke(*args: Any, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def _one_line_error(result: Any, *needles: str) -> str:
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# ----------------------------------------------------------------------------- remote stores
def test_h5_to_s3_zarr_to_h5_round_trip_is_byte_exact(s3: S3, h5_src: str, tmp_path: Path) -> None:
    url = f"s3://{BUCKET}/roundtrip.zarr"
    r = ptd.convert(h5_src, url, storage_options=s3.options)
    assert (r.dst, r.dst_format, r.tensors) == (url, "zarr", 5)
    # the same copy to a local directory: the objects in the bucket are those files, byte for byte
    local = str(tmp_path / "local.zarr")
    lr = ptd.convert(h5_src, local)
    assert (r.dst_bytes, r.stored_nbytes) == (lr.dst_bytes, lr.stored_nbytes)  # listed from S3
    assert s3.objects(url) == _files(local)
    back = str(tmp_path / "back.h5")
    ptd.convert(url, back, storage_options=s3.options)
    local_back = str(tmp_path / "local_back.h5")
    ptd.convert(local, local_back)
    assert _h5_content(back) == _h5_content(local_back)
    # and the data is the source's, bit for bit
    src, out = _h5_content(h5_src), _h5_content(back)
    for key in ("obs", "action", "half", "done", "nested/reward"):
        assert out[key][:3] == src[key][:3], key
    with PersistentTensorDict.from_zarr(url, storage_options=s3.options) as p:
        assert p.batch_size == torch.Size([40])
        assert p["label"] == "episode"
        assert p["tags"][3] == "t3"


def test_zarr_to_s3_zarr_is_byte_exact(s3: S3, zarr_src: str, tmp_path: Path) -> None:
    url = f"s3://{BUCKET}/copy.zarr"
    ptd.convert(zarr_src, url, storage_options=s3.options)
    local = str(tmp_path / "copy.zarr")
    ptd.convert(zarr_src, local)
    assert s3.objects(url) == _files(local)
    # an existing destination is refused, replaced with overwrite
    with pytest.raises(StoreExistsError, match="already exists"):
        ptd.convert(zarr_src, url, storage_options=s3.options)
    ptd.convert(zarr_src, url, storage_options=s3.options, overwrite=True, chunks=10)
    assert ptd.info(url, storage_options=s3.options).to_dict()["entries"][0]["chunks"][0] == 10
    # s3 zarr -> s3 zarr (re-chunk into another prefix), read back through the library
    url2 = f"s3://{BUCKET}/copy2.zarr"
    ptd.convert(url, url2, storage_options=s3.options, chunks=40, compression="none")
    with (
        PersistentTensorDict.from_zarr(url2, storage_options=s3.options) as a,
        PersistentTensorDict.from_zarr(zarr_src) as b,
    ):
        for key in ("obs", "action", "half", "done", ("nested", "reward")):
            assert torch.equal(a[key], b[key]), key


def test_remote_h5_reads_read_only(s3: S3, h5_src: str) -> None:
    url = f"s3://{BUCKET}/data.h5"
    s3.fs.put(h5_src, url)
    with (
        PersistentTensorDict.from_h5(url, storage_options=s3.options) as p,
        PersistentTensorDict.from_h5(h5_src) as q,
    ):
        assert torch.equal(p["obs"][5:9], q["obs"][5:9])
        assert torch.equal(p["half"], q["half"])
    assert ptd.info(url, storage_options=s3.options).format == "h5"
    assert ptd.validate(url, storage_options=s3.options).valid
    with pytest.raises(UnsupportedOperationError, match="read-only"):
        PersistentTensorDict(filename=url, mode="r+", storage_options=s3.options)
    with pytest.raises(PtdValueError, match="HDF5 destinations must be local"):
        ptd.convert(h5_src, f"s3://{BUCKET}/out.h5", storage_options=s3.options)


def test_remote_errors_are_one_clear_line(s3: S3, h5_src: str) -> None:
    with pytest.raises(StoreNotFoundError, match="bucket 'no-such-bucket' does not exist"):
        ptd.info("s3://no-such-bucket/x.zarr", storage_options=s3.options)
    with pytest.raises(StoreNotFoundError, match="bucket 'no-such-bucket' does not exist"):
        ptd.convert(h5_src, "s3://no-such-bucket/x.zarr", storage_options=s3.options)
    with pytest.raises(StoreNotFoundError, match="does not exist"):
        ptd.info(f"s3://{BUCKET}/missing.zarr", storage_options=s3.options)
    with pytest.raises(RemoteAccessError, match="no credentials"):
        ptd.info(f"s3://{BUCKET}/missing.zarr", storage_options={"endpoint_url": s3.endpoint})
    url = f"s3://{BUCKET}/private.zarr"
    ptd.convert(h5_src, url, storage_options=s3.options)
    with pytest.raises(RemoteAccessError, match="refused"):
        ptd.info(url, storage_options={"endpoint_url": s3.endpoint, "anon": True})
    # the CLI: exit 2, one line on stderr
    r = _invoke("inspect", "s3://no-such-bucket/x.zarr", *s3.cli_options())
    _one_line_error(r, "no-such-bucket", "does not exist")
    r = _invoke("inspect", f"s3://{BUCKET}/x.zarr", "-O", f"endpoint_url={s3.endpoint}")
    _one_line_error(r, "no credentials", "key=")
    r = _invoke("inspect", f"s3://{BUCKET}/x.zarr", "-O", "nonsense")
    _one_line_error(r, "--storage-option", "KEY=VALUE")


def test_cli_with_urls(s3: S3, h5_src: str, tmp_path: Path) -> None:
    url = f"s3://{BUCKET}/cli.zarr"
    r = _invoke("convert", h5_src, url, *s3.cli_options(), "--json")
    assert r.exit_code == 0, r.stderr
    assert r.stdout
    assert '"dst_format": "zarr"' in r.stdout
    r = _invoke("inspect", url, *s3.cli_options(), "--json")
    assert r.exit_code == 0, r.stderr
    assert '"format": "zarr"' in r.stdout, r.stderr
    r = _invoke("validate", url, *s3.cli_options())
    assert r.exit_code == 0, r.stderr
    back = tmp_path / "cli_back.h5"
    r = _invoke("convert", url, back, *s3.cli_options())
    assert r.exit_code == 0, r.stderr
    assert back.exists(), r.stderr
    r = _invoke("memmap", url, tmp_path / "mm", *s3.cli_options(), "--json")
    assert r.exit_code == 0, r.stderr
    loaded = ptd.containers.memmap.load_memmap(tmp_path / "mm")
    with PersistentTensorDict.from_h5(h5_src) as p:
        assert torch.equal(loaded["obs"], p["obs"])


def test_memory_and_file_urls(h5_src: str, tmp_path: Path) -> None:
    url = f"memory://ptd-test/{tmp_path.name}/x.zarr"  # the memory filesystem is per process
    ptd.convert(h5_src, url)
    assert ptd.info(url).totals.tensors == 5
    back = tmp_path / "back.h5"
    ptd.convert(url, back)
    assert _h5_content(str(back)) == _h5_content(str(ptd.convert(url, tmp_path / "b2.h5").dst))
    file_url = (tmp_path / "f.zarr").as_uri()
    r = ptd.convert(Path(h5_src).as_uri(), file_url)
    assert r.dst == str(tmp_path / "f.zarr")
    assert (tmp_path / "f.zarr" / "zarr.json").exists()
    with pytest.raises(PtdValueError, match="storage_options only apply"):
        PersistentTensorDict(filename=h5_src, storage_options={"anon": True})


# ----------------------------------------------------------------------------- threads
@pytest.mark.parametrize("source", ["h5", "zarr"])
def test_workers_give_the_same_store(
    source: str, h5_src: str, zarr_src: str, tmp_path: Path
) -> None:
    src = h5_src if source == "h5" else zarr_src
    to = "zarr" if source == "h5" else "h5"
    # zstd on zarr: gzip chunks carry a timestamp, so they are not comparable byte for byte
    codec = "zstd" if to == "zarr" else "gzip"
    one = ptd.convert(src, tmp_path / f"one.{to}", chunks=5, compression=codec)
    seen: list[tuple[int, int]] = []
    four = ptd.convert(
        src,
        tmp_path / f"four.{to}",
        chunks=5,
        compression=codec,
        workers=4,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert four.workers == 4
    assert four.regions == one.regions > 1
    assert seen[-1] == (four.nbytes, four.nbytes)
    if to == "zarr":
        assert _files(four.dst) == _files(one.dst)
    else:
        assert _h5_content(four.dst) == _h5_content(one.dst)
    with pytest.raises(PtdValueError, match="workers"):
        ptd.convert(src, tmp_path / "x.zarr", workers=0)
    r = _invoke("convert", src, tmp_path / f"cli.{to}", "--chunks", "5", "--workers", "2")
    assert r.exit_code == 0, r.stderr
    assert "copied by 2 threads" in r.stdout, r.stderr


def test_workers_never_share_a_destination_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Source chunks of 7 rows, destination chunks of 3, slabs of 2 rows' budget: the two
    alignments cannot agree, and a slab cut along the source's chunks would share a
    destination chunk with the next one. Written by 4 threads at once, each such chunk then
    kept only one slab's rows (zarr reads, merges and rewrites a chunk per write): every run
    came out wrong before the slabs followed the destination."""
    import zarr

    from ptd.transfer import slabs

    n = 7 * 60
    data = np.arange(n * 8, dtype="f4").reshape(n, 8)
    src = tmp_path / "s.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("x", data=data, chunks=(7, 8))
    monkeypatch.setattr(slabs, "SLAB_BYTES", 64)
    r = ptd.convert(src, tmp_path / "d.zarr", workers=4, chunks=3)
    assert r.regions == n // 3
    a = zarr.open_array(str(tmp_path / "d.zarr" / "x"), mode="r")
    assert a.chunks == (3, 8)
    np.testing.assert_array_equal(a[...], data)


@pytest.mark.parametrize(
    ("src_c", "dst_c", "row", "budget"),
    [(7, 3, 32, 64), (7000, 3000, 10_000, 16 << 20), (4, 6, 8, 1000), (5, 5, 4, 7), (9, 2, 1, 3)],
)
def test_slabs_cover_whole_destination_chunks(
    src_c: int, dst_c: int, row: int, budget: int
) -> None:
    from ptd.transfer.slabs import slab_rows

    n = 50 * src_c * dst_c + 1
    rows = slab_rows((n, row), 1, src_chunk_rows=src_c, dst_chunk_rows=dst_c, budget=budget)
    assert rows % dst_c == 0
    if math.lcm(src_c, dst_c) * row <= max(2 * budget, src_c * row):  # they agree
        assert rows % src_c == 0


# ----------------------------------------------------------------------------- distributed
@pytest.mark.slow
def test_distributed_convert_equals_local(
    cluster: Any, h5_src: str, zarr_src: str, tmp_path: Path
) -> None:
    from ptd.transfer.distributed import convert_distributed

    local = ptd.convert(h5_src, tmp_path / "local.zarr", chunks=4)
    seen: list[int] = []
    dist = convert_distributed(
        h5_src,
        tmp_path / "dist.zarr",
        scheduler=cluster.scheduler_address,
        chunks=4,
        progress=lambda done, total: seen.append(done),
    )
    assert dist.scheduler == cluster.scheduler_address
    assert dist.workers == 0
    assert dist.regions == local.regions > 2
    assert seen[-1] == dist.nbytes
    assert _files(dist.dst) == _files(local.dst)  # consolidated metadata included
    assert not [p for p in os.listdir(tmp_path) if ".ptd-tmp-" in p]
    # a zarr source (zstd chunks), re-chunked, through a Client
    from distributed import Client

    with Client(cluster, set_as_default=False) as client:
        a = ptd.convert(zarr_src, tmp_path / "a.zarr", chunks=12)
        b = ptd.convert(zarr_src, tmp_path / "b.zarr", chunks=12, scheduler=client)
    assert _files(b.dst) == _files(a.dst)
    with pytest.raises(PtdValueError, match="zarr destinations only"):
        convert_distributed(zarr_src, tmp_path / "x.h5", scheduler=cluster.scheduler_address)


@pytest.mark.slow
def test_distributed_cli_to_s3(cluster: Any, s3: S3, zarr_src: str, tmp_path: Path) -> None:
    url = f"s3://{BUCKET}/dist.zarr"
    r = _invoke(
        "convert",
        zarr_src,
        url,
        "--scheduler",
        cluster.scheduler_address,
        "--chunks",
        "8",
        *s3.cli_options(),
    )
    assert r.exit_code == 0, (r.stderr, r.exception)
    assert "tasks on the Dask cluster" in r.stdout
    local = ptd.convert(zarr_src, tmp_path / "local.zarr", chunks=8)
    assert s3.objects(url) == _files(local.dst)
    r = _invoke(
        "convert", zarr_src, tmp_path / "y.zarr", "--scheduler", "tcp://a:1", "--workers", "2"
    )
    _one_line_error(r, "--workers and --scheduler")


def test_distributed_errors(monkeypatch: pytest.MonkeyPatch, zarr_src: str, tmp_path: Path) -> None:
    import sys

    import ptd.transfer.distributed as dist

    with monkeypatch.context() as mp:
        mp.setitem(sys.modules, "distributed", None)  # as if dask were not installed
        with pytest.raises(UnsupportedOperationError, match=r"pip install 'ptd\[distributed\]'"):
            ptd.convert(zarr_src, tmp_path / "x.zarr", scheduler="tcp://127.0.0.1:1")
        r = _invoke("convert", zarr_src, tmp_path / "x.zarr", "--scheduler", "tcp://127.0.0.1:1")
        _one_line_error(r, "ptd[distributed]")
    pytest.importorskip("distributed")
    monkeypatch.setattr(dist, "CONNECT_TIMEOUT", "0.5s")
    with pytest.raises(RemoteAccessError, match="cannot connect to the Dask scheduler"):
        ptd.convert(zarr_src, tmp_path / "x.zarr", scheduler=f"tcp://127.0.0.1:{_free_port()}")
    assert not (tmp_path / "x.zarr").exists()
    with pytest.raises(PtdValueError, match="memory://"):
        ptd.convert(zarr_src, "memory://x.zarr", scheduler="tcp://127.0.0.1:1")


@pytest.mark.slow
def test_distributed_takes_every_conversion_argument(
    cluster: Any, h5_src: str, tmp_path: Path
) -> None:
    """convert_distributed and convert share one argument set: layout, skip_unsupported,
    batch_size... give the same store on a cluster as locally."""
    from ptd.transfer.distributed import convert_distributed

    with h5py.File(h5_src, "a") as f:
        f["ref"] = f["obs"].regionref[0:2]  # an HDF5 region reference: zarr cannot hold it
        f["objref"] = f["obs"].ref  # an object reference: carried as the path it names
    kw: dict[str, Any] = {"layout": "random-access", "skip_unsupported": True}
    local = ptd.convert(h5_src, tmp_path / "local.zarr", **kw)
    dist = convert_distributed(
        h5_src, tmp_path / "dist.zarr", scheduler=cluster.scheduler_address, **kw
    )
    assert [d["key"] for d in dist.not_copied] == [d["key"] for d in local.not_copied]
    assert "ref" in [d["key"] for d in dist.not_copied]
    assert _files(dist.dst) == _files(local.dst)


def test_conversion_arguments_are_one_set(h5_src: str, tmp_path: Path) -> None:
    import inspect

    from ptd.transfer.distributed import convert_distributed
    from ptd.transfer.options import ConvertArgs

    for fn in (ptd.convert, convert_distributed):
        kinds = {p.kind for p in inspect.signature(fn).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD in kinds  # the options: ConvertArgs
    assert {"layout", "skip_unsupported", "batch_size", "batch_dims"} <= set(
        ConvertArgs.__annotations__
    )
    with pytest.raises(PtdTypeError, match=r"unknown conversion argument.*compresion"):
        ptd.convert(h5_src, tmp_path / "x.zarr", compresion="zstd")
