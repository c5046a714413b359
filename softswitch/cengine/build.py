"""Compile generated C with the system compiler into a shared object, cached by the
source's hash, and load it through cffi (ABI mode: no Python extension is built).

The cache is ``$SOFTSWITCH_C_CACHE_DIR``, ``$SOFTSWITCH_CACHE_DIR`` or
``$XDG_CACHE_HOME/softswitch/cengine`` (default ``~/.cache/softswitch/cengine``); a program
whose source did not change loads its shared object again without compiling. Objects are
written to a temporary name and renamed, so concurrent switches loading the same program
never see a half-written file. The cache keeps the :data:`MAX_ENTRIES` most recently used
objects (a hit marks its object used); every change of the code generator makes new ones,
so without a bound it only grew.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

# imported at load, not on the P4Runtime thread that loads a pipeline (a thread imports
# nothing new); the generated extension modules import _cffi_backend
import _cffi_backend  # noqa: F401
import cffi

from softswitch import lru_files
from softswitch.cengine.errors import CBuildError, CUnsupported

log = logging.getLogger(__name__)

CFLAGS = ("-shared", "-fPIC", "-std=gnu11", "-pthread", "-w")
BUILD_VERSION = "3"  # bump when the flags or the ABI between Python and C change
#: Objects kept in a cache directory (~55 KB each at -O0, up to ~200 KB at -O2): room for
#: every program of p4c's samples several times over.
MAX_ENTRIES = 1024
# The optimisation level: -O2 unless $SOFTSWITCH_C_OPT says otherwise (part of every cache
# key). The test sweep over p4c's samples compiles ~185 programs at -O0, a third of -O2's
# compile time: it checks what the code generator means, not what gcc's optimiser makes.
OPT_ENV = "SOFTSWITCH_C_OPT"
OPT_LEVELS = ("-O0", "-O1", "-O2", "-O3", "-Os")


def opt_level() -> str:
    """``-O2``, or the level $SOFTSWITCH_C_OPT names (CBuildError for anything else)."""
    level = os.environ.get(OPT_ENV, "") or "-O2"
    if level not in OPT_LEVELS:
        raise CBuildError(f"{OPT_ENV}={level!r}: expected one of {', '.join(OPT_LEVELS)}")
    return level


# How a program is loaded: "api" (the default) builds a Python extension module (cffi's API
# mode: direct calls, the fastest per packet), "abi" a plain shared object called through
# libffi: half the compile time (no Python headers, no setuptools), for the test sweep over
# p4c's samples, where compiling is the whole cost and no packet stream runs.
MODE_ENV = "SOFTSWITCH_C_MODE"
MODES = ("api", "abi")


def load_mode() -> str:
    """``api``, or the mode $SOFTSWITCH_C_MODE names (CBuildError for anything else)."""
    mode = os.environ.get(MODE_ENV, "") or "api"
    if mode not in MODES:
        raise CBuildError(f"{MODE_ENV}={mode!r}: expected one of {', '.join(MODES)}")
    return mode


#: Moves the C cache alone (SOFTSWITCH_CACHE_DIR moves the program cache with it).
C_CACHE_ENV = "SOFTSWITCH_C_CACHE_DIR"


def cache_dir() -> Path:
    """Where compiled programs are kept."""
    explicit = os.environ.get(C_CACHE_ENV) or os.environ.get("SOFTSWITCH_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "softswitch" / "cengine"


def compiler() -> str:
    """The C compiler (``$CC`` or cc/gcc on PATH); CUnsupported when there is none."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise CUnsupported("no C compiler on this machine (set CC)")
    return cc


