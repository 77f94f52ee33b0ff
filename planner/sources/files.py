"""Bounded reads of user files and documents: size, encoding, JSON/YAML depth and expansion.

Every file the planner reads (configs, plans, logs, traces, args files, endpoint lists, fit
data) comes through here, so each failure is one `Error:` line naming the option and the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from planner.errors import InputError
from planner.units import MIB_BYTES

# Byte limits per kind of file: each far above any real file of that kind, low enough that a
# wrong path (a disk image, /dev/zero) is refused before it is read into memory.
CONFIG_LIMIT_BYTES = 16 * MIB_BYTES  # config.json: the largest real ones (NAS blocks) are ~60 KiB
PLAN_LIMIT_BYTES = 4 * MIB_BYTES  # a plan lock file is ~2 KiB
ARGS_LIMIT_BYTES = 4 * MIB_BYTES  # args files, manifests, endpoint lists, fit CSVs
LOG_LIMIT_BYTES = 512 * MIB_BYTES  # engine start-up logs (whole server logs are often pasted)
TRACE_LIMIT_BYTES = 512 * MIB_BYTES  # JSONL traces (~60 B a request)
# A YAML document may expand (through anchors and aliases) to at most this many nodes: real
# plans and manifests have hundreds; an alias bomb has billions.
MAX_YAML_NODES = 200_000


class YamlSyntaxError(InputError):
    """The text is not YAML at all (callers that also accept plain text fall back on it)."""


def read_bytes(path_text: str, field: str, limit_bytes: int) -> bytes:
    """The bytes of a regular file no larger than `limit_bytes`, or an InputError naming it."""
    if not path_text:
        raise InputError(field, "an empty path")
    path = Path(path_text).expanduser()
    try:
        if not path.exists():
            raise InputError(field, f"{path_text}: no such file")
        if path.is_dir():
            raise InputError(field, f"{path_text}: is a directory, not a file")
        if not path.is_file():
            raise InputError(field, f"{path_text}: not a regular file")
        size = path.stat().st_size
        if size > limit_bytes:
            raise InputError(
                field, f"{path_text}: {size:,} bytes, above the {limit_bytes:,}-byte limit"
            )
        with path.open("rb") as handle:
            data = handle.read(limit_bytes + 1)
    except OSError as exc:
        raise InputError(field, f"{path_text}: cannot read ({exc.strerror or exc})") from exc
    if len(data) > limit_bytes:
        raise InputError(field, f"{path_text}: above the {limit_bytes:,}-byte limit")
    return data


def decode_text(data: bytes, field: str, origin: str) -> str:
    """UTF-8 text (a leading BOM dropped), or an InputError with the line of the bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            field, f"{origin} line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x})"
        ) from exc


def read_text(path_text: str, field: str, limit_bytes: int) -> str:
    """A bounded UTF-8 text file."""
    return decode_text(read_bytes(path_text, field, limit_bytes), field, path_text)


def parse_json(text: str | bytes, field: str, origin: str) -> Any:
    """JSON with its failures (syntax, depth, giant integers) as one InputError."""
    try:
        if isinstance(text, bytes):
            text = decode_text(text, field, origin)
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(field, f"{origin} line {exc.lineno}: not valid JSON ({exc.msg})") from exc
    except RecursionError as exc:
        raise InputError(field, f"{origin}: JSON nested too deeply") from exc
    except ValueError as exc:  # int conversion limit (a number of thousands of digits)
        raise InputError(field, f"{origin}: a number too large to read ({exc})") from exc


def _expanded_nodes(node: Any, memo: dict[int, int], limit: int) -> int:
    """Nodes a composed YAML graph expands to (aliases counted each time they are used)."""
    import yaml

    key = id(node)
    if key in memo:
        return memo[key]
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += _expanded_nodes(child, memo, limit)
            if total > limit:
                break
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            total += _expanded_nodes(k, memo, limit) + _expanded_nodes(v, memo, limit)
            if total > limit:
                break
    memo[key] = total
    return total


def load_yaml_documents(text: str, field: str, origin: str) -> list[tuple[Any, Any]]:
    """(node, data) per YAML document, safe-loaded, with expansion and depth bounded."""
    import yaml

    out: list[tuple[Any, Any]] = []
    loader = None
    try:
        loader = yaml.SafeLoader(text)  # refuses control characters here already
        while loader.check_node():
            node = loader.get_node()
            if _expanded_nodes(node, {}, MAX_YAML_NODES) > MAX_YAML_NODES:
                raise InputError(
                    field,
                    f"{origin}: the YAML expands (through aliases) to more than "
                    f"{MAX_YAML_NODES:,} nodes",
                )
            out.append((node, loader.construct_document(node)))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise YamlSyntaxError(field, f"{origin}{where}: not valid YAML ({problem})") from exc
    except RecursionError as exc:
        raise InputError(field, f"{origin}: YAML nested too deeply") from exc
    except ValueError as exc:  # a number of thousands of digits
        raise InputError(field, f"{origin}: a number too large to read ({exc})") from exc
    finally:
        if loader is not None:
            loader.dispose()
    return out


def check_writable(path_text: str, field: str) -> None:
    """Refuse, before any work, a path that cannot be written: empty, a folder, no parent."""
    if not path_text:
        raise InputError(field, "an empty path")
    path = Path(path_text).expanduser()
    if path.is_dir():
        raise InputError(field, f"{path_text}: is a directory")
    parent = path.parent
    if not parent.is_dir():
        raise InputError(field, f"{path_text}: the folder {parent} does not exist")


def write_file(path_text: str, field: str, text: str) -> None:
    """Write UTF-8 text, an OSError (permissions, full disk) as one InputError."""
    check_writable(path_text, field)
    try:
        Path(path_text).expanduser().write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(field, f"{path_text}: cannot write ({exc.strerror or exc})") from exc


def saved_model_ref(model: str, plan_path: str) -> str:
    """A local model path as a plan stores it: relative to the plan's folder, so the pair moves
    together; Hub ids unchanged."""
    import os

    local = Path(model).expanduser()
    if not local.exists() or local.is_absolute():
        return model
    return os.path.relpath(local.resolve(), Path(plan_path).expanduser().resolve().parent)


def yaml_line_of(node: Any, loc: tuple[int | str, ...]) -> int | None:
    """1-based line of the YAML node at a pydantic error location (deepest one found)."""
    import yaml

    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if k.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            match = node.value[part] if part < len(node.value) else None
        else:
            match = None
        if match is None:
            break
        node = match
        line = node.start_mark.line + 1
    return line
