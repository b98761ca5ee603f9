"""The on-disk kernel cache never takes a working program down (issue 13 §2): unusable and
read-only directories, unreadable entries, concurrent writers, writers killed mid-write,
numba's NUMBA_CACHE_DIR (issue 14) and the `flowjit cache` command (issue 20)."""

import json
import os
import pathlib
import random
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import flowjit
from flowjit.compiler.codegen import cache as cache_module
from flowjit.compiler.codegen.cache import KernelCacheWarning

ROOT = pathlib.Path(__file__).parent.parent.parent


@pytest.fixture
def fresh_caches(monkeypatch):
    """A process that has opened no kernel cache and given no cache warning yet."""
    monkeypatch.setattr(cache_module, "_CACHES", {})
    monkeypatch.setattr(cache_module, "_WARNED", set())


def chain(x):
    return ((x * 2 + 1) * x - 3) / (x * x + 1)


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run_all(cache_dir):
    """Two programs (two kernels), each checked against numpy."""
    x = np.linspace(-2, 2, 12).reshape(3, 4)
    np.testing.assert_allclose(flowjit.jit(chain, cache_dir=cache_dir)(x), chain(x))
    np.testing.assert_allclose(flowjit.jit(softmax, cache_dir=cache_dir)(x), softmax(x))


def cache_warnings(caught):
    return [str(w.message) for w in caught if issubclass(w.category, KernelCacheWarning)]


# -- directories that cannot be used ------------------------------------------------------------------
@pytest.mark.parametrize("case", ["a file", "under a file", "missing parent under a file"])
def test_an_unusable_cache_directory_warns_once_naming_it_and_compiles_in_memory(tmp_path, monkeypatch, case,
                                                                                  fresh_caches):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    path = {"a file": blocker, "under a file": blocker / "cache",
            "missing parent under a file": blocker / "missing" / "cache"}[case]
    monkeypatch.setenv("FLOWJIT_CACHE_DIR", str(path))
    before = flowjit.stats()["kernel_compiles"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_all("default")
        run_all("default")                         # new jit objects, same process: no second warning
    messages = cache_warnings(caught)
    assert len(messages) == 1, messages
    assert f"FLOWJIT_CACHE_DIR={path}" in messages[0] and "compile in memory" in messages[0]
    assert caught[0].filename == __file__          # points at the user's call, not into flowjit
    assert flowjit.stats()["kernel_compiles"] > before
    assert blocker.read_text() == "not a directory"


def test_an_unusable_cache_dir_option_is_named_as_the_option(tmp_path, fresh_caches):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    with pytest.warns(KernelCacheWarning, match=r"jit\(cache_dir=.*blocker"):
        run_all(str(blocker))


@pytest.mark.parametrize("error, stops_writing", [(PermissionError(13, "Permission denied"), True),
                                                   (FileNotFoundError(2, "No such file or directory"), False)])
def test_a_write_that_fails_mid_process_compiles_in_memory(tmp_path, monkeypatch, fresh_caches, error,
                                                           stops_writing):
    """Refused (or out of room): one warning for the directory, nothing more is written.
    Anything else (another process removed a file at that moment): that kernel only."""
    real_write = cache_module.write_atomically
    failures = []

    def write_once(path, text):
        if not failures:
            failures.append(path)
            raise error
        return real_write(path, text)
    monkeypatch.setattr(cache_module, "write_atomically", write_once)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_all(str(tmp_path))
    messages = cache_warnings(caught)
    assert len(messages) == 1 and ("not writable" in messages[0]) == stops_writing, messages
    written = sorted(path.name for path in (tmp_path / "kernels").glob("*.py"))
    assert len(written) == (0 if stops_writing else 1), written


# A filesystem that refuses every change under one directory (as a read-only mount does,
# and as chmod does for everyone but root): patched into a process before it opens the cache.
READ_ONLY = textwrap.dedent("""
    import builtins, errno, os
    def refuse_writes_under(root):
        root = os.path.realpath(root) + os.sep
        def inside(path):
            return isinstance(path, (str, bytes, os.PathLike)) and \\
                os.path.realpath(os.fsdecode(path)).startswith(root)
        def refuse(path):
            raise PermissionError(errno.EACCES, "Permission denied (read-only test filesystem)", os.fsdecode(path))
        real_open, real_os_open = builtins.open, os.open
        def open_(file, mode="r", *args, **kwargs):
            if inside(file) and any(c in mode for c in "wax+"):
                refuse(file)
            return real_open(file, mode, *args, **kwargs)
        def os_open(path, flags, *args, **kwargs):
            if inside(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC):
                refuse(path)
            return real_os_open(path, flags, *args, **kwargs)
        builtins.open, os.open = open_, os_open
        for name in ("replace", "rename", "unlink", "remove", "mkdir", "rmdir"):
            real = getattr(os, name)
            def guarded(path, *args, _real=real, **kwargs):
                if inside(path) or (args and inside(args[0])):
                    refuse(path)
                return _real(path, *args, **kwargs)
            setattr(os, name, guarded)
""")

PROGRAMS = textwrap.dedent("""
    import json, os, sys, warnings
    import numpy as np
    import flowjit
    x = np.linspace(-2, 2, 12).reshape(3, 4)
    # one kernel entry, two overloads: a contiguous vector and a strided one (a Fortran-ordered
    # matrix would not do: its elementwise kernel reads a contiguous copy, collapse-loops' reshape)
    v = np.linspace(-2, 2, 24)
    contiguous, strided = v[:12], v[::2]

    def chain(x):
        return ((x * 2 + 1) * x - 3) / (x * x + 1)

    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def run(scale):
        ok = bool(np.allclose(flowjit.jit(chain)(x), chain(x)))
        ok &= bool(np.allclose(flowjit.jit(softmax)(x), softmax(x)))
        ok &= bool(np.allclose(flowjit.jit(softmax)(np.asfortranarray(x)), softmax(x)))
        ok &= bool(np.allclose(flowjit.jit(lambda x: np.tanh(x) * scale)(x), np.tanh(x) * scale))
        return ok
""")


def run_script(cache_dir, body, *args, env=None, check=True):
    environment = dict(os.environ, FLOWJIT_CACHE_DIR=str(cache_dir), **(env or {}))
    environment.pop("PYTHONWARNINGS", None)
    script = READ_ONLY + PROGRAMS + textwrap.dedent(body)
    result = subprocess.run([sys.executable, "-c", script, *map(str, args)], cwd=ROOT, env=environment,
                            capture_output=True, text=True, timeout=300)
    if check:
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout.splitlines()[-1])
    return result


