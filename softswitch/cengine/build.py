"""Compile generated C with the system compiler into a shared object, cached by the
source's hash, and load it through cffi (ABI mode: no Python extension is built).

The cache is ``$SOFTSWITCH_CACHE_DIR`` or ``$XDG_CACHE_HOME/softswitch/cengine`` (default
``~/.cache/softswitch/cengine``); a program whose source did not change loads its shared
object again without compiling. Objects are written to a temporary name and renamed, so
concurrent switches loading the same program never see a half-written file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from softswitch.cengine.errors import CBuildError, CUnsupported

log = logging.getLogger(__name__)

CFLAGS = ("-O2", "-shared", "-fPIC", "-std=gnu11", "-w")
BUILD_VERSION = "1"  # bump when the flags or the ABI between Python and C change


def cache_dir() -> Path:
    """Where compiled programs are kept."""
    explicit = os.environ.get("SOFTSWITCH_CACHE_DIR")
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
    digest = hashlib.sha256("\0".join([BUILD_VERSION, cc, *CFLAGS, source]).encode()).hexdigest()[
        :32
    ]
    out_dir = cache_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    so = out_dir / f"p4_{digest}.so"
    if so.exists():
        return so
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        c_file = Path(tmp) / "prog.c"
        c_file.write_text(source, encoding="utf-8")
        tmp_so = Path(tmp) / "prog.so"
        proc = subprocess.run(
            [cc, *CFLAGS, "-o", str(tmp_so), str(c_file)],
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
    return so


def load(so: Path, cdef: str) -> tuple[Any, Any]:
    """``(ffi, lib)`` of a compiled program."""
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(cdef)
    return ffi, ffi.dlopen(str(so))
