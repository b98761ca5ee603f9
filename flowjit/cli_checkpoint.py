"""``flowjit checkpoint ls DIR`` and ``flowjit checkpoint show PATH``: what a checkpoint
directory holds, and what one checkpoint holds (verified)."""

from __future__ import annotations

import os

from flowjit.errors import CheckpointError


def add_checkpoint_parser(commands) -> None:
    checkpoint = commands.add_parser(
        "checkpoint", help="list a checkpoint directory or inspect one checkpoint",
        description="Checkpoints are written by flowjit.Checkpoint(...).save(DIR, step).",
        epilog="examples: flowjit checkpoint ls ckpts; flowjit checkpoint show ckpts/ckpt-00000050.safetensors")
    actions = checkpoint.add_subparsers(dest="action", metavar="ACTION", help="ls lists a directory's checkpoints, show describes one")
    actions.required = True
    listing = actions.add_parser("ls", help="the checkpoints of a directory: steps, sizes, which is the latest",
                                 description="List DIR's checkpoints by step, with their sizes, and mark the one "
                                             "its 'latest' pointer names (the one a restore of DIR reads).")
    listing.add_argument("directory", metavar="DIR")
    listing.set_defaults(handler=command_ls)
    show = actions.add_parser("show", help="one checkpoint's step and variables, with their dtypes, shapes, sizes",
                              description="Print a checkpoint's step and each variable's dtype, shape, size and "
                                          "checksum, then verify every checksum (exit 1 if any fails).")
    show.add_argument("path", metavar="PATH", help="a checkpoint file, or a directory (its latest checkpoint)")
    show.set_defaults(handler=command_show)


def size_text(size: int) -> str:
    """Bytes as a person reads them: 986 B, 1.2 KiB, 3.4 MiB."""
    if size < 1024:
        return f"{size} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if size < 1024 or unit == "TiB":
            return f"{size:.1f} {unit}"
    raise AssertionError("unreachable")


def table(rows: list[tuple[str, ...]], right: set[int]) -> list[str]:
    """Columns padded to their widest cell (those in ``right`` aligned right), two spaces apart."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return ["  ".join(cell.rjust(width) if column in right else cell.ljust(width)
                      for column, (cell, width) in enumerate(zip(row, widths))).rstrip() for row in rows]


def command_ls(args) -> int:
    from flowjit.runtime import checkpoint_files as files
    directory = args.directory
    if not os.path.isdir(directory):
        raise CheckpointError(f"{directory}: no such directory", path=directory)
    entries = files.entries(directory)
    latest = [entry for entry in entries if entry.latest]
    if not entries:
        print(f"{directory}: no checkpoints")
    else:
        summary = f"latest step {latest[0].step}" if latest else f"no '{files.POINTER}' pointer: a restore of the " \
                                                                 f"directory finds nothing"
        print(f"{directory}: {len(entries)} checkpoint{'s' * (len(entries) != 1)}, {summary}")
        rows = [("step", "size", "file", "")] + [(str(entry.step), size_text(entry.size), entry.path,
                                                   "latest" if entry.latest else "") for entry in entries]
        print("\n".join("  " + line for line in table(rows, right={0, 1})))
    stray = files.temporaries(directory)
    if stray:
        print(f"{len(stray)} unfinished temporary file{'s' * (len(stray) != 1)} (a save was interrupted; the next "
              f"save removes {'them' if len(stray) != 1 else 'it'}): {', '.join(stray)}")
    return 0


def command_show(args) -> int:
    from flowjit.runtime import checkpoint_files as files
    from flowjit.runtime.checkpoint_format import FORMAT_VERSION, decode, read_header
    path = args.path
    if os.path.isdir(path):
        latest = files.latest_path(path)
        if latest is None:
            raise CheckpointError(f"{path}: no checkpoint there", path=path)
        path = latest
    header = read_header(path)
    print(path)
    print(f"  step:       {header.step}")
    print(f"  format:     flowjit checkpoint v{FORMAT_VERSION} (safetensors)")
    print(f"  size:       {size_text(header.file_size)} ({len(header.tensors)} variable"
          f"{'s' * (len(header.tensors) != 1)}, {size_text(header.data_bytes)} of data)")
    rows = [("variable", "dtype", "shape", "size", "sha256")]
    rows += [(tensor.name, tensor.dtype.name, str(list(tensor.shape)), size_text(tensor.nbytes), tensor.sha256[:16])
             for tensor in header.tensors]
    print("\n".join("  " + line for line in table(rows, right={3})))
    decode(path, files.read_file(path))       # a corrupt variable is an error: exit 1, naming it
    print("  checksums:  verified (sha256 of every variable's data)")
    return 0