RECORDED = """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ok = run(float(sys.argv[1]))
    print(json.dumps({"ok": ok, "stats": flowjit.stats(), "warnings": [str(w.message) for w in caught]}))
"""

READ_ONLY_RUN = """
    refuse_writes_under(os.environ["FLOWJIT_CACHE_DIR"])
""" + RECORDED

WARM_THEN_READ_ONLY = """
    ok = run(1.5)                                   # warm, writable
    refuse_writes_under(os.environ["FLOWJIT_CACHE_DIR"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ok &= run(float(sys.argv[1]))               # a new kernel once the directory is read-only
        ok &= run(float(sys.argv[1]) + 1)
    print(json.dumps({"ok": ok, "stats": flowjit.stats(), "warnings": [str(w.message) for w in caught]}))
"""


def snapshot(directory):
    return {str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*"))
            if path.is_file() and path.name != ".lock"}


def test_a_warm_cache_made_read_only_loads_what_is_there_and_compiles_the_rest_in_memory(tmp_path):
    first = run_script(tmp_path, RECORDED, 1.5)
    assert first["ok"] and first["warnings"] == []
    before = snapshot(tmp_path)
    second = run_script(tmp_path, READ_ONLY_RUN, 2.5)        # a new process, read-only directory
    assert second["ok"], second
    assert second["stats"]["disk_hits"] >= 3                   # chain, softmax C and F load read-only
    assert second["stats"]["kernel_compiles"] >= 1             # the new constant, in memory
    assert len(second["warnings"]) == 1, second["warnings"]
    assert f"FLOWJIT_CACHE_DIR={tmp_path}" in second["warnings"][0] and "not writable" in second["warnings"][0]
    assert snapshot(tmp_path) == before                        # nothing written, nothing removed


def test_a_cache_made_read_only_while_the_process_runs_keeps_it_running(tmp_path):
    result = run_script(tmp_path, WARM_THEN_READ_ONLY, 3.5)
    assert result["ok"], result
    assert len(result["warnings"]) == 1 and "not writable" in result["warnings"][0], result["warnings"]


