"""The P4 toolchain installer (``scripts/install-p4-toolchain.sh``, ``make toolchain``).

Nothing is built: the installer runs against source sets, prefixes and build directories in
tmp_path, with ``make`` and ``cmake`` stand-ins (tests/toolchain_fakes.py) that record their
calls and install small programs printing the versions the real ones would.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.toolchain_fakes import (
    CALLS_ENV,
    PI_SUBMODULES,
    TREES,
    Pin,
    fake_program,
    make_repos,
    make_sources,
    make_tools,
    read_lock,
)

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "install-p4-toolchain.sh"
LOCK = REPO / "scripts" / "p4-toolchain.lock"


@pytest.fixture
def pins() -> dict[str, Pin]:
    """The project's pins."""
    return read_lock(LOCK)


class Box:
    """One tmp_path set-up: a source set, a prefix, a build directory, fake build tools."""

    def __init__(self, root: Path, pins: dict[str, Pin]) -> None:
        self.src = make_sources(root / "src", pins)
        self.prefix = root / "prefix"
        self.build = root / "build"
        self.bin = make_tools(root / "fakebin")
        self.calls = root / "calls.txt"
        self.calls.touch()

    def env(self, **extra: str) -> dict[str, str]:
        """The installer's environment: everything in tmp_path, no apt, the fake tools first."""
        env = {k: v for k, v in os.environ.items()
               if k not in {"SRC", "PREFIX", "BMV2_FAST", "BMV2_FAST_PREFIX", "JOBS", "BUILD",
                            "LOG", "LOCK", "SKIP_APT"}}
        env.update(PATH=f"{self.bin}:{env['PATH']}", PREFIX=str(self.prefix),
                   BUILD=str(self.build), SKIP_APT="1", JOBS="2", **{CALLS_ENV: str(self.calls)})
        env.update(extra)
        return env

    def run(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        """Runs the installer with ``args`` (``SRC`` is this box's source set unless given)."""
        extra.setdefault("SRC", str(self.src))
        return subprocess.run(["bash", str(SCRIPT), *args], env=self.env(**extra),
                              capture_output=True, text=True, timeout=60, check=False)

    def take_calls(self) -> list[str]:
        """The build-tool calls since the last take."""
        lines = self.calls.read_text().splitlines()
        self.calls.write_text("")
        return lines


@pytest.fixture
def box(tmp_path: Path, pins: dict[str, Pin]) -> Box:
    """A fresh source set, prefix and build directory."""
    return Box(tmp_path, pins)


def built(calls: list[str]) -> set[str]:
    """The trees whose build ran: their ``make install`` or ``cmake --install`` was called."""
    installs = re.compile(r" (make install|cmake --install)")
    return {line.split()[0] for line in calls if installs.search(line)}


# --- the lock file ---------------------------------------------------------------------------


def test_lock_pins_every_tree_once(pins: dict[str, Pin]) -> None:
    """The lock names each source tree and PI submodule once, by full commit, from GitHub."""
    assert set(pins) == {*TREES, *PI_SUBMODULES}
    for name, pin in pins.items():
        assert re.fullmatch(r"[0-9a-f]{40}", pin.rev), name
        assert pin.url.startswith("https://github.com/"), name
    for name in ("p4c", "behavioral-model", "abseil-cpp", "protobuf"):
        assert pins[name].version != "-", f"{name} needs the version the installer checks"
    assert re.fullmatch(r"\d{8}\.\d+", pins["abseil-cpp"].version)


def test_lock_error_names_file_line_and_field(box: Box, tmp_path: Path) -> None:
    """A malformed lock line is refused with file:line, the tree and the bad value."""
    lock = tmp_path / "bad.lock"
    text = LOCK.read_text().replace("34b86e9bacb932c799aaf1b83495ce1e386ea047", "34b86e9")
    lock.write_text(text)
    lineno = next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith("p4c "))
    proc = box.run("--check", LOCK=str(lock))
    assert proc.returncode == 2
    assert f"{lock}:{lineno}: COMMIT of p4c: '34b86e9' is not a full 40-hex commit id" \
        in proc.stderr
    assert "Traceback" not in proc.stderr


def test_lock_missing_tree_is_refused(box: Box, tmp_path: Path) -> None:
    """A lock without a line for a tree the build needs says which."""
    lock = tmp_path / "short.lock"
    lock.write_text("".join(line + "\n" for line in LOCK.read_text().splitlines()
                            if not line.startswith("bdwgc ")))
    proc = box.run("--dry-run", LOCK=str(lock))
    assert proc.returncode == 2
    assert f"{lock}: no line for 'bdwgc'" in proc.stderr


