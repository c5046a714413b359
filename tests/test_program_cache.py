"""The program cache: a switch start reuses the checked program of the same sources and the same
front end, and never a stale, broken or failed one."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from softswitch import ir, program_cache
from softswitch.device_config import load_device_config, make_device_config
from softswitch.errors import P4Error
from softswitch.frontend import compile_file
from softswitch.p4info import build_p4info
from softswitch.program_cache import MAX_ENTRIES, cache_dir, cached_program

PROGRAM = Path(__file__).resolve().parent / "p4" / "port_forward.p4"


class Compiles:
    """compile_ that counts its calls."""

    def __init__(self, path: Path = PROGRAM) -> None:
        self.path = path
        self.calls = 0

    def __call__(self) -> ir.Program:
        self.calls += 1
        return compile_file(self.path)


@pytest.fixture
def config() -> bytes:
    return make_device_config(PROGRAM)


def test_second_load_is_a_hit_with_the_same_program(tmp_path: Path, config: bytes) -> None:
    compiles = Compiles()
    first = cached_program(config, compiles, directory=tmp_path)
    second = cached_program(config, compiles, directory=tmp_path)
    assert compiles.calls == 1
    assert second is not first  # read back from disk
    assert build_p4info(second) == build_p4info(first) == build_p4info(compile_file(PROGRAM))
    assert len(list(tmp_path.glob("*.pickle"))) == 1


def test_other_sources_origin_or_front_end_miss(tmp_path: Path, config: bytes,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    compiles = Compiles()
    cached_program(config, compiles, directory=tmp_path)
    cached_program(config + b" ", compiles, directory=tmp_path)  # other bytes
    cached_program(config, compiles, origin="/elsewhere/prog.p4", directory=tmp_path)
    assert compiles.calls == 3
    monkeypatch.setattr(program_cache, "compiler_fingerprint", lambda: "a changed front end")
    cached_program(config, compiles, directory=tmp_path)
    assert compiles.calls == 4


def test_p4info_text_is_cached_per_sources_and_builder(tmp_path: Path, config: bytes,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Every network start wrote the P4Info by walking the IR (a second of CPU); the text is
    kept beside the program, built again for other sources or another P4Info builder."""
    from google.protobuf import text_format

    built: list[str] = []

    def build() -> str:
        built.append("x")
        return text_format.MessageToString(build_p4info(compile_file(PROGRAM)))

    first = program_cache.cached_p4info_text(config, build, directory=tmp_path)
    assert program_cache.cached_p4info_text(config, build, directory=tmp_path) == first
    assert len(built) == 1 and "pkg_info" in first
    program_cache.cached_p4info_text(config + b" ", build, directory=tmp_path)
    assert len(built) == 2
    monkeypatch.setattr(program_cache, "_p4info_fingerprint", lambda: "another builder")
    program_cache.cached_p4info_text(config, build, directory=tmp_path)
    assert len(built) == 3
    for entry in tmp_path.glob("*.pickle"):
        entry.write_bytes(b"broken")  # a broken entry is built again, never a failure
    assert program_cache.cached_p4info_text(config, build, directory=tmp_path) == first
    assert len(built) == 4


def test_compiler_fingerprint_covers_the_front_end_sources() -> None:
    fp = program_cache.compiler_fingerprint()
    assert len(fp) == 64 and fp == program_cache.compiler_fingerprint()
    assert "frontend" in program_cache._COMPILER_PARTS and "ir.py" in program_cache._COMPILER_PARTS


def test_a_failed_compile_is_not_stored(tmp_path: Path, config: bytes) -> None:
    calls = []

    def broken() -> ir.Program:
        calls.append(1)
        raise P4Error("x.p4:1:1: error: boom")

    for _ in range(2):
        with pytest.raises(P4Error, match="boom"):
            cached_program(config, broken, directory=tmp_path)
    assert len(calls) == 2 and not list(tmp_path.glob("*.pickle"))


@pytest.mark.parametrize("content", [b"", b"not a pickle", None])
def test_a_broken_entry_is_compiled_again_and_replaced(tmp_path: Path, config: bytes,
                                                       caplog: pytest.LogCaptureFixture,
                                                       content: bytes | None) -> None:
    compiles = Compiles()
    cached_program(config, compiles, directory=tmp_path)
    (entry,) = tmp_path.glob("*.pickle")
    if content is None:  # a readable pickle of something else
        import pickle

        content = pickle.dumps({"not": "a program"})
    entry.write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="softswitch.program_cache"):
        program = cached_program(config, compiles, directory=tmp_path)
    assert compiles.calls == 2 and build_p4info(program) == build_p4info(compile_file(PROGRAM))
    assert "making it again" in caplog.text
    cached_program(config, compiles, directory=tmp_path)
    assert compiles.calls == 2  # the replaced entry is good