def test_a_read_only_cache_with_a_corrupted_entry_compiles_it_in_memory(tmp_path):
    run_script(tmp_path, RECORDED, 1.5)
    data = sorted((tmp_path / "kernels" / "__pycache__").glob("*.nbc"))
    data[0].write_bytes(b"\x80\x05garbage")
    before = snapshot(tmp_path)
    result = run_script(tmp_path, READ_ONLY_RUN, 1.5)
    assert result["ok"], result
    corrupted = [w for w in result["warnings"] if "is corrupted" in w]
    assert len(corrupted) == 1 and "compiling the kernel in memory" in corrupted[0], result["warnings"]
    assert snapshot(tmp_path) == before


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="chmod does not stop root")
def test_a_cache_directory_made_read_only_with_chmod(tmp_path):
    first = run_script(tmp_path, RECORDED, 1.5)
    assert first["ok"]
    directories = [tmp_path / "kernels", tmp_path / "kernels" / "__pycache__"]
    for directory in directories:
        directory.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        second = run_script(tmp_path, RECORDED, 2.5)
        assert second["ok"] and second["stats"]["disk_hits"] >= 3
        assert len(second["warnings"]) == 1 and "not writable" in second["warnings"][0]
    finally:
        for directory in directories:
            directory.chmod(stat.S_IRWXU)


# -- entries that cannot be read ----------------------------------------------------------------------
def _garbage(path):
    path.write_bytes(random.Random(path.name).randbytes(400))


def _truncate(path):
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _empty(path):
    path.write_bytes(b"")


def _other_pickle(path):
    import pickle
    path.write_bytes(pickle.dumps({"not": "a numba cache file"}))


DAMAGE = {"garbage": _garbage, "truncated": _truncate, "empty": _empty, "another pickle": _other_pickle}


@pytest.mark.parametrize("kind, damage, manifest", [
    ("nbi", "garbage", "none"), ("nbi", "truncated", "lying"), ("nbi", "empty", "none"),
    ("nbi", "another pickle", "lying"), ("nbc", "garbage", "lying"), ("nbc", "truncated", "none"),
    ("nbc", "empty", "lying"), ("nbc", "another pickle", "none")])
