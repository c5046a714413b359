"""The built-in target's device config: a self-contained bundle of a program's P4 sources.

BMv2 takes p4c's JSON as its P4Runtime ``p4_device_config``; the built-in target compiles
P4 itself, so its device config carries the source instead: JSON (UTF-8) holding a format
tag, the main file and the text of every user file it includes (our own ``core.p4`` and
``v1model.p4`` are not bundled; every target ships them). Paths are stored relative to a
common root so that ``#include "../x.p4"`` and ``-I`` directories survive the trip and the
program can be recompiled on any machine.

:func:`load_device_config` also accepts the plain text of a single-file P4 program, so
``FwdPipeConfig(p4info, "prog.p4")`` from p4runtime-shell works without a compile step.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from softswitch import frontend, include_index, ir
from softswitch.errors import P4Error
from softswitch.frontend.preprocess import preprocess
from softswitch.program_cache import cached_program

log = logging.getLogger(__name__)

FORMAT = "softswitch-device-config"
VERSION = 1
PLAIN_SOURCE_NAME = "program.p4"


class DeviceConfigError(P4Error):
    """Device-config bytes that are neither a bundle we understand nor P4 source."""


@dataclass(frozen=True)
class DeviceConfig:
    """A decoded bundle: main file and include dirs relative to the bundle root."""

    main: str
    files: dict[str, str]
    include_dirs: tuple[str, ...] = ()

    def to_bytes(self) -> bytes:
        doc = {
            "format": FORMAT,
            "version": VERSION,
            "main": self.main,
            "include_dirs": list(self.include_dirs),
            "files": dict(sorted(self.files.items())),
        }
        return json.dumps(doc, indent=1, ensure_ascii=False).encode("utf-8")


def _p4include_dir() -> Path:
    return Path(__file__).resolve().parent / "p4include"


def _user_files(main: Path, include_dirs: Sequence[Path]) -> list[Path]:
    """Files the preprocessor reads for ``main``, without the target's own p4include files
    (remembered while none of them changed: :mod:`softswitch.include_index`)."""
    known = include_index.lookup(main, include_dirs)
    if known is not None:
        return known
    text = main.read_text(encoding="utf-8")
    pre = preprocess(text, str(main), [str(d) for d in include_dirs])
    ours = _p4include_dir()
    seen: dict[Path, None] = {main: None}
    read: dict[Path, None] = {main: None}
    for file in pre.included:
        path = Path(file).resolve()
        read.setdefault(path, None)
        if path.is_file() and not path.is_relative_to(ours):
            seen.setdefault(path, None)
    # where an include could have been found: a file added there may change the answer
    searched = dict.fromkeys([main.parent, *include_dirs, ours,
                              *(p.parent for p in read)])
    include_index.record(main, include_dirs, list(seen), read, searched)
    return list(seen)


def make_device_config(path: str | Path, include_dirs: Sequence[str | Path] = ()) -> bytes:
    """Bundle the program at ``path`` (and every user file it includes) as device config."""
    main = Path(path).resolve()
    try:
        incs = [Path(d).resolve() for d in include_dirs]
        files = _user_files(main, incs)
        texts = {f: f.read_text(encoding="utf-8") for f in files}
    except OSError as err:
        raise DeviceConfigError(f"cannot read {err.filename}: {err.strerror}") from None
    used_incs = [d for d in incs if any(f.is_relative_to(d) for f in files)]
    root = Path(
        os.path.commonpath(
            [str(main.parent)] + [str(f.parent) for f in files] + [str(d) for d in used_incs]
        )
    )

    def rel(p: Path) -> str:
        return PurePosixPath(p.relative_to(root)).as_posix() or "."

    config = DeviceConfig(
        main=rel(main),
        files={rel(f): t for f, t in texts.items()},
        include_dirs=tuple(rel(d) for d in used_incs),
    )
    return config.to_bytes()


def device_config_from_source(text: str, filename: str = PLAIN_SOURCE_NAME) -> bytes:
    """Bundle a single-file program given as text."""
    name = PurePosixPath(filename).name or PLAIN_SOURCE_NAME
    return DeviceConfig(main=name, files={name: text}).to_bytes()


def _safe_rel(path: object, what: str) -> PurePosixPath:
    if not isinstance(path, str) or not path:
        raise DeviceConfigError(f"device config: {what} must be a non-empty string")
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts:
        raise DeviceConfigError(
            f"device config: {what} '{path}' must be a relative path inside the bundle"
        )
    return p


def parse_device_config(data: bytes) -> DeviceConfig | str:
    """The bundle in ``data``, or the P4 source text when ``data`` is plain P4."""
    if not data:
        raise DeviceConfigError("device config is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise DeviceConfigError(
            "device config is neither a softswitch bundle nor P4 source (not UTF-8 text)"
        ) from None
    if "\x00" in text:
        raise DeviceConfigError("device config is neither a softswitch bundle nor P4 source")
    if not text.lstrip().startswith("{"):
        return text
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return text  # a P4 file can start with '{' only in theory; let the parser judge it
    return _bundle(doc)


def _bundle(doc: object) -> DeviceConfig:
    """A parsed JSON document as a bundle of our format and version, its paths relative
    and inside it, its main file among its files."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        hint = (
            " (it looks like BMv2 JSON from p4c)"
            if isinstance(doc, dict) and ("pipelines" in doc or "header_types" in doc)
            else ""
        )
        raise DeviceConfigError(
            f"device config is JSON but not a {FORMAT} bundle{hint}; produce one with "
            "'python -m softswitch compile PROG.p4 --p4info P4INFO --device-config OUT' "
            "or send the P4 source itself"
        )
    version = doc.get("version")
    if version != VERSION:
        raise DeviceConfigError(
            f"device config version {version!r} is not supported "
            f"(this target reads version {VERSION})"
        )
    files = doc.get("files")
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise DeviceConfigError("device config: 'files' must map paths to source texts")
    main = _safe_rel(doc.get("main"), "main")
    for name in files:
        _safe_rel(name, "file name")
    if main.as_posix() not in files:
        raise DeviceConfigError(f"device config: main file '{main}' is not in the bundle")
    incs = doc.get("include_dirs", [])
    if not isinstance(incs, list):
        raise DeviceConfigError("device config: 'include_dirs' must be a list")
    return DeviceConfig(
        main=main.as_posix(),
        files=dict(files),
        include_dirs=tuple(
            _safe_rel(d, "include dir").as_posix() if d != "." else "." for d in incs
        ),
    )


