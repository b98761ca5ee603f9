"""The README's examples run as they are written, and print what the README shows.

Every ```python block runs as its own script in a fresh interpreter, from an empty
directory, under the file name a ``file NAME`` marker gives (``loc(...)`` in printed IR
names it, as it names yours); a plain ``` block right after it is the output it must
print.  Every plain ``` block whose lines start with ``$ flowjit`` or ``$ python`` runs
those commands as from the repository's root (a directory of links to its files, so that
what they write lands elsewhere), each compared with the lines under it.

Markers, an HTML comment on the line before a block's fence (GitHub does not show them):

    <!-- readme-test: skip (why) -->     not run: say why (too slow, needs a GPU, an excerpt)
    <!-- readme-test: file softmax.py --> the script's file name (default: block_LINE.py)
    <!-- readme-test: numbers vary -->   in the shown output every number stands for any
                                         number and runs of spaces for any spacing (timings)

In shown output, ``...`` stands for any text, within a line or across lines (doctest's
ELLIPSIS); a line of ``...`` alone stands for any number of lines.

``python tests/test_readme.py --update`` rewrites every shown output that has no ``...``
from a real run (from the repository's root, with flowjit importable).
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

ROOT = pathlib.Path(__file__).parent.parent
README = ROOT / "README.md"
MARKER = re.compile(r"<!--\s*readme-test:\s*(.*?)\s*-->")
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")


@dataclass
class Block:
    language: str
    line: int                     # 1-based line of the opening fence
    text: str
    markers: list[str] = field(default_factory=list)
    follows_previous: bool = False   # nothing but blank lines since the previous block closed

    def marked(self, word: str) -> str | None:
        for marker in self.markers:
            if marker.split()[0] == word:
                return marker[len(word):].strip()
        return None


def blocks(text: str) -> list[Block]:
    lines, found, index, markers, since_close = text.splitlines(), [], 0, [], None
    while index < len(lines):
        line = lines[index]
        if line.startswith("```"):
            language, start, body = line[3:].strip(), index, []
            index += 1
            while not lines[index].startswith("```"):
                body.append(lines[index])
                index += 1
            found.append(Block(language, start + 1, "\n".join(body) + "\n", markers, since_close == []))
            markers, since_close = [], []
        else:
            match = MARKER.search(line)
            if match:
                markers = markers + [match.group(1)]
            elif line.strip():
                markers = []
                if since_close is not None:
                    since_close = None
        index += 1
    return found


def pattern(expected: str, numbers_vary: bool) -> re.Pattern:
    """The shown output as a regex: ``...`` is any text; with ``numbers_vary`` any number
    and any spacing."""
    parts = []
    for piece in re.split(r"(\.\.\.)", expected.strip("\n")):
        if piece == "...":
            parts.append(r".*?")
        elif numbers_vary:
            for token in re.split(r"(\d+(?:\.\d+)?(?:e[-+]?\d+)?|\s+)", piece):
                if not token:
                    continue
                if NUMBER.fullmatch(token):
                    parts.append(r"[-+]?[0-9][0-9.e+-]*")
                elif token.isspace():
                    parts.append(r"\s+" if "\n" not in token else r"\s*\n\s*")
                else:
                    parts.append(re.escape(token))
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts), re.DOTALL)


def normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def assert_shown(actual: str, expected: str, numbers_vary: bool, where: str) -> None:
    actual, expected = normalise(actual), normalise(expected)
    assert pattern(expected, numbers_vary).fullmatch(actual), (
        f"{where}: the output differs from the README's\n--- README\n{expected}\n--- actual\n{actual}")


def cases() -> list:
    all_blocks, found = blocks(README.read_text()), []
    for index, block in enumerate(all_blocks):
        following = all_blocks[index + 1] if index + 1 < len(all_blocks) else None
        if block.language == "python":
            output = following if following and following.language == "" and following.follows_previous \
                and not following.text.startswith("$ ") else None
            found.append(pytest.param(block, output, id=f"python-line-{block.line}"))
        elif block.language == "" and re.match(r"\$ (flowjit|python)\b", block.text):
            found.append(pytest.param(block, None, id=f"shell-line-{block.line}"))
    return found


def environment(tmp_path) -> dict:
    bin_directory = tmp_path / "bin"
    bin_directory.mkdir(exist_ok=True)
    for name, command in (("flowjit", f'exec "{sys.executable}" -m flowjit.cli "$@"'),
                          ("python", f'exec "{sys.executable}" "$@"')):
        script = bin_directory / name
        script.write_text(f"#!/bin/sh\n{command}\n")
        script.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_directory}{os.pathsep}{os.environ['PATH']}", COLUMNS="80")
    env.pop("NUMBA_ENABLE_CUDASIM", None)       # (as on a user's machine: the tests' conftest sets it)
    env["FLOWJIT_VECTOR_BITS"] = "512"          # kernels as a CPU with AVX-512 gets them, on every machine
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def shell_commands(text: str) -> list[tuple[str, str]]:
    """``$ command`` lines (``\\`` continues one) with the output shown under each."""
    commands, lines = [], text.splitlines()
    index = 0
    while index < len(lines):
        command = lines[index][2:]
        while command.endswith("\\"):
            index += 1
            command = command[:-1] + " " + lines[index].strip()
        index += 1
        output = []
        while index < len(lines) and not lines[index].startswith("$ "):
            output.append(lines[index])
            index += 1
        commands.append((command, "\n".join(output)))
    return commands


def test_every_block_is_run_or_marked():
    """No python or command block is left out silently: each runs, or says why not."""
    for block in blocks(README.read_text()):
        if block.language == "python" or block.text.startswith("$ "):
            runs = block.language == "python" or re.match(r"\$ (flowjit|python)\b", block.text)
            assert runs or block.marked("skip"), f"README.md:{block.line}: neither run nor marked skip"


def run_python(block: Block, directory: pathlib.Path) -> str:
    env = environment(directory)
    name = block.marked("file") or f"block_{block.line}.py"
    (directory / name).write_text(block.text)
    result = subprocess.run([sys.executable, name], cwd=directory, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"README.md:{block.line} failed:\n{result.stderr}"
    return result.stdout


def run_shell(block: Block, directory: pathlib.Path) -> list[tuple[str, str, str]]:
    """(command, shown output, actual output) per command of the block."""
    env = environment(directory)
    workdir = directory / "checkout"     # the repository's files, seen from a directory the commands may write
    workdir.mkdir(exist_ok=True)
    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv") and not (workdir / entry.name).exists():
            (workdir / entry.name).symlink_to(entry)
    runs = []
    for command, expected in shell_commands(block.text):
        result = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=workdir, env=env,
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"README.md:{block.line}: `{command}` failed:\n{result.stderr}"
        runs.append((command, expected, result.stdout))
    return runs


@pytest.mark.parametrize("block, output", cases())
def test_readme_block(block: Block, output: Block | None, tmp_path):
    if block.marked("skip") is not None:
        pytest.skip(f"README.md:{block.line} is marked skip: {block.marked('skip')}")
    if block.language == "python":
        actual = run_python(block, tmp_path)
        if output is not None:
            assert_shown(actual, output.text, output.marked("numbers") is not None, f"README.md:{block.line}")
        return
    for command, expected, actual in run_shell(block, tmp_path):
        assert_shown(actual, expected, block.marked("numbers") is not None, f"README.md:{block.line}: `{command}`")


def update(readme: pathlib.Path = README) -> None:
    """Rewrite every shown output from a real run (``python tests/test_readme.py --update``);
    an output with ``...`` in it is left as it is and named, to be elided again by hand."""
    import tempfile
    lines = readme.read_text().splitlines()
    edits = []                       # (first line of the body, last line + 1, new body lines), 0-based
    for param in cases():
        block, output = param.values
        if block.marked("skip") is not None:
            continue
        with tempfile.TemporaryDirectory() as directory:
            if block.language == "python":
                if output is None:
                    run_python(block, pathlib.Path(directory))
                    continue
                if "..." in output.text:
                    print(f"README.md:{output.line}: elided with '...', not rewritten")
                    continue
                actual = run_python(block, pathlib.Path(directory))
                edits.append((output.line, output.line + len(output.text.splitlines()),
                              normalise(actual).splitlines()))
            else:
                body = []
                for command, expected, actual in run_shell(block, pathlib.Path(directory)):
                    body.extend(_command_lines(block.text, command))
                    if "..." in expected:
                        print(f"README.md:{block.line}: `{command}` is elided with '...', not rewritten")
                        body.extend(expected.splitlines())
                    else:
                        body.extend(normalise(actual).splitlines())
                edits.append((block.line, block.line + len(block.text.splitlines()), body))
    for start, end, body in sorted(edits, reverse=True):
        lines[start:end] = body
    readme.write_text("\n".join(lines) + "\n")


def _command_lines(text: str, command: str) -> list[str]:
    """The command's lines as the README writes them (with their ``\\`` continuations)."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("$ "):
            end = index
            while lines[end].endswith("\\"):
                end += 1
            if shell_commands("\n".join(lines[index:end + 1]))[0][0] == command:
                return lines[index:end + 1]
    raise LookupError(command)


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_readme.py --update   (rewrites README.md's shown outputs)")
    update()
