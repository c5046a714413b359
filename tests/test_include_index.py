"""The include index: a program's device config is bundled without running the preprocessor
again while none of the files it read and none of the directories it searched changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from softswitch import device_config, include_index

MAIN = '#include "inc.p4"\n#include <core.p4>\ncontrol C() { apply { } }\n'


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The cache in tmp_path, stamps trusted at once (the files here are seconds old), and
    the list of files the preprocessor ran on."""
    monkeypatch.setenv("SOFTSWITCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SOFTSWITCH_PROGRAM_CACHE", raising=False)
    monkeypatch.setattr(include_index, "RACY_S", 0.0)
    runs: list[str] = []
    real = device_config.preprocess

    def preprocess(text: str, filename: str = "<string>", include_dirs: object = ()) -> object:
        runs.append(filename)
        return real(text, filename, include_dirs)  # type: ignore[arg-type]

    monkeypatch.setattr(device_config, "preprocess", preprocess)
    return runs


def _files(config: bytes) -> dict[str, str]:
    return dict(json.loads(config)["files"])


def _program(tmp_path: Path) -> tuple[Path, Path]:
    src, inc = tmp_path / "src", tmp_path / "inc"
    src.mkdir()
    inc.mkdir()
    (src / "main.p4").write_text(MAIN)
    (inc / "inc.p4").write_text("// from inc/\n")
    return src / "main.p4", inc


def test_a_second_bundle_skips_the_preprocessor_and_is_the_same(
        tmp_path: Path, counted: list[str]) -> None:
    main, inc = _program(tmp_path)
    first = device_config.make_device_config(main, [inc])
    again = device_config.make_device_config(main, [inc])
    assert again == first and len(counted) == 1
    assert set(_files(first)) == {"src/main.p4", "inc/inc.p4"}


def test_an_edited_include_is_bundled_as_it_is_now(tmp_path: Path,
                                                    counted: list[str]) -> None:
    main, inc = _program(tmp_path)
    device_config.make_device_config(main, [inc])
    (inc / "inc.p4").write_text('// from inc/, edited\n#include "more.p4"\n')
    (inc / "more.p4").write_text("// more\n")
    got = _files(device_config.make_device_config(main, [inc]))
    assert len(counted) == 2
    assert got["inc/inc.p4"].startswith("// from inc/, edited") and "inc/more.p4" in got


def test_a_file_added_where_the_search_looks_first_is_found(tmp_path: Path,
                                                            counted: list[str]) -> None:
    """An include found in an include dir, then a file of that name beside the main file
    (searched first): the directory's change makes the preprocessor run again."""
    main, inc = _program(tmp_path)
    assert "inc/inc.p4" in _files(device_config.make_device_config(main, [inc]))
    (main.parent / "inc.p4").write_text("// beside main, and longer\n")
    got = _files(device_config.make_device_config(main, [inc]))
    assert len(counted) == 2
    assert got.get("inc.p4", got.get("src/inc.p4", "")).startswith("// beside main"), got


def test_files_changed_just_now_are_not_trusted_to_their_stamps(
        tmp_path: Path, counted: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Within RACY_S of a change a second change can keep the stamp: no entry is written."""
    monkeypatch.setattr(include_index, "RACY_S", 3600.0)
    main, inc = _program(tmp_path)
    device_config.make_device_config(main, [inc])
    device_config.make_device_config(main, [inc])
    assert len(counted) == 2
    assert not (tmp_path / "cache" / "includes").exists()


def test_no_index_with_the_cache_off_and_a_broken_entry_is_ignored(
        tmp_path: Path, counted: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    main, inc = _program(tmp_path)
    monkeypatch.setenv("SOFTSWITCH_PROGRAM_CACHE", "off")
    device_config.make_device_config(main, [inc])
    device_config.make_device_config(main, [inc])
    assert len(counted) == 2
    monkeypatch.delenv("SOFTSWITCH_PROGRAM_CACHE")
    first = device_config.make_device_config(main, [inc])
    (entry,) = (tmp_path / "cache" / "includes").iterdir()
    entry.write_text("{not json")
    assert device_config.make_device_config(main, [inc]) == first
    assert len(counted) == 4


def test_the_index_keeps_its_most_recently_used_entries(tmp_path: Path, counted: list[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond MAX_ENTRIES the least recently used entries go (every clone and front end
    adds its own)."""
    monkeypatch.setattr(include_index, "MAX_ENTRIES", 1)
    main, inc = _program(tmp_path)
    other = main.parent / "other.p4"
    other.write_text("#include <core.p4>\ncontrol C() { apply { } }\n")
    device_config.make_device_config(main, [inc])
    device_config.make_device_config(other)  # another entry: the first one goes
    assert len(list((tmp_path / "cache" / "includes").glob("*.json"))) == 1
    device_config.make_device_config(other)
    assert len(counted) == 2  # the kept one serves
    device_config.make_device_config(main, [inc])
    assert len(counted) == 3  # the pruned one is preprocessed again
