"""Rendering helpers: byte formatting, tables, JSON. Every number gets its unit here."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from planner.units import GB_BYTES, GIB_BYTES, KIB_BYTES

# Width for output that is not a terminal (pipes, files, CI logs) unless COLUMNS says otherwise:
# wide enough that no table column is truncated.
PIPE_WIDTH = 120
# Upper bound when measuring a table's narrowest whole layout.
WIDEST_TABLE = 10_000


def console() -> Console:
    """A stdout console; rich goes plain by itself under NO_COLOR or when not a TTY."""
    width = None if sys.stdout.isatty() or "COLUMNS" in os.environ else PIPE_WIDTH
    return Console(highlight=False, soft_wrap=False, width=width)


def gb_gib(n: int) -> str:
    """Bytes as datasheet GB and engine-log GiB side by side."""
    return f"{n / GB_BYTES:,.2f} GB / {n / GIB_BYTES:,.2f} GiB"


def per_token(n: int) -> str:
    """Per-token bytes: exact bytes plus KiB."""
    return f"{n:,} B ({n / KIB_BYTES:,.1f} KiB)"


# The report formats `diagnose` and `drift` print (`--format`; `--json` is `--format json`).
REPORT_FORMATS = ("table", "json", "github")


def report_format(json_out: bool, given: str | None) -> str:
    """The format `--format` / `--json` ask for: table unless one is given; another format
    beside --json is an error, not a choice between them."""
    from planner.errors import InputError

    if json_out and given not in (None, "json"):
        raise InputError("--format", f"{given!r} with --json (which is --format json)")
    fmt = "json" if json_out else (given or "table")
    if fmt not in REPORT_FORMATS:
        raise InputError("--format", f"{fmt!r}; accepted: {', '.join(REPORT_FORMATS)}")
    return fmt


def emit_json(payload: Any) -> None:
    """Stable, strict JSON on stdout: sorted keys, two-space indent, trailing newline.

    NaN and infinities are not JSON: a figure that overflowed is refused, not printed.
    """
    from planner.errors import InputError

    try:
        text = json.dumps(payload, indent=2, sort_keys=True, allow_nan=False)
    except ValueError as exc:
        raise InputError(
            "--json", "a figure is not finite: an input is too large to compute with"
        ) from exc
    sys.stdout.write(text + "\n")


def fit_columns(table: Table, wrap: tuple[str, ...] = ()) -> Table:
    """Never cut a number or an id: each column is exactly as wide as its widest cell.

    Headers fold onto more lines instead of ending in an ellipsis; the columns named in `wrap`
    (free text, such as a device name) take the width left and wrap between words.
    """
    for column in table.columns:
        header_words = str(column.header).split() or [""]
        longest_header_word = max(len(w) for w in header_words)
        column.overflow = "fold"
        if str(column.header) in wrap:
            words = [w for cell in column.cells for w in str(cell).split()]
            column.min_width = max([len(w) for w in words] + [longest_header_word])
            continue
        widest = max((len(str(cell)) for cell in column.cells), default=1)
        column.width = max(widest, longest_header_word)
    return table


def print_table(out: Console, table: Table) -> None:
    """Print a table whole. One narrower than its columns need is folded instead: each row
    becomes a block of `header  value` lines under its first cell, so no number is cut and
    no line is wider than the console (short of a single value longer than it)."""
    measured = Console(width=WIDEST_TABLE).measure(table)
    if measured.minimum <= out.width:
        title = str(table.title) if table.title else ""
        if len(title) > measured.maximum:
            # a title wider than its columns: on a line of its own, not wrapped to their width
            table.title = None
            out.print(title, style="table.title", markup=False)
        out.print(table)
        return
    out.print(folded(table), markup=False, crop=False, overflow="ignore")


def folded(table: Table) -> str:
    """A table as one block per row: its first cell, then each other column's header and
    value on a line of their own (rows without a header keep one line per cell)."""
    columns = table.columns
    headers = [" ".join(str(c.header).split()) for c in columns]
    cells = [[" ".join(str(cell).split()) for cell in c.cells] for c in columns]
    rows = max((len(c) for c in cells), default=0)
    label = max((len(h) for h in headers[1:]), default=0)
    lines = [str(table.title)] if table.title else []
    for r in range(rows):
        values = [c[r] if r < len(c) else "" for c in cells]
        lines.append(values[0])
        for header, value in zip(headers[1:], values[1:], strict=True):
            if value:
                lines.append(f"  {header:<{label}}  {value}" if table.show_header else f"  {value}")
    return "\n".join(lines)


def kv_table(title: str, rows: list[tuple[str, str]]) -> Table:
    """A two-column key/value table."""
    table = Table(title=title, show_header=False, title_justify="left", pad_edge=False)
    table.add_column("item", style="bold")
    table.add_column("value", justify="right")
    for key, value in rows:
        table.add_row(key, value)
    return fit_columns(table, wrap=("item",))