def test_an_unreadable_numba_file_is_discarded_with_one_warning_and_rewritten(tmp_path, fresh_caches, kind,
                                                                              damage, manifest):
    """No manifest (as if written by a process killed before it), or one that lies (its
    checksums made to match the damaged file): numba's load fails, the entry is
    discarded and compiled again, and a new process then finds it whole."""
    directory = str(tmp_path)
    run_all(directory)
    pycache = tmp_path / "kernels" / "__pycache__"
    target = sorted(pycache.glob(f"*.{kind}"))[0]
    stem = target.name.split(".")[0]
    DAMAGE[damage](target)
    manifest_path = tmp_path / "kernels" / f"{stem}.json"
    if manifest == "none":
        manifest_path.unlink()
    else:
        recorded = json.loads(manifest_path.read_text())
        recorded["files"] = {path.name: cache_module._sha256(path) for path in pycache.glob(f"{stem}.*")}
        manifest_path.write_text(json.dumps(recorded))
    cache_module._CACHES.clear()                          # as a new process: nothing in memory
    before = flowjit.stats()["kernel_compiles"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_all(directory)
        run_all(directory)
    messages = cache_warnings(caught)
    if (kind, damage) == ("nbi", "another pickle"):     # numba reads it as another version's index
        assert len(messages) <= 1, messages
    else:
        assert len(messages) == 1 and stem in messages[0] and "rebuilding it" in messages[0], messages
    assert flowjit.stats()["kernel_compiles"] == before + 1
    cache_module._CACHES.clear()
    before = flowjit.stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_all(directory)
    assert cache_warnings(caught) == []
    after = flowjit.stats()
    assert after["kernel_compiles"] == before["kernel_compiles"] and after["disk_hits"] == before["disk_hits"] + 2


def test_a_manifest_that_is_not_a_manifest_is_rebuilt(tmp_path, fresh_caches):
    directory = str(tmp_path)
    run_all(directory)
    manifests = sorted((tmp_path / "kernels").glob("*.json"))
    manifests[0].write_text('{"files": ["not", "a", "map"]}')
    manifests[1].write_text('{"files": {"../../../etc/passwd": "0"}}')
    cache_module._CACHES.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_all(directory)
    messages = cache_warnings(caught)
    assert len(messages) == 2 and all("rebuilding it" in m for m in messages), messages


def test_garbage_numba_files_in_a_new_process_never_raise(tmp_path):
    """The issue's case: garbage under numba's cache and no manifest gave an
    UnpicklingError on every call, in every process."""
    assert run_script(tmp_path, RECORDED, 1.5)["ok"]
    for path in (tmp_path / "kernels" / "__pycache__").iterdir():
        _garbage(path)
    for path in (tmp_path / "kernels").glob("*.json"):
        path.unlink()
    second = run_script(tmp_path, RECORDED, 1.5)
    assert second["ok"] and all("rebuilding it" in w for w in second["warnings"]) and second["warnings"]
    third = run_script(tmp_path, RECORDED, 1.5)
    assert third["ok"] and third["warnings"] == [] and third["stats"]["kernel_compiles"] == 0


# -- writers killed mid-write, and concurrent writers ---------------------------------------------------
KILL_SERIES = """
    import signal
    previous, current, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def fill(cache_dir):
        jitted = flowjit.jit(chain, cache_dir=cache_dir)
        return bool(np.allclose(jitted(contiguous), chain(contiguous)) and np.allclose(jitted(strided), chain(strided)))
    if previous:                               # the cache the last process was killed writing
        before = flowjit.stats()["kernel_compiles"]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ok = fill(previous)
        print(json.dumps({"ok": ok, "compiles": flowjit.stats()["kernel_compiles"] - before,
                          "warnings": [str(w.message) for w in caught]}), flush=True)
    renames = [0]
    real_replace = os.replace

    def replace(source, target, *args, **kwargs):
        renames[0] += 1
        if renames[0] == kill_at:              # the temporary file is written, the rename not done
            os.kill(os.getpid(), signal.SIGKILL)
        return real_replace(source, target, *args, **kwargs)
    os.replace = replace
    fill(current)
    print(json.dumps({"renames": renames[0]}))
"""


def assert_used_or_repaired(cache_dir, scale):
    """The next run works (repairing what it must, with a warning only for what it
    rebuilds); the one after loads everything and says nothing."""
    repair = run_script(cache_dir, RECORDED, scale)
    assert repair["ok"] and all("rebuilding it" in w for w in repair["warnings"]), repair["warnings"]
    clean = run_script(cache_dir, RECORDED, scale)
    assert clean["ok"] and clean["warnings"] == [] and clean["stats"]["kernel_compiles"] == 0, clean
    return clean


def test_a_process_killed_at_each_rename_leaves_a_cache_the_next_run_uses_or_repairs(tmp_path):
    """Every file of an entry (source, numba's index and data for two overloads, the
    manifest) is written to a temporary name and renamed: a process killed just before any
    one of those renames leaves a cache that the next run uses or repairs.  Process k is
    killed at the k-th rename filling cache k, after checking cache k-1."""
    def run(previous, current, kill_at):
        environment = {key: value for key, value in os.environ.items() if key != "PYTHONWARNINGS"}
        return subprocess.run([sys.executable, "-c", PROGRAMS + textwrap.dedent(KILL_SERIES), previous, current,
                               str(kill_at)], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300)
    counted = run("", str(tmp_path / "0"), 0)
    assert counted.returncode == 0, counted.stderr
    renames = json.loads(counted.stdout.splitlines()[-1])["renames"]
    assert renames >= 7                         # source, two indexes, two data files, two manifests
    for kill_at in range(1, renames + 2):
        result = run(str(tmp_path / str(kill_at - 1)), str(tmp_path / str(kill_at)), kill_at)
        checked = json.loads(result.stdout.splitlines()[0])
        assert checked["ok"] and all("rebuilding it" in w for w in checked["warnings"]), (kill_at, checked)
        if kill_at <= renames:
            assert result.returncode == -signal.SIGKILL, result.stderr
    assert result.returncode == 0
    result = run(str(tmp_path / str(renames)), str(tmp_path / "last"), 0)     # the last one killed, repaired
    checked = json.loads(result.stdout.splitlines()[0])
    assert checked["ok"] and checked["compiles"] == 0 and checked["warnings"] == [], checked


def test_processes_killed_at_random_moments_leave_a_cache_the_next_run_uses_or_repairs(tmp_path):
    rng = random.Random(13)
    environment = dict(os.environ, FLOWJIT_CACHE_DIR=str(tmp_path))
    # (kernels without end, one a scale: a process that finished before its kill, its cache warm
    # from the one before, would test nothing)
    script = READ_ONLY + PROGRAMS + "\nimport itertools\nfor scale in itertools.count():\n    run(scale + 0.5)\n"
    for attempt in range(3):
        process = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=environment,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(rng.uniform(2.0, 6.0))   # numba imports in about 1.5 s; then a kernel every ~0.3 s
        finally:
            process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=60) == -signal.SIGKILL
    assert_used_or_repaired(tmp_path, 0.5)
    assert not [path for path in (tmp_path / "kernels").rglob("*.json")
                if any(".tmp" in name for name in json.loads(path.read_text())["files"])]


