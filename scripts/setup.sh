#!/usr/bin/env bash
# Prepare this checkout to build, test and run the testbed; every step is idempotent, so a
# second run on a prepared machine does nothing and returns in about a second.
#
#   1. Debian packages the testbed needs (installed only when missing; `apt-get update` only then)
#   2. .venv from requirements.txt (re-installed when requirements.txt changes: stamp file)
#   3. Debian's Mininet made importable from .venv, without the rest of Debian's dist-packages
#   4. this project installed editable (no deps) for its console scripts
#   5. this project's modules byte-compiled (pip compiles what it installs, not an editable
#      project; where PYTHONDONTWRITEBYTECODE is set, as on the CI machine, no process ever
#      writes them, and each one the suite starts compiled the project's modules again: 0.8 s
#      of CPU for the switch, runner and controller's imports, issue 29)
#
# Environment: PYTHON (interpreter used to create .venv; default python3, must be 3.11),
# SETUP_SKIP_APT=1 (skip step 1, e.g. on a machine without root).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"
PY="$VENV/bin/python"
PYTHON="${PYTHON:-python3}"
# mininet: the emulator (brings mnexec; its recommended openvswitch-switch comes along);
# iproute2: ip netns / veth / tc; ethtool: turning off veth checksum offload so software
# switches see final checksums; chromium + chromium-driver: the live view's browser test (selenium);
# gcc + libc6-dev: the built-in target's C engine, make run's default, compiles each program;
# openssh-server + sudo: runs across machines (make run servers=...): Mininet's cluster code
# reaches each server with ssh and sudo, and the cluster test runs one sshd per namespace.
APT_PACKAGES=(mininet iproute2 ethtool chromium chromium-driver gcc libc6-dev openssh-server sudo)
DEBIAN_MININET=/usr/lib/python3/dist-packages/mininet
REQ_STAMP="$VENV/.requirements.sha256"
PROJECT_STAMP="$VENV/.project.sha256"

log() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# --- 1. Debian packages ---------------------------------------------------------------------
missing_apt_packages() {
    local pkg status
    for pkg in "${APT_PACKAGES[@]}"; do
        status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
        [[ "$status" == "install ok installed" ]] || printf '%s\n' "$pkg"
    done
}

install_apt_packages() {
    if [[ "${SETUP_SKIP_APT:-0}" == "1" ]]; then
        return
    fi
    if ! command -v dpkg-query >/dev/null 2>&1; then
        log "not a Debian system: skipping system packages (${APT_PACKAGES[*]})"
        return
    fi
    local missing
    mapfile -t missing < <(missing_apt_packages)
    if (( ${#missing[@]} == 0 )); then
        return
    fi
    if (( EUID != 0 )); then
        die "missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}"
    fi
    log "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q "${missing[@]}"
}

# --- 2. virtualenv --------------------------------------------------------------------------
python_is_311() {
    "$1" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null
}

ensure_venv() {
    if [[ -x "$PY" ]]; then
        python_is_311 "$PY" || die ".venv is not Python 3.11; remove it (make distclean) and re-run"
        return
    fi
    command -v "$PYTHON" >/dev/null 2>&1 || die "no '$PYTHON' on PATH (need Python 3.11)"
    python_is_311 "$PYTHON" || die "'$PYTHON' is not Python 3.11 (Debian's Mininet needs 3.11); set PYTHON=..."
    log "creating .venv with $("$PYTHON" -c 'import sys; print(sys.executable)')"
    "$PYTHON" -m venv "$VENV"
}

ensure_requirements() {
    local want have=""
    want="$(sha256sum requirements.txt | cut -d' ' -f1)"
    [[ -f "$REQ_STAMP" ]] && have="$(cat "$REQ_STAMP")"
    if [[ "$want" == "$have" ]]; then
        return
    fi
    log "installing requirements.txt into .venv"
    # --no-compile: pip byte-compiles every module of every package it installs (1.2 GB,
    # ns-3's and cppyy's bindings, mypy, scipy), most never imported; a module is compiled
    # when first imported instead (make unexports PYTHONDONTWRITEBYTECODE, so it is kept).
    # A new .venv: 71-99 s with the compile, 44-71 s without (issue 29).
    "$PY" -m pip install -q --no-compile -r requirements.txt
    printf '%s\n' "$want" > "$REQ_STAMP"
}

# --- 3. Mininet from Debian -----------------------------------------------------------------
# Only the `mininet` package is linked into a directory of its own that a .pth file adds to
# the venv's path; Debian's other dist-packages (old protobuf, scapy, ...) stay out of sight.
ensure_mininet_link() {
    local site dir pth
    site="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
    dir="$VENV/debian-mininet"
    pth="$site/debian-mininet.pth"
    if [[ ! -d "$DEBIAN_MININET" ]]; then
        # No Mininet here (e.g. SETUP_SKIP_APT): tests that need it skip with a reason.
        rm -f "$pth"
        return
    fi
    if [[ "$(readlink "$dir/mininet" 2>/dev/null || true)" != "$DEBIAN_MININET" ]]; then
        mkdir -p "$dir"
        ln -sfn "$DEBIAN_MININET" "$dir/mininet"
    fi
    if [[ "$(cat "$pth" 2>/dev/null || true)" != "$dir" ]]; then
        printf '%s\n' "$dir" > "$pth"
    fi
}

# --- 4. the project itself ------------------------------------------------------------------
ensure_project() {
    local want have=""
    want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
    [[ -f "$PROJECT_STAMP" ]] && have="$(cat "$PROJECT_STAMP")"
    if [[ "$want" == "$have" && -x "$VENV/bin/softswitch" ]]; then
        return
    fi
    log "installing this project (editable) into .venv"
    "$PY" -m pip install -q --no-deps --no-build-isolation -e .
    printf '%s\n' "$want" > "$PROJECT_STAMP"
}

# --- 5. the project's bytecode ---------------------------------------------------------------
ensure_bytecode() {
    local dirs=(tests) d
    for d in */; do
        [[ -f "$d/__init__.py" ]] && dirs+=("${d%/}")
    done
    # compileall skips what is up to date (a no-op costs a fraction of a second) and writes
    # whatever PYTHONDONTWRITEBYTECODE says; a module that does not compile is the import's
    # error to report, not set-up's
    "$PY" -m compileall -q -j 0 "${dirs[@]}" > /dev/null || true
}

install_apt_packages
ensure_venv
ensure_requirements
ensure_mininet_link
ensure_project
ensure_bytecode