def test_an_unwritable_cache_only_costs_speed(tmp_path: Path, config: bytes,
                                              caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the directory should be")
    compiles = Compiles()
    with caplog.at_level(logging.WARNING, logger="softswitch.program_cache"):
        program = cached_program(config, compiles, directory=blocker / "programs")
    assert compiles.calls == 1 and build_p4info(program).tables
    assert "cannot write" in caplog.text


def test_cache_location_and_off_switch(tmp_path: Path) -> None:
    assert cache_dir({"SOFTSWITCH_PROGRAM_CACHE": "off"}) is None
    assert cache_dir({"SOFTSWITCH_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "softswitch" / "programs"


def test_off_switch_compiles_every_time(tmp_path: Path, config: bytes,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOFTSWITCH_PROGRAM_CACHE", "off")
    monkeypatch.setenv("SOFTSWITCH_CACHE_DIR", str(tmp_path / "c"))
    compiles = Compiles()
    cached_program(config, compiles)
    cached_program(config, compiles)
    assert compiles.calls == 2 and not (tmp_path / "c").exists()


def test_oldest_entries_are_pruned(tmp_path: Path, config: bytes) -> None:
    import os

    for i in range(MAX_ENTRIES + 3):
        old = tmp_path / f"{i:064x}.pickle"
        old.write_bytes(b"x")
        os.utime(old, (1000 + i, 1000 + i))
    cached_program(config, Compiles(), directory=tmp_path)
    left = sorted(p.name for p in tmp_path.glob("*.pickle"))
    assert len(left) == MAX_ENTRIES
    assert f"{0:064x}.pickle" not in left and f"{MAX_ENTRIES + 2:064x}.pickle" in left


def test_an_entry_in_use_outlives_newer_unused_ones(tmp_path: Path, config: bytes,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A hit marks its entry used: a program loaded at every start stays while entries
    written after it and never read again go first (before, the oldest written went)."""
    import os

    monkeypatch.setattr(program_cache, "MAX_ENTRIES", 2)
    compiles = Compiles()
    cached_program(config, compiles, directory=tmp_path)
    (used,) = tmp_path.glob("*.pickle")
    os.utime(used, (1000, 1000))  # written long ago ...
    newer = tmp_path / f"{1:064x}.pickle"
    newer.write_bytes(b"x")
    os.utime(newer, (2000, 2000))
    cached_program(config, compiles, directory=tmp_path)  # ... and read now
    cached_program(config + b" ", compiles, directory=tmp_path)  # a third entry: prune
    assert compiles.calls == 2
    assert used.exists() and not newer.exists()


def test_device_config_loads_through_the_cache_and_errors_still_name_the_bundle_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOFTSWITCH_CACHE_DIR", str(tmp_path / "cache"))
    data = make_device_config(PROGRAM)
    assert build_p4info(load_device_config(data)) == build_p4info(compile_file(PROGRAM))
    assert len(list((tmp_path / "cache").glob("*.pickle"))) == 1
    bad = tmp_path / "bad.p4"
    bad.write_text("#include <v1model.p4>\nheader h_t { bit<8> f; }\n"
                   "control C() { apply { x = 1; } }\n")
    with pytest.raises(P4Error) as err:
        load_device_config(make_device_config(bad))
    assert str(err.value).startswith("bad.p4:3:")
    assert len(list((tmp_path / "cache").glob("*.pickle"))) == 1


def test_parser_tables_are_cached_and_a_broken_cache_file_is_survived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from softswitch.frontend import parser

    monkeypatch.setenv("SOFTSWITCH_CACHE_DIR", str(tmp_path / "programs"))
    cache_path = program_cache.parser_cache_file()
    assert isinstance(cache_path, str)
    cache_file = Path(cache_path)
    assert cache_file.parent == tmp_path and not cache_file.exists()
    lark, terminals = parser._parser.__wrapped__()
    assert cache_file.stat().st_size > 0
    again, _ = parser._parser.__wrapped__()  # built from the cache file
    assert [r.origin.name for r in again.rules] == [r.origin.name for r in lark.rules]
    cache_file.write_bytes(b"garbage")
    third, third_terminals = parser._parser.__wrapped__()
    assert third_terminals == terminals
    monkeypatch.setenv("SOFTSWITCH_PROGRAM_CACHE", "off")
    assert program_cache.parser_cache_file() is False


def test_compile_p4_file_compiles_once_and_names_the_real_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a switch start and the topology's P4Info build share: the second load of the same
    file is a hit; a broken file's error names the file itself, not a bundle copy."""
    from softswitch import frontend
    from softswitch.program_cache import compile_p4_file

    monkeypatch.setenv("SOFTSWITCH_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[tuple[Any, ...]] = []
    real = frontend.compile_file

    def compile_file(*a: Any, **k: Any) -> ir.Program:
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(frontend, "compile_file", compile_file)
    first, data = compile_p4_file(PROGRAM)
    second, again = compile_p4_file(PROGRAM)
    assert len(calls) == 1 and data == again == make_device_config(PROGRAM)
    assert build_p4info(second) == build_p4info(first)
    bad = tmp_path / "bad.p4"
    bad.write_text("#include <v1model.p4>\ncontrol C() { apply { x = 1; } }\n")
    with pytest.raises(P4Error) as err:
        compile_p4_file(bad)
    assert str(err.value).startswith(f"{bad}:2:")