def build(source: str) -> Path:
    """The shared object of ``source``, compiled now or found in the cache."""
    cc = compiler()
    flags = (opt_level(), *CFLAGS)
    digest = hashlib.sha256("\0".join([BUILD_VERSION, cc, *flags, source]).encode()).hexdigest()[
        :32
    ]
    out_dir = cache_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    so = out_dir / f"p4_{digest}.so"
    if lru_files.used(so):
        return so
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        c_file = Path(tmp) / "prog.c"
        c_file.write_text(source, encoding="utf-8")
        tmp_so = Path(tmp) / "prog.so"
        proc = subprocess.run(
            [cc, *flags, "-o", str(tmp_so), str(c_file)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            keep = out_dir / f"failed_{digest}.c"
            keep.write_text(source, encoding="utf-8")
            first = "\n".join(proc.stderr.splitlines()[:8])
            raise CBuildError(f"C compiler failed on generated code ({keep}):\n{first}")
        os.replace(tmp_so, so)
    log.debug("compiled %s", so)
    _prune(out_dir)
    return so


def _prune(where: Path) -> None:
    """Removes the least recently used objects beyond :data:`MAX_ENTRIES`."""
    lru_files.prune((e for e in where.iterdir()
                     if e.suffix == ".so" and e.name.startswith(("p4_", "_p4_"))), MAX_ENTRIES)


def load(so: Path, cdef: str) -> tuple[Any, Any]:
    """``(ffi, lib)`` of a compiled program (ABI mode: calls go through libffi)."""
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    return ffi, ffi.dlopen(str(so))


def module_path(source: str, cdef: str) -> Path:
    """Where the extension module of ``source`` is (or will be) cached."""
    cc = compiler()
    digest = hashlib.sha256(
        "\0".join([BUILD_VERSION, "api", cc, opt_level(), *CFLAGS, cdef, source]).encode()
    ).hexdigest()[:32]
    return cache_dir() / f"_p4_{digest}{importlib.machinery.EXTENSION_SUFFIXES[0]}"


def compile_module(source: str, cdef: str) -> Path:
    """The extension module of ``source`` (cffi's API mode), compiled now unless cached;
    not loaded. Raises what cffi raises without the Python headers."""
    path = module_path(source, cdef)
    if lru_files.used(path):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    # -g0: Python's own CFLAGS ask for debug information, which took ~40 % of a -O2 compile
    ffi.set_source(
        path.name.split(".", 1)[0], source,
        extra_compile_args=[opt_level(), "-g0", "-pthread", "-w"],
        extra_link_args=["-pthread"],
    )
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        built = ffi.compile(tmpdir=tmp, verbose=False)
        os.replace(built, path)
    log.debug("compiled %s", path)
    _prune(path.parent)
    return path


def build_module(source: str, cdef: str) -> tuple[Any, Any]:
    """``(ffi, lib)`` of ``source`` as a Python extension module (cffi's API mode: each
    call is a direct C call, some 0.3 us cheaper per packet than ABI mode), compiled now
    or found in the cache. Needs the Python headers; :func:`build_and_load` falls back to
    :func:`build` and :func:`load` without them."""
    path = compile_module(source, cdef)
    name = path.name.split(".", 1)[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ffi, module.lib


def prebuild(source: str, cdef: str) -> Path:
    """Put ``source`` in the cache in the form :func:`build_and_load` will load (the
    extension module, else the shared object) without loading it: a network compiles its
    program once before its switches start, instead of every switch at once."""
    if load_mode() == "abi":
        return build(source)
    try:
        return compile_module(source, cdef)
    except CUnsupported:
        raise
    except Exception as exc:  # noqa: BLE001 - no headers/setuptools: the ABI path below
        log.info("C engine: no extension module (%s); building a shared object", exc)
    return build(source)


def build_and_load(source: str, cdef: str) -> tuple[Any, Any]:
    """``(ffi, lib)`` of ``source``: an extension module when the Python headers are
    there (and $SOFTSWITCH_C_MODE does not say ``abi``), else a plain shared object loaded
    in ABI mode."""
    if load_mode() == "abi":
        return load(build(source), cdef)
    try:
        return build_module(source, cdef)
    except CUnsupported:
        raise
    except Exception as exc:  # noqa: BLE001 - no headers/setuptools: the ABI path below
        log.info("C engine: no extension module (%s); loading a shared object", exc)
    return load(build(source), cdef)
