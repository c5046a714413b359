"""Checked programs kept on disk, so that a switch (re)start skips the front end.

Every switch process of a network compiles the same program, and so does the topology code
that writes its P4Info: on a spine-leaf that is five front-end runs of several seconds each
before the first packet. The front end's output depends only on the device config (the
bundled sources) and on the front end's own code, so both are the key: a program whose
sources or whose compiler changed is compiled again. Only programs that compiled are kept;
errors are always reported afresh. An unreadable entry is compiled again and replaced.

``SOFTSWITCH_PROGRAM_CACHE=off`` turns the cache off; ``SOFTSWITCH_CACHE_DIR`` moves it
(default ``$XDG_CACHE_HOME/softswitch/programs``, else ``~/.cache/softswitch/programs``).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from softswitch import ir, lru_files

T = TypeVar("T")

log = logging.getLogger(__name__)

ENV_SWITCH = "SOFTSWITCH_PROGRAM_CACHE"
ENV_DIR = "SOFTSWITCH_CACHE_DIR"
MAX_ENTRIES = 64  # least recently used entries beyond this are removed when one is added

_PACKAGE = Path(__file__).resolve().parent
# What the front end's output depends on besides the program: its code, the IR's classes,
# the target's own include files and the device-config format.
_COMPILER_PARTS = ("frontend", "p4include", "ir.py", "bmv2_rules.py", "device_config.py",
                   "errors.py")


@functools.lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """A hash of the front end's sources and the Python version (computed once a process)."""
    digest = hashlib.sha256(sys.version.encode())
    for part in _COMPILER_PARTS:
        root = _PACKAGE / part
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for path in files:
            if path.suffix in (".pyc",) or "__pycache__" in path.parts:
                continue
            digest.update(path.relative_to(_PACKAGE).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """Where entries live, or None when the cache is turned off."""
    env = os.environ if env is None else env
    if env.get(ENV_SWITCH, "").lower() in ("off", "0", "no", "false"):
        return None
    if env.get(ENV_DIR):
        return Path(env[ENV_DIR])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "softswitch" / "programs"


def parser_cache_file() -> str | bool:
    """Where lark keeps the analysed grammar (it checks grammar, options and its own version
    itself), or False when the cache is off or cannot be made: building the LALR tables takes
    seconds, which every process that compiles pays once."""
    where = cache_dir()
    if where is None:
        return False
    try:
        where.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        return False
    return str(where.parent / "p4-grammar.lark-cache")


def entry_key(device_config: bytes, origin: str = "") -> str:
    """The entry name of a device config under the current front end; ``origin`` tells apart
    compiles of the same sources whose locations name different files (the bundle's own
    names, or the real path it was made from)."""
    digest = hashlib.sha256(compiler_fingerprint().encode())
    digest.update(origin.encode() + b"\0")
    digest.update(device_config)
    return digest.hexdigest()


def cached_program(device_config: bytes, compile_: Callable[[], ir.Program], *,
                   origin: str = "", directory: Path | None = None) -> ir.Program:
    """``compile_()`` (which compiles ``device_config``), or the program it gave last time
    for the same bytes and origin. ``directory`` overrides :func:`cache_dir` (tests)."""
    return _cached(device_config, origin, ir.Program, compile_, directory)


def _cached(device_config: bytes, origin: str, kind: type[T], make: Callable[[], T],
            directory: Path | None) -> T:
    """The entry of ``device_config`` and ``origin`` when it holds a ``kind``, else
    ``make()``, stored (errors propagate and are never stored; an unreadable or foreign
    entry is made again and replaced)."""
    where = cache_dir() if directory is None else directory
    if where is None:
        return make()
    path = where / f"{entry_key(device_config, origin)}.pickle"
    try:
        with path.open("rb") as f:
            value = pickle.load(f)
        if isinstance(value, kind):
            log.debug("program cache hit: %s", path.name)
            lru_files.used(path)  # kept before entries written since and not used again
            return value
        log.warning("program cache: %s holds no %s; making it again", path, kind.__name__)
    except FileNotFoundError:
        pass
    except Exception as exc:  # a truncated or foreign file: make it again and replace it
        log.warning("program cache: cannot read %s (%s); making it again", path, exc)
    value = make()
    _store(where, path, value)
    return value


def _store(where: Path, path: Path, program: object) -> None:
    """Write the entry atomically (a concurrent reader sees the old file or the whole new
    one); a cache that cannot be written only costs speed, so failures are logged."""
    try:
        where.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=where, prefix=".tmp-", suffix=".pickle")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(program, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _prune(where)
    except (OSError, pickle.PicklingError, RecursionError) as exc:
        log.warning("program cache: cannot write %s (%s)", path, exc)


def _prune(where: Path) -> None:
    """Keep the newest :data:`MAX_ENTRIES` (another process may be pruning too)."""
    lru_files.prune(where.glob("*.pickle"), MAX_ENTRIES)


@functools.lru_cache(maxsize=1)
def _p4info_fingerprint() -> str:
    """A hash of the P4Info builder's source (its output changes with it)."""
    return hashlib.sha256((_PACKAGE / "p4info.py").read_bytes()).hexdigest()


def cached_p4info_text(device_config: bytes, build: Callable[[], str], *,
                       directory: Path | None = None) -> str:
    """``build()`` (the P4Info text of the program ``device_config`` bundles), or the text
    it gave last time for the same bytes, front end and P4Info builder: walking the IR for
    it took a second of every network start's CPU. ``directory`` as for
    :func:`cached_program`."""
    return _cached(device_config, "p4info:" + _p4info_fingerprint(), str, build, directory)


def compile_p4_file(path: str | Path) -> tuple[ir.Program, bytes]:
    """(program, device config) of a .p4 file: compiled from the real files (so errors and
    locations name them) or taken from the cache, keyed by the bundled sources."""
    from softswitch.device_config import make_device_config
    from softswitch.frontend import compile_file

    data = make_device_config(path)
    program = cached_program(data, lambda: compile_file(path), origin=str(Path(path).resolve()))
    return program, data
