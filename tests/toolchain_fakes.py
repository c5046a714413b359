"""Stand-ins for testing ``scripts/install-p4-toolchain.sh`` without building anything.

:func:`read_lock` parses the lock file the way the installer does. :func:`make_sources` writes a
source set (the seven trees and PI's submodules) whose version files say what the lock pins,
and whose ``autogen.sh``/``configure`` only record how they were called. :func:`make_tools`
writes ``make`` and ``cmake`` that record their calls and, on install, put small programs into
the prefix that print the versions the real ones would (``p4c VERSION (SHA:  BUILD: Release)``,
``VERSION-unknown``) and BMv2's ``bm/config.h`` with or without the debug logging macros.
Every call is appended to the file named by ``$FAKE_TOOLCHAIN_CALLS`` as ``TREE TOOL ARGS``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

CALLS_ENV = "FAKE_TOOLCHAIN_CALLS"
TREES = ("p4c", "behavioral-model", "PI", "abseil-cpp", "protobuf", "bdwgc", "p4runtime")
PI_SUBMODULES = ("PI/third_party/googletest", "PI/proto/openconfig/gnmi", "PI/proto/p4runtime",
                 "PI/third_party/uthash")
LOCK_LINE = re.compile(r"^(?P<name>\S+)\s+(?P<url>(?:https|file)://\S+)\s+(?P<rev>[0-9a-f]{40})"
                       r"\s+(?P<version>-|[0-9][0-9A-Za-z.+~-]*)$")
# The line of p4c's ir/visitor.cpp that GCC 12 rejects (the installer makes its parameter const).
VISITOR_LINE = "    erase_if(*flow_join_points, [this](flow_join_points_t::value_type &el) {\n"


@dataclass(frozen=True)
class Pin:
    """One line of the lock file."""

    url: str
    rev: str
    version: str


def read_lock(path: Path) -> dict[str, Pin]:
    """The pins of a lock file by tree name; raises ValueError naming a line that is not one."""
    pins: dict[str, Pin] = {}
    for lineno, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = LOCK_LINE.match(line)
        if match is None:
            raise ValueError(f"{path}:{lineno}: not NAME URL COMMIT VERSION: {raw!r}")
        if match["name"] in pins:
            raise ValueError(f"{path}:{lineno}: {match['name']} pinned twice")
        pins[match["name"]] = Pin(match["url"], match["rev"], match["version"])
    return pins


def _script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


# autogen.sh and configure of the autotools trees: record the call and the arguments.
_AUTOGEN = 'echo "$(cat fake.name) autogen.sh" >> "$FAKE_TOOLCHAIN_CALLS"\n'
_CONFIGURE = ('echo "$(cat fake.name) configure $*" >> "$FAKE_TOOLCHAIN_CALLS"\n'
              'printf "%s\\n" "$@" > fake.args\n')


def _write_p4c_pins(p4c: Path, pins: dict[str, Pin]) -> None:
    """p4c's own pins of abseil, protobuf, bdwgc and p4runtime, in the files p4c keeps them in."""
    (p4c / "cmake" / "Abseil.cmake").write_text(
        f'    set(P4C_ABSEIL_VERSION "{pins["abseil-cpp"].version}")\n')
    (p4c / "cmake" / "Protobuf.cmake").write_text(
        f"  set(P4C_PROTOBUF_VERSION {pins['protobuf'].version})\n")
    (p4c / "cmake" / "BDWGC.cmake").write_text(
        f"      GIT_TAG {pins['bdwgc'].rev} # 8.2.6\n")
    (p4c / "CMakeLists.txt").write_text(
        "FetchContent_Declare(\n  p4runtime\n  GIT_REPOSITORY https://github.com/p4lang/p4runtime.git\n"
        f"  GIT_TAG        {pins['p4runtime'].rev}\n)\n")


def make_sources(src: Path, pins: dict[str, Pin]) -> Path:
    """Writes a source set at ``src`` that matches ``pins``; returns ``src``."""
    for tree in (*TREES, *PI_SUBMODULES):
        (src / tree).mkdir(parents=True, exist_ok=True)
        (src / tree / "README").write_text(f"{tree} at {pins[tree].rev}\n")
    p4c = src / "p4c"
    (p4c / "Version.txt").write_text(pins["p4c"].version + "\n")
    (p4c / "cmake").mkdir()
    _write_p4c_pins(p4c, pins)
    (p4c / "ir").mkdir()
    (p4c / "ir" / "visitor.cpp").write_text(VISITOR_LINE)
    (src / "behavioral-model" / "VERSION").write_text(pins["behavioral-model"].version + "\n")
    absl_date, absl_patch = pins["abseil-cpp"].version.split(".")
    (src / "abseil-cpp" / "absl" / "base").mkdir(parents=True)
    (src / "abseil-cpp" / "absl" / "base" / "config.h").write_text(
        f"#define ABSL_LTS_RELEASE_VERSION {absl_date}\n"
        f"#define ABSL_LTS_RELEASE_PATCH_LEVEL {absl_patch}\n")
    release = json.dumps({"25.x": {"protoc_version": pins["protobuf"].version, "lts": False}},
                         indent=4)
    (src / "protobuf" / "version.json").write_text(release + "\n")
    for tree in ("PI", "behavioral-model"):
        (src / tree / "fake.name").write_text(tree + "\n")
        _script(src / tree / "autogen.sh", _AUTOGEN)
        _script(src / tree / "configure", _CONFIGURE)
    return src