# --- settings --------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["yes", "2", "true"])
def test_bad_bmv2_fast_is_refused(box: Box, value: str) -> None:
    """BMV2_FAST takes 0 or 1; anything else is an error naming it, before anything is done."""
    proc = box.run(BMV2_FAST=value)
    assert proc.returncode == 2
    assert f"BMV2_FAST='{value}': must be 0" in proc.stderr
    assert not box.build.exists() and not box.prefix.exists()
    assert box.take_calls() == []


def test_make_toolchain_passes_settings(box: Box) -> None:
    """`make toolchain` hands its variables to the installer (a bad one comes back named)."""
    proc = subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO), "toolchain", "BMV2_FAST=fast",
         f"SRC={box.src}", f"PREFIX={box.prefix}"],
        env=box.env(PATH=os.environ["PATH"]), capture_output=True, text=True, timeout=60,
        check=False)
    assert proc.returncode != 0
    assert "BMV2_FAST='fast': must be 0" in proc.stderr
    assert not box.prefix.exists()


@pytest.mark.parametrize(("setting", "message"), [
    ("JOBS=0", "JOBS='0': must be a whole number"),
    ("PREFIX=relative/dir", "PREFIX='relative/dir': must be an absolute path"),
    ("--bogus", "unknown argument '--bogus'"),
])
def test_bad_settings_are_refused(box: Box, setting: str, message: str) -> None:
    """Each bad setting is named with its value."""
    proc = box.run(setting)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_fast_prefix_must_differ_from_prefix(box: Box) -> None:
    """The performance build beside the default one needs a directory of its own."""
    proc = box.run("--dry-run", BMV2_FAST_PREFIX=str(box.prefix))
    assert proc.returncode == 2
    assert "BMV2_FAST_PREFIX" in proc.stderr and "is PREFIX" in proc.stderr


# --- the source set --------------------------------------------------------------------------


def test_missing_trees_are_named(box: Box) -> None:
    """Missing or empty trees are all named, with where to get them; nothing is built."""
    for path in (box.src / "bdwgc", box.src / "PI" / "third_party" / "uthash"):
        for child in path.iterdir():
            child.unlink()
        path.rmdir()
    (box.src / "PI" / "third_party" / "uthash").mkdir()
    proc = box.run()
    assert proc.returncode == 2
    bdwgc = f"missing source tree {box.src}/bdwgc/ (https://github.com/ivmai/bdwgc at "
    assert bdwgc in proc.stderr
    assert f"empty source tree {box.src}/PI/third_party/uthash/" in proc.stderr
    assert box.take_calls() == [] and not box.prefix.exists()


def test_sources_disagreeing_with_the_lock_are_refused(box: Box, pins: dict[str, Pin]) -> None:
    """A tree whose release or whose p4c pin differs from the lock is named with both values."""
    (box.src / "p4c" / "cmake" / "BDWGC.cmake").write_text("GIT_TAG " + "a" * 40 + "\n")
    (box.src / "behavioral-model" / "VERSION").write_text("1.14.0\n")
    proc = box.run("--dry-run")
    assert proc.returncode == 2
    assert (f"p4c's bdwgc pin (cmake/BDWGC.cmake GIT_TAG) is '{'a' * 40}', the lock says "
            f"'{pins['bdwgc'].rev}'") in proc.stderr
    assert f"VERSION is '1.14.0', the lock says '{pins['behavioral-model'].version}'" in proc.stderr


def test_git_tree_at_another_commit_is_refused(box: Box) -> None:
    """A source tree with git metadata must be at the pinned commit."""
    tree = box.src / "bdwgc"
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    proc = box.run("--dry-run")
    assert proc.returncode == 2
    assert f"{tree}/ is at commit {head}, the lock pins" in proc.stderr


# --- steps and stamps --------------------------------------------------------------------------


def stamps_in(out: str) -> dict[str, Path]:
    """The stamp each step would leave, from the dry run's 'STEP: would build (no stamp X)'."""
    return {m[1]: Path(m[2]) for m in re.finditer(r": (\S+): would build \(no stamp (\S+)\)", out)}


