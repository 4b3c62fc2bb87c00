"""SFT data memory benchmark: what reading the SFT parquet costs in memory and time per row.

Writes a parquet in the exporter's layout (rows of ``id``, ``messages`` and a list of media blobs; row groups of 64)
with ``--rows`` rows of ``--blob-kb`` kB of random bytes each, then, in a fresh process per mode, reads
``--reads`` rows at random positions and prints the process's peak resident memory and the time per row:

- **whole table**: ``pyarrow.parquet.read_table`` once, then a row sliced out (what the SFT dataset did before);
- **on demand**: :class:`rl.sft.rows.ParquetRows` (one row group decoded at a time, two kept).

Target: the on-demand peak does not grow with the data: between the smallest and the largest ``--rows`` it grows by
at most ``GROWTH_MB`` (the whole table's grows with the data). The last line says PASS or FAIL.

    python scripts/bench/sft_rows.py                       # 1,000 and 4,000 rows of 100 kB
    python scripts/bench/sft_rows.py --rows 2000 --blob-kb 300 --reads 100
    python scripts/bench/sft_rows.py --parquet runs/testbed/layouts/sft_s0/sft_data/train.parquet --reads 50

With ``--parquet`` the same two modes also read a real SFT parquet. Its rows decode more slowly than the synthetic
ones: the testbed's groups are about 20 MB decoded, and many small blobs a row decode slower than one large one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

GROUP = 64  # rl.sft.export.export_parquet's row group size
GROWTH_MB = (
    64  # the target: the on-demand peak grows by at most this much from the smallest data to the largest
)


def write_data(path: Path, rows: int, blob_kb: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    schema = pa.schema(
        [("id", pa.string()), ("messages", pa.string()), ("blobs", pa.list_(pa.large_binary()))]
    )
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, GROUP):
            n = min(GROUP, rows - start)
            writer.write_table(pa.table({
                "id": [f"r{start + i}" for i in range(n)],
                "messages": ['[{"role": "user", "content": "x"}]'] * n,
                "blobs": pa.array([[rng.bytes(blob_kb * 1024)] for _ in range(n)], pa.list_(pa.large_binary())),
            }, schema=schema))  # fmt: skip


def read(mode: str, path: str, reads: int) -> dict[str, float]:
    """Run in a child process: read ``reads`` random rows by ``mode``; peak RSS (MB) and ms per row."""
    import resource

    import pyarrow.parquet as pq

    from rl.sft.rows import ParquetRows

    start = time.perf_counter()
    if mode == "whole table":
        table = pq.read_table(path, memory_map=True)
        n, get = table.num_rows, lambda i: table.slice(i, 1).to_pylist()[0]
    else:
        rows = ParquetRows(path)
        n, get = len(rows), rows.row
    opened = time.perf_counter() - start
    picks = np.random.default_rng(1).integers(0, n, size=reads)
    start = time.perf_counter()
    size = sum(len(blob) for i in picks for blob in get(int(i))["blobs"])
    per_row = (time.perf_counter() - start) / reads
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"open_s": opened, "ms_per_row": 1000 * per_row, "peak_mb": peak, "bytes": size}


def child(mode: str, path: Path, reads: int) -> dict[str, float]:
    """:func:`read` in a fresh process, so each mode's peak memory is its own."""
    cmd = [sys.executable, __file__, "--reads", str(reads), "--child", mode, str(path)]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[1000, 4000])
    p.add_argument("--blob-kb", type=int, default=100)
    p.add_argument("--reads", type=int, default=200, help="rows read at random positions")
    p.add_argument(
        "--parquet", type=Path, help="also time both modes on this SFT parquet (rl.sft.export's output)"
    )
    p.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(read(args.child[0], args.child[1], args.reads)))
        return 0
    print("| rows | data (MB) | mode | peak RSS (MB) | ms per random row | open (s) |")
    print("| --- | --- | --- | --- | --- | --- |")
    peaks = []
    if args.parquet:
        import pyarrow.parquet as pq

        rows, mb = pq.read_metadata(args.parquet).num_rows, args.parquet.stat().st_size / 2**20
        for mode in ("whole table", "on demand"):
            out = child(mode, args.parquet, args.reads)
            print(f"| {rows} ({args.parquet.name}) | {mb:.0f} | {mode} | {out['peak_mb']:.0f} | "
                  f"{out['ms_per_row']:.2f} | {out['open_s']:.2f} |", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            path = Path(tmp) / f"sft_{rows}.parquet"
            write_data(path, rows, args.blob_kb)
            mb = path.stat().st_size / 2**20
            for mode in ("whole table", "on demand"):
                out = child(mode, path, args.reads)
                if mode == "on demand":
                    peaks.append(out["peak_mb"])
                print(f"| {rows} | {mb:.0f} | {mode} | {out['peak_mb']:.0f} | {out['ms_per_row']:.2f} | "
                      f"{out['open_s']:.2f} |", flush=True)  # fmt: skip
    growth = max(peaks) - min(peaks)
    verdict = "PASS" if growth <= GROWTH_MB else "FAIL"
    print(f"{verdict}: the on-demand peak grew {growth:.0f} MB from {min(args.rows)} to {max(args.rows)} rows "
          f"(target <= {GROWTH_MB} MB)")  # fmt: skip
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