# make: records the call; `make install` puts what the tree installs into --prefix.
_MAKE = r'''tree=$(cat fake.name)
echo "$tree make $*" >> "$FAKE_TOOLCHAIN_CALLS"
[[ $1 == install ]] || exit 0
prefix=$(sed -n 's/^--prefix=//p' fake.args)
if [[ $tree == PI ]]; then
    mkdir -p "$prefix/lib" && touch "$prefix/lib/libpi.so"
    exit 0
fi
mkdir -p "$prefix/bin" "$prefix/include/bm"
printf '#!/bin/sh\necho %s-unknown\n' "$(cat VERSION)" > "$prefix/bin/simple_switch_grpc"
printf '#!/bin/sh\nexit 0\n' > "$prefix/bin/simple_switch_CLI"
chmod +x "$prefix/bin/simple_switch_grpc" "$prefix/bin/simple_switch_CLI"
if grep -qx -- --disable-logging-macros fake.args; then
    echo '/* no logging macros */' > "$prefix/include/bm/config.h"
else
    echo '#define BM_LOG_DEBUG_ON /**/' > "$prefix/include/bm/config.h"
fi
'''

# cmake: -S SRC -B BUILD ... records the options; --install BUILD installs a p4c driver.
_CMAKE = r'''echo "p4c cmake $*" >> "$FAKE_TOOLCHAIN_CALLS"
case $1 in
    -S) mkdir -p "$4"; echo "$2" > "$4/fake.src"; printf '%s\n' "$@" > "$4/fake.args" ;;
    --install)
        prefix=$(sed -n 's/^-DCMAKE_INSTALL_PREFIX=//p' "$2/fake.args")
        version=$(cat "$(cat "$2/fake.src")/Version.txt")
        mkdir -p "$prefix/bin"
        printf '#!/bin/sh\necho "p4c %s (SHA:  BUILD: Release)"\n' "$version" > "$prefix/bin/p4c"
        chmod +x "$prefix/bin/p4c" ;;
esac
'''


def make_tools(bindir: Path) -> Path:
    """Writes the fake ``make`` and ``cmake`` into ``bindir``; returns ``bindir``."""
    _script(bindir / "make", _MAKE)
    _script(bindir / "cmake", _CMAKE)
    return bindir


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), "-c", "user.name=fake", "-c",
                           "user.email=fake@example.invalid", *args],
                          check=True, capture_output=True, text=True)
    return proc.stdout.strip()


def make_repos(src: Path, repos: Path, pins: dict[str, Pin]) -> str:
    """One git repository per tree of the source set ``src`` under ``repos``, PI naming its
    submodules by commit as the real one does; returns a lock file's text that pins them by
    file:// URL, so the installer's fetching can run without a network."""
    pinned = dict(pins)
    lines = []
    # The trees others name first: PI names its submodules' commits, p4c bdwgc's and p4runtime's.
    order = (*PI_SUBMODULES, "bdwgc", "p4runtime", "abseil-cpp", "protobuf", "PI",
             "behavioral-model", "p4c")
    for name in order:
        repo = repos / name.replace("/", "+")
        shutil.copytree(src / name, repo)
        if name == "p4c":
            _write_p4c_pins(repo, pinned)
        _git(repo, "init", "-q")
        _git(repo, "add", "-A")
        if name == "PI":
            for sub in PI_SUBMODULES:
                path = sub.removeprefix("PI/")
                _git(repo, "rm", "-rq", "--cached", path)
                _git(repo, "update-index", "--add", "--cacheinfo",
                     f"160000,{pinned[sub].rev},{path}")
        _git(repo, "commit", "-qm", f"{name} as pinned")
        pinned[name] = Pin(f"file://{repo}", _git(repo, "rev-parse", "HEAD"), pins[name].version)
        lines.append(f"{name} {pinned[name].url} {pinned[name].rev} {pinned[name].version}\n")
    return "".join(lines)


def fake_program(path: Path, first_line: str) -> None:
    """An executable at ``path`` whose ``--version`` prints ``first_line``."""
    _script(path, f"echo '{first_line}'\n")