def test_dry_run_plans_every_step_and_changes_nothing(box: Box) -> None:
    """A dry run on a fresh prefix plans PI, BMv2 and p4c, prints their commands, builds nothing."""
    proc = box.run("--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert set(stamps_in(proc.stdout)) == {"pi", "bmv2", "p4c"}
    assert "--with-pi --with-thrift --with-nanomsg" in proc.stdout
    assert "--disable-logging-macros" not in proc.stdout
    assert "-DFETCHCONTENT_SOURCE_DIR_BDWGC=" + str(box.src / "bdwgc") in proc.stdout
    assert "would build: pi bmv2 p4c" in proc.stdout
    assert box.take_calls() == []
    assert not box.build.exists() and not box.prefix.exists()
    assert "value_type &el" in (box.src / "p4c" / "ir" / "visitor.cpp").read_text()


def test_dry_run_honours_stamps_and_bmv2_fast_rebuilds_bmv2_only(box: Box) -> None:
    """With every step's stamp and product present nothing is planned; BMV2_FAST=1 has stamps
    of its own for BMv2, so only BMv2 is planned, with BMv2's performance flags."""
    stamps = stamps_in(box.run("--dry-run").stdout)
    products = {"pi": box.prefix / "lib" / "libpi.so",
                "bmv2": box.prefix / "bin" / "simple_switch_grpc",
                "p4c": box.prefix / "bin" / "p4c"}
    for step, stamp in stamps.items():
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text("done\n")
        products[step].parent.mkdir(parents=True, exist_ok=True)
        products[step].write_text("")
    again = box.run("--dry-run")
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("done before (stamp") == 3
    assert "would build: nothing" in again.stdout
    fast = box.run("--dry-run", BMV2_FAST="1")
    assert fast.returncode == 0, fast.stderr
    assert set(stamps_in(fast.stdout)) == {"bmv2"}
    assert stamps_in(fast.stdout)["bmv2"] != stamps["bmv2"]
    assert "--disable-logging-macros --disable-elogger CXXFLAGS=-g\\ -O3 CFLAGS=-g\\ -O3" \
        in fast.stdout
    # a stamp whose product was removed does not count
    products["p4c"].unlink()
    gone = box.run("--dry-run")
    assert f"p4c: would build ({products['p4c']} is missing)" in gone.stdout


def test_clone_mode_dry_run_fetches_each_pinned_commit(box: Box, pins: dict[str, Pin]) -> None:
    """Without SRC every tree is fetched from its URL at its commit (shallow), into BUILD/src."""
    proc = box.run("--dry-run", SRC="")
    assert proc.returncode == 0, proc.stderr
    for name, pin in pins.items():
        assert f"(in {box.build}/src/{name}) git fetch -q --depth 1 --no-tags {pin.url} {pin.rev}" \
            in proc.stdout, name
    assert not box.build.exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_clone_mode_fetches_builds_and_keeps_the_clones(box: Box, tmp_path: Path) -> None:
    """Without SRC the trees are fetched at their pinned commits (here from file:// repositories,
    PI's submodules into PI), checked, and built; a second fetch finds them in place."""
    lock = tmp_path / "local.lock"
    lock.write_text(make_repos(box.src, tmp_path / "repos", read_lock(LOCK)))
    pins = read_lock(lock)
    proc = box.run(SRC="", LOCK=str(lock))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(": fetch: ") == len(pins)
    assert built(box.take_calls()) == {"PI", "behavioral-model", "p4c"}
    for name, pin in pins.items():
        head = subprocess.run(["git", "-C", str(box.build / "src" / name), "rev-parse", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        assert head == pin.rev, name
    assert (box.build / "src" / "PI" / "third_party" / "uthash" / "README").is_file()
    # Installed already: nothing is fetched or built. Forced: the clones are reused.
    assert "nothing to do" in box.run(SRC="", LOCK=str(lock)).stdout
    forced = box.run("--force", SRC="", LOCK=str(lock))
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert ": fetch: " not in forced.stdout
    assert built(box.take_calls()) == {"PI", "behavioral-model", "p4c"}


def test_install_is_idempotent_and_fast_build_replaces_bmv2_only(box: Box) -> None:
    """A full run builds PI, BMv2 and p4c and reports them; a second does nothing; BMV2_FAST=1
    rebuilds BMv2 alone, and --check then tells the two builds apart."""
    first = box.run()
    assert first.returncode == 0, first.stdout + first.stderr
    assert built(box.take_calls()) == {"PI", "behavioral-model", "p4c"}
    assert "toolchain ready: p4c, PI and the BMv2 default build in " + str(box.prefix) \
        in first.stdout
    assert re.search(r"p4c +ok +[\d.]+ \(SHA: +BUILD: Release\)", first.stdout)
    assert (box.build / "install.log").read_text().count("+ (in ") >= 6
    assert "const flow_join_points_t::value_type &el" in \
        (box.src / "p4c" / "ir" / "visitor.cpp").read_text()
    record = box.prefix / "share" / "ina-testbed" / "p4-toolchain.installed"
    assert f"names no commit; this installer's record {record} names the pinned one" \
        in first.stdout

    second = box.run()
    assert second.returncode == 0, second.stderr
    assert "already matches the pins: nothing to do" in second.stdout
    assert box.take_calls() == []

    fast = box.run(BMV2_FAST="1")
    assert fast.returncode == 0, fast.stdout + fast.stderr
    calls = box.take_calls()
    assert built(calls) == {"behavioral-model"}
    assert any("behavioral-model configure" in c and "--disable-elogger" in c for c in calls)
    assert "BMv2 fast build" in fast.stdout
    assert box.run("--check", BMV2_FAST="1").returncode == 0
    default = box.run("--check")
    assert default.returncode == 1
    assert "has BMv2's fast build; the default build is asked for (BMV2_FAST=0)" in default.stdout


def test_check_compares_the_installers_record(box: Box, tmp_path: Path) -> None:
    """PI reports no version: after a lock change, the installer's record names what PI was
    installed from, and the check fails on it."""
    assert box.run().returncode == 0
    lock = tmp_path / "moved.lock"
    old = read_lock(LOCK)["PI"].rev
    lock.write_text(LOCK.read_text().replace(old, "1" * 40))
    proc = box.run("--check", LOCK=str(lock))
    assert proc.returncode == 1
    assert f"PI was installed from {old[:12]}, the lock pins {'1' * 12}" in proc.stdout


def test_moving_a_dependency_pin_rebuilds_what_uses_it(box: Box, tmp_path: Path,
                                                       pins: dict[str, Pin]) -> None:
    """p4c reports its own version only; a new bdwgc pin (with a p4c tree that asks for it)
    still rebuilds p4c, and p4c alone."""
    assert box.run().returncode == 0
    box.take_calls()
    moved = dict(pins)
    moved["bdwgc"] = Pin(pins["bdwgc"].url, "2" * 40, "-")
    lock = tmp_path / "moved.lock"
    lock.write_text(LOCK.read_text().replace(pins["bdwgc"].rev, "2" * 40))
    shutil.rmtree(box.src)
    make_sources(box.src, moved)
    assert box.run("--check", LOCK=str(lock)).returncode == 1
    proc = box.run(LOCK=str(lock))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert built(box.take_calls()) == {"p4c"}
    assert box.run("--check", LOCK=str(lock)).returncode == 0


def test_fast_build_beside_the_default_one(box: Box, tmp_path: Path) -> None:
    """BMV2_FAST_PREFIX installs the performance build in its own prefix, linked to PREFIX's PI."""
    fast_prefix = tmp_path / "bmv2-fast"
    proc = box.run(BMV2_FAST_PREFIX=str(fast_prefix))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    configures = [c for c in box.take_calls() if c.startswith("behavioral-model configure")]
    assert len(configures) == 2
    assert f"--prefix={box.prefix} " in configures[0] and "--disable-elogger" not in configures[0]
    assert f"--prefix={fast_prefix} " in configures[1] and "--disable-elogger" in configures[1]
    # its own libraries first (the dynamic linker takes the first RUNPATH entry that has one)
    assert f"-Wl,-rpath,{fast_prefix}/lib -Wl,-rpath,{box.prefix}/lib" in configures[1]
    assert (fast_prefix / "bin" / "simple_switch_grpc").is_file()
    check = box.run("--check", BMV2_FAST_PREFIX=str(fast_prefix))
    assert check.returncode == 0, check.stdout
    assert re.search(r"simple_switch_grpc fast +ok .*fast build", check.stdout)


# --- what is installed -----------------------------------------------------------------------


def install_fakes(prefix: Path, p4c: str, bmv2: str, logging_macros: bool = True) -> None:
    """Programs in ``prefix`` that print the given version lines, and BMv2's config.h."""
    fake_program(prefix / "bin" / "p4c", p4c)
    fake_program(prefix / "bin" / "simple_switch_grpc", bmv2)
    fake_program(prefix / "bin" / "simple_switch_CLI", "")
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "libpi.so.0").write_text("")
    (prefix / "include" / "bm").mkdir(parents=True)
    (prefix / "include" / "bm" / "config.h").write_text(
        "#define BM_LOG_DEBUG_ON /**/\n" if logging_macros else "\n")


def test_check_recognises_pinned_install(box: Box, pins: dict[str, Pin]) -> None:
    """Programs reporting the pinned versions match (with or without the commit in them), and
    an install run then does nothing, without needing the sources."""
    install_fakes(box.prefix, f"p4c {pins['p4c'].version} (SHA: {pins['p4c'].rev[:7]} "
                  "BUILD: Release)", f"{pins['behavioral-model'].version}-unknown")
    proc = box.run("--check")
    assert proc.returncode == 0, proc.stdout
    assert "result: installed, matching the pins" in proc.stdout
    assert "names no commit (built from a tree without git metadata)" in proc.stdout  # BMv2
    (box.src / "bdwgc" / "README").unlink()
    (box.src / "bdwgc").rmdir()
    for src in (str(box.src), ""):  # a source set lacking a tree; none (it would be fetched)
        nothing = box.run(SRC=src)
        assert nothing.returncode == 0, nothing.stderr
        assert "already matches the pins: nothing to do" in nothing.stdout
    assert not box.build.exists()
    assert box.take_calls() == []


@pytest.mark.parametrize(("p4c", "bmv2", "problem"), [
    ("p4c 1.2.4.0 (SHA: 1234567 BUILD: Release)", None, "p4c is version 1.2.4.0, the lock pins"),
    ("P4C_PIN (SHA: 0000000 BUILD: Release)", None, "p4c was built from 0000000, the lock pins"),
    (None, "1.15.0-unknown", "is BMv2 1.15.0, the lock pins"),
    (None, "BMV2_PIN-deadbeef", "was built from deadbeef, the lock pins"),
])
def test_check_names_what_differs(box: Box, pins: dict[str, Pin], p4c: str | None,
                                  bmv2: str | None, problem: str) -> None:
    """An installed program at another version or commit fails the check, naming it."""
    p4c_line = (p4c or f"p4c {pins['p4c'].version} (SHA:  BUILD: Release)").replace(
        "P4C_PIN", f"p4c {pins['p4c'].version}")
    bmv2_line = (bmv2 or f"{pins['behavioral-model'].version}-unknown").replace(
        "BMV2_PIN", pins["behavioral-model"].version)
    install_fakes(box.prefix, p4c_line, bmv2_line)
    proc = box.run("--check")
    assert proc.returncode == 1
    assert problem in proc.stdout
    assert "result: not installed as pinned" in proc.stdout


def test_check_on_empty_prefix_names_each_program(box: Box) -> None:
    """Nothing installed: every program is named missing and the status is 1."""
    proc = box.run("--check")
    assert proc.returncode == 1
    for program in ("p4c", "simple_switch_grpc", "simple_switch_CLI"):
        assert f"{program} is not installed ({box.prefix}/" in proc.stdout


def test_ci_reports_the_toolchain_without_building_it() -> None:
    """CI (90 minutes) never builds the toolchain: .ci/run only runs the installer's --check."""
    text = (REPO / ".ci" / "run").read_text()
    code = [line.split("#", 1)[0] for line in text.splitlines()]
    calls = [line for line in code if "install-p4-toolchain" in line or "toolchain" in line]
    assert calls, ".ci/run does not report the toolchain"
    for line in calls:
        assert "--check" in line or "toolchain-check" in line, line


def test_check_refuses_a_build_that_loads_another_builds_libraries(box: Box,
                                                                   tmp_path: Path) -> None:
    """A performance build whose RUNPATH put the default build's lib first ran with the
    default build's libbmpi: --check names the foreign libraries."""
    fast_prefix = tmp_path / "bmv2-fast"
    proc = box.run(BMV2_FAST_PREFIX=str(fast_prefix))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ldd = box.bin / "ldd"
    ldd.write_text("#!/bin/sh\n"
                   f"echo \"\tlibbmpi.so.0 => {box.prefix}/lib/libbmpi.so.0 (0x1)\"\n"
                   "echo \"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x2)\"\n")
    ldd.chmod(0o755)
    check = box.run("--check", BMV2_FAST_PREFIX=str(fast_prefix))
    assert check.returncode == 1, check.stdout
    assert (f"{fast_prefix}/bin/simple_switch_grpc loads BMv2 libraries of another build: "
            f"{box.prefix}/lib/libbmpi.so.0") in check.stdout + check.stderr