def load_device_config(data: bytes) -> ir.Program:
    """Compile the program in a device config (a bundle, or plain single-file P4 source),
    or take it from the program cache (:mod:`softswitch.program_cache`).

    Compile errors surface as :class:`P4Error` (``FILE:LINE:COL: error: ...``).
    """
    return cached_program(data, lambda: compile_device_config(data))


def compile_device_config(data: bytes) -> ir.Program:
    """Compile the program in a device config, always (see :func:`load_device_config`)."""
    parsed = parse_device_config(data)
    if isinstance(parsed, str):
        return frontend.compile_source(parsed, PLAIN_SOURCE_NAME)
    with tempfile.TemporaryDirectory(prefix="softswitch-config-") as tmp:
        root = Path(tmp)
        for name, text in parsed.files.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        incs = [str(root / d) for d in parsed.include_dirs]
        try:
            return frontend.compile_file(str(root / parsed.main), incs)
        except P4Error as err:
            # point messages at the bundle's own file names, not at the temporary copy
            if err.loc is not None:
                where = Path(os.path.realpath(err.loc.file))
                base = Path(os.path.realpath(tmp))
                if where.is_relative_to(base):
                    rel = where.relative_to(base).as_posix()
                    err.loc = ir.Loc(rel, err.loc.line, err.loc.col)
            raise