def test_concurrent_processes_adding_overloads_to_one_entry_leave_it_whole(tmp_path):
    """Two processes add a contiguous and a strided overload to the same entry at once.
    numba reads its index back before adding to it; slowed down there, both processes would
    read the empty index, both name their data file 1.nbc, and the last writer's index would
    lose the other's overload (or name the other's machine code).  The directory's lock
    makes the second wait for the first."""
    environment = dict(os.environ, FLOWJIT_CACHE_DIR=str(tmp_path))
    environment.pop("PYTHONWARNINGS", None)
    body = textwrap.dedent("""
        import time
        from numba.core.caching import IndexDataCacheFile
        real_load_index = IndexDataCacheFile._load_index
        def slow_load_index(self):
            index = real_load_index(self)
            time.sleep(1.5)
            return index
        IndexDataCacheFile._load_index = slow_load_index
        a = contiguous if sys.argv[1] == "C" else strided
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ok = np.allclose(flowjit.jit(chain)(a), chain(a))
        print(json.dumps({"ok": bool(ok), "warnings": [str(w.message) for w in caught]}))
    """)
    processes = [subprocess.Popen([sys.executable, "-c", PROGRAMS + body, order], cwd=ROOT, env=environment,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for order in "CF"]
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        result = json.loads(out.splitlines()[-1])
        assert result["ok"] and result["warnings"] == [], result
    check = textwrap.dedent("""
        ok = all(np.allclose(flowjit.jit(chain)(a), chain(a)) for a in (contiguous, strided))
        print(json.dumps({"ok": bool(ok), "stats": flowjit.stats()}))
    """)
    clean = run_script(tmp_path, check)
    assert clean["ok"] and clean["stats"]["kernel_compiles"] == 0 and clean["stats"]["disk_hits"] == 2, clean


# -- numba's NUMBA_CACHE_DIR (issue 14) ------------------------------------------------------------------
def test_the_manifest_covers_numbas_files_with_numba_cache_dir_set(tmp_path):
    cache_dir, numba_dir = tmp_path / "flowjit", tmp_path / "numba"
    env = {"NUMBA_CACHE_DIR": str(numba_dir)}
    first = run_script(cache_dir, RECORDED, 1.5, env=env)
    assert first["ok"]
    written = [path for path in tmp_path.rglob("*") if (path.suffix in (".nbi", ".nbc") or ".native." in path.name)
               and cache_dir / "library" not in path.parents]        # (the library's routines: library_cache.py)
    listed = set()
    for manifest in (cache_dir / "kernels").glob("*.json"):
        recorded = json.loads(manifest.read_text())
        directory = cache_dir / "kernels" / recorded["numba_directory"]
        listed |= {(directory / name).resolve() for name in recorded["files"]}
    assert written and {path.resolve() for path in written} == listed
    written[0].write_bytes(written[0].read_bytes()[:40])
    second = run_script(cache_dir, RECORDED, 1.5, env=env)
    assert second["ok"] and len(second["warnings"]) == 1
    assert "does not match its checksum" in second["warnings"][0] and "rebuilding it" in second["warnings"][0]


# -- the `flowjit cache` command (issue 20) -----------------------------------------------------------------
def test_cache_command_without_an_action_shows_the_actions(capsys):
    from flowjit.cli import main
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert "required" not in out and "info" in out and "clear" in out and "du -s" in out


def test_cache_clear_leaves_no_empty_directories(tmp_path, monkeypatch, fresh_caches, capsys):
    from flowjit.cli import main
    monkeypatch.setenv("FLOWJIT_CACHE_DIR", str(tmp_path))
    run_all(str(tmp_path))
    assert (tmp_path / "kernels" / "__pycache__").is_dir()
    assert main(["cache", "clear"]) == 0
    assert "removed" in capsys.readouterr().out
    assert [path for path in (tmp_path / "kernels").rglob("*")] == []
    run_all(str(tmp_path))                                    # and it fills again


@pytest.mark.skipif(sys.platform == "win32", reason="flock")
def test_a_lock_file_its_holder_removes_is_never_held_twice(tmp_path):
    """``cache clear`` removes a directory's lock file while holding it.  A waiter that then gets
    the removed file's lock must not count as holding the directory while a newcomer holds the
    lock of the file created since: it locks that one instead, after the newcomer."""
    import threading
    from flowjit.files import directory_lock
    path = str(tmp_path / ".lock")
    holders, most, guard = [0], [0], threading.Lock()
    newcomer_holds, release_newcomer = threading.Event(), threading.Event()

    def hold(wait_for=None, then=None):
        with directory_lock(path, timeout=10, poll=0.001) as held:
            assert held
            with guard:
                holders[0] += 1
                most[0] = max(most[0], holders[0])
            if then:
                then.set()
            if wait_for:
                wait_for.wait(10)
            with guard:
                holders[0] -= 1

    with directory_lock(path, timeout=10) as held:
        assert held
        waiter = threading.Thread(target=hold)
        waiter.start()
        time.sleep(0.05)                               # the waiter has opened the file and waits
        os.unlink(path)
        newcomer = threading.Thread(target=hold, kwargs=dict(wait_for=release_newcomer, then=newcomer_holds))
        newcomer.start()
        assert newcomer_holds.wait(10)                 # a new file, locked while the first is held
    time.sleep(0.05)                                   # the waiter gets the removed file's lock...
    assert holders[0] == 1                             # ...and does not count it as held
    release_newcomer.set()
    waiter.join(10)
    newcomer.join(10)
    assert most[0] == 1 and not waiter.is_alive()


@pytest.mark.skipif(shutil.which("du") is None or sys.platform != "linux", reason="needs GNU du")
def test_cache_info_counts_as_du_does(tmp_path, monkeypatch, fresh_caches, capsys):
    from flowjit.cli import main
    monkeypatch.setenv("FLOWJIT_CACHE_DIR", str(tmp_path))
    run_all(str(tmp_path))
    kernels = tmp_path / "kernels"
    (kernels / "sparse").write_bytes(b"")
    with open(kernels / "sparse", "r+b") as stream:           # apparent size far above its blocks
        stream.truncate(1 << 20)
    os.link(kernels / "sparse", kernels / "sparse-link")        # du counts a file with two links once
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    blocks = int(subprocess.run(["du", "-sB1", str(kernels)], capture_output=True, text=True).stdout.split()[0])
    apparent = int(subprocess.run(["du", "-sb", str(kernels)], capture_output=True, text=True).stdout.split()[0])
    assert f"({blocks} bytes): the blocks allocated" in out, (out, blocks)
    assert f"({apparent} bytes): file and directory lengths" in out, (out, apparent)
    assert "kernels:   2" in out


def test_a_warning_points_at_a_caller_that_is_an_installed_package(tmp_path, monkeypatch):
    """Code under site-packages is a user's too (only flowjit, numpy, numba and the standard
    library are skipped): the warning names the package's line, not a frame further out."""
    import sysconfig
    from flowjit.errors import user_stacklevel
    site = sysconfig.get_paths()["purelib"]
    namespace = {"warnings": warnings, "user_stacklevel": user_stacklevel}
    source = "def caller():\n    warnings.warn('here', UserWarning, stacklevel=user_stacklevel())\n"
    exec(compile(source, f"{site}/some_users_package/module.py", "exec"), namespace)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        namespace["caller"]()
    assert caught[0].filename == f"{site}/some_users_package/module.py" and caught[0].lineno == 2
