#!/usr/bin/env bash
# Install the P4 reference toolchain the testbed's BMv2 target runs on: p4c (its BMv2 back
# end), PI (the P4Runtime server library) and BMv2 (simple_switch_grpc, simple_switch_CLI),
# built from source at the revisions in scripts/p4-toolchain.lock. No package registry ships
# them for Debian 12, so this is the one supported way to get them (docs/setup.md).
#
#   make toolchain [SRC=DIR] [PREFIX=/usr/local] [BMV2_FAST=1] [BMV2_FAST_PREFIX=DIR] [JOBS=N]
#   make toolchain-check            installed vs pinned, exit status 1 unless all is there
#   scripts/install-p4-toolchain.sh [--check | --dry-run] [--force] [NAME=VALUE ...]
#
# A full build takes 60-90 minutes on 2 cores (p4c is most of it) and several GB of disk in
# BUILD; it runs niced and writes the compilers' output to a log, printing one line per step.
# Run it again at any time: a finished step leaves a stamp named after the step, its pinned
# revisions and its options, so only what changed is built again; when the installed programs
# already report the pinned versions nothing is done at all.
set -euo pipefail

ME="install-p4-toolchain"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SCRIPT="$HERE/$(basename "${BASH_SOURCE[0]}")"
TREES=(p4c behavioral-model PI abseil-cpp protobuf bdwgc p4runtime)
PI_SUBMODULES=(PI/third_party/googletest PI/proto/openconfig/gnmi PI/proto/p4runtime
    PI/third_party/uthash)
# Build dependencies from Debian 12 (git and ca-certificates only fetch the sources).
APT_PACKAGES=(build-essential cmake autoconf automake libtool libtool-bin pkg-config bison flex
    libfl-dev libgmp-dev libgc-dev libboost-dev libboost-system-dev libboost-thread-dev
    libboost-filesystem-dev libboost-program-options-dev libboost-iostreams-dev
    libboost-graph-dev libboost-test-dev libprotobuf-dev libprotoc-dev protobuf-compiler
    libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libthrift-dev thrift-compiler
    libnanomsg-dev libpcap-dev libjudy-dev libreadline-dev libssl-dev libevent-dev
    libxxhash-dev libjsoncpp-dev libffi-dev python3-dev python3-venv python3-six python3-thrift
    git ca-certificates)
# BMv2's own advice for throughput (its docs/performance.md): no debug/trace logging macros,
# no nanomsg event logger, -O3.
BMV2_FAST_FLAGS=(--disable-logging-macros --disable-elogger "CXXFLAGS=-g -O3" "CFLAGS=-g -O3")
NICE_LEVEL=10

usage() {
    cat <<'EOF'
usage: scripts/install-p4-toolchain.sh [--check | --dry-run] [--force] [NAME=VALUE ...]

Builds and installs p4c (BMv2 back end), PI and BMv2 (simple_switch_grpc) at the revisions in
scripts/p4-toolchain.lock. Settings, as NAME=VALUE arguments or environment variables
(`make toolchain NAME=VALUE` passes them on):

  SRC=DIR             build from local source trees DIR/{p4c,behavioral-model,PI,abseil-cpp,
                      protobuf,bdwgc,p4runtime} (PI with its submodules) at the pinned
                      revisions, instead of fetching them from GitHub
  PREFIX=DIR          where to install (default /usr/local)
  BMV2_FAST=0|1       1: BMv2's performance build (no debug logging macros, no event logger,
                      -O3) in PREFIX instead of its default build (default 0)
  BMV2_FAST_PREFIX=DIR also install BMv2's performance build under DIR, beside the default
                      build in PREFIX (e.g. /usr/local/bmv2-fast)
  JOBS=N              parallel compile jobs (default: the cores, at most one per 2 GB of RAM)
  BUILD=DIR           build directory and stamps (default /var/tmp/ina-p4-toolchain)
  LOG=FILE            the build log (default BUILD/install.log)
  SKIP_APT=1          do not install missing Debian build dependencies
  LOCK=FILE           another lock file (default scripts/p4-toolchain.lock)

  --check    only report what is installed in PREFIX against the pins; exit 1 if anything
             is missing or differs
  --dry-run  check the settings and sources and print what would be done, doing nothing
  --force    build every step again, stamps and installed programs notwithstanding
EOF
}

# --- output ---------------------------------------------------------------------------------
LOG_OPEN=0
say() {
    printf '%s: %s\n' "$ME" "$*"
    if (( LOG_OPEN )); then printf '%s: %s\n' "$ME" "$*" >> "$LOG"; fi
}
die() {  # die STATUS MESSAGE...
    local status=$1
    shift
    printf '%s: error: %s\n' "$ME" "$*" >&2
    if (( LOG_OPEN )); then printf '%s: error: %s\n' "$ME" "$*" >> "$LOG"; fi
    exit "$status"
}
duration() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
shown() { local a out=(); for a; do out+=("$(printf '%q' "$a")"); done; printf '%s' "${out[*]}"; }

# run [--try] [-C DIR] CMD ARGS...: one build command, its output into the log. A failing
# command ends the install with the log's last lines, unless --try (then its status returns).
run() {
    local try=0 dir=""
    if [[ $1 == --try ]]; then try=1; shift; fi
    if [[ $1 == -C ]]; then dir=$2; shift 2; fi
    local text
    text="${dir:+(in $dir) }$(shown "$@")"
    if [[ $MODE == dry-run ]]; then
        printf '    + %s\n' "$text"
        return 0
    fi
    printf '+ %s\n' "$text" >> "$LOG"
    if ( if [[ -n $dir ]]; then cd "$dir" || exit 1; fi; exec "$@" ) >> "$LOG" 2>&1 < /dev/null
    then
        return 0
    fi
    local status=$?
    if (( try )); then return "$status"; fi
    printf '%s: error: step %s failed (exit %d) after %s: %s\n' "$ME" "$STEP" "$status" \
        "$(duration $((SECONDS - STEP_START)))" "$text" >&2
    printf '%s: the last lines of %s:\n' "$ME" "$LOG" >&2
    tail -n 30 "$LOG" | sed 's/^/  | /' >&2
    exit 1
}

# --- settings -------------------------------------------------------------------------------
MODE=install
FORCE=0
ARGS=("$@")
for arg in "$@"; do
    case $arg in
        --check) MODE=check ;;
        --dry-run | -n) MODE=dry-run ;;
        --force) FORCE=1 ;;
        -h | --help) usage; exit 0 ;;
        SRC=* | PREFIX=* | BMV2_FAST=* | BMV2_FAST_PREFIX=* | JOBS=* | BUILD=* | LOG=* | \
            SKIP_APT=* | LOCK=*)
            export "${arg?}" ;;
        *) die 2 "unknown argument '$arg' (settings are NAME=VALUE; see --help)" ;;
    esac
done

# Make passes unset settings as empty strings: empty means the default.
SRC=${SRC:-}
PREFIX=${PREFIX:-/usr/local}
BMV2_FAST=${BMV2_FAST:-0}
BMV2_FAST_PREFIX=${BMV2_FAST_PREFIX:-}
BUILD=${BUILD:-/var/tmp/ina-p4-toolchain}
LOG=${LOG:-$BUILD/install.log}
LOCK=${LOCK:-$HERE/p4-toolchain.lock}
SKIP_APT=${SKIP_APT:-0}

default_jobs() {
    local cores mem_kb
    cores=$(nproc)
    mem_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo 2>/dev/null || echo 0)
    local by_mem=$((mem_kb / (2 * 1024 * 1024)))
    (( by_mem >= 1 )) || by_mem=1
    (( by_mem < cores )) && cores=$by_mem
    printf '%d' "$cores"
}
JOBS=${JOBS:-$(default_jobs)}

[[ $BMV2_FAST == 0 || $BMV2_FAST == 1 ]] ||
    die 2 "BMV2_FAST='$BMV2_FAST': must be 0 (BMv2's default build) or 1 (its performance build)"
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die 2 "JOBS='$JOBS': must be a whole number of at least 1"
[[ $SKIP_APT == 0 || $SKIP_APT == 1 ]] || die 2 "SKIP_APT='$SKIP_APT': must be 0 or 1"
for var in PREFIX BUILD; do
    [[ ${!var} == /* ]] || die 2 "$var='${!var}': must be an absolute path"
done
if [[ -n $BMV2_FAST_PREFIX ]]; then
    [[ $BMV2_FAST_PREFIX == /* ]] ||
        die 2 "BMV2_FAST_PREFIX='$BMV2_FAST_PREFIX': must be an absolute path"
    [[ ${BMV2_FAST_PREFIX%/} != "${PREFIX%/}" ]] ||
        die 2 "BMV2_FAST_PREFIX='$BMV2_FAST_PREFIX' is PREFIX: the performance build goes beside the default one, in another directory"
    [[ $BMV2_FAST == 0 ]] ||
        die 2 "BMV2_FAST=1 with BMV2_FAST_PREFIX='$BMV2_FAST_PREFIX': the second prefix holds the performance build beside PREFIX's default build; use one of the two"
fi
if [[ -n $SRC ]]; then
    [[ -d $SRC ]] || die 2 "SRC='$SRC': no such directory"
    SRC="$(cd "$SRC" && pwd)"
fi
BMV2_FLAVOUR=default
(( BMV2_FAST )) && BMV2_FLAVOUR=fast

# --- the lock file --------------------------------------------------------------------------
declare -A PIN_URL=() PIN_REV=() PIN_VER=()
PIN_NAMES=()
read_lock() {
    [[ -f $LOCK ]] || die 2 "lock file $LOCK: not found"
    local lineno=0 line name url rev ver extra
    while IFS= read -r line || [[ -n $line ]]; do
        lineno=$((lineno + 1))
        line=${line%%#*}
        [[ $line =~ [^[:space:]] ]] || continue
        read -r name url rev ver extra <<< "$line"
        [[ -n ${ver:-} && -z ${extra:-} ]] ||
            die 2 "$LOCK:$lineno: want four fields NAME URL COMMIT VERSION, got '$line'"
        [[ -z ${PIN_REV[$name]:-} ]] || die 2 "$LOCK:$lineno: '$name' is pinned twice"
        [[ $url =~ ^(https|file)://[^[:space:]]+$ ]] ||
            die 2 "$LOCK:$lineno: URL of $name: '$url' is not an https:// (or file://) address"
        [[ $rev =~ ^[0-9a-f]{40}$ ]] ||
            die 2 "$LOCK:$lineno: COMMIT of $name: '$rev' is not a full 40-hex commit id"
        [[ $ver =~ ^(-|[0-9][0-9A-Za-z.+~-]*)$ ]] ||
            die 2 "$LOCK:$lineno: VERSION of $name: '$ver' is neither a release number nor -"
        PIN_URL[$name]=$url PIN_REV[$name]=$rev PIN_VER[$name]=$ver
        PIN_NAMES+=("$name")
    done < "$LOCK"
    local need
    for need in "${TREES[@]}" "${PI_SUBMODULES[@]}"; do
        [[ -n ${PIN_REV[$need]:-} ]] || die 2 "$LOCK: no line for '$need'"
    done
    for need in p4c behavioral-model abseil-cpp protobuf; do
        [[ ${PIN_VER[$need]} != - ]] ||
            die 2 "$LOCK: '$need' needs its VERSION (the installer checks it), not -"
    done
}
read_lock
short() { printf '%s' "${PIN_REV[$1]:0:12}"; }

# --- what is installed ----------------------------------------------------------------------
MANIFEST_REL=share/ina-testbed/p4-toolchain.installed
PROBLEMS=()
NOTES=()
row() { printf '  %-20s %-9s %s\n' "$1" "$2" "$3"; }

# The version line of a program, or empty.
version_of() { timeout 60 "$1" --version 2>&1 < /dev/null | head -n 1 || true; }

path_note() {  # path_note PROGRAM INSTALLED_PATH
    local found
    found=$(command -v "$1" 2>/dev/null || true)
    if [[ -z $found ]]; then
        NOTES+=("$1 is not on PATH; the tests and \`make run target=bmv2\` look for it there (add $(dirname "$2") to PATH)")
    elif [[ $(readlink -f "$found") != "$(readlink -f "$2")" ]]; then
        NOTES+=("PATH finds $1 at $found, not $2; the tests use the one on PATH")
    fi
}

# A note for a program whose version line names no commit (built from an exported tree).
unrecorded() {  # unrecorded WHAT NAME PREFIX
    local manifest=$3/$MANIFEST_REL
    if [[ -f $manifest && $(awk -v n="$2" '$1 == n { print $3 }' "$manifest") == "${PIN_REV[$2]}" ]]
    then
        NOTES+=("$1 names no commit; this installer's record $manifest names the pinned one")
    else
        NOTES+=("$1 names no commit (built from a tree without git metadata): only its version is compared")
    fi
}

inspect_p4c() {
    local bin=$1/bin/p4c want=${PIN_VER[p4c]} rev=${PIN_REV[p4c]} out ver sha
    if [[ ! -x $bin ]]; then
        row p4c missing "$bin"
        PROBLEMS+=("p4c is not installed ($bin)")
        return
    fi
    out=$(version_of "$bin")
    # "p4c 1.2.5.16 (SHA: 34b86e9 BUILD: Release)"; the SHA is empty when p4c was built from
    # a tree without git metadata.
    local re='^p4c ([^ ]+)( \(SHA: *([0-9a-f]*) +BUILD: *([^)]*)\))?'
    if [[ ! $out =~ $re ]]; then
        row p4c unknown "$bin: --version printed '$out'"
        PROBLEMS+=("p4c --version printed '$out', not 'p4c VERSION ...'")
        return
    fi
    ver=${BASH_REMATCH[1]} sha=${BASH_REMATCH[3]}
    if [[ $ver != "$want" ]]; then
        row p4c differs "${out#p4c }  $bin"
        PROBLEMS+=("p4c is version $ver, the lock pins $want (${rev:0:12})")
    elif [[ -n $sha && $rev != "$sha"* ]]; then
        row p4c differs "${out#p4c }  $bin"
        PROBLEMS+=("p4c was built from $sha, the lock pins ${rev:0:12}")
    else
        row p4c ok "${out#p4c }  $bin"
        [[ -n $sha ]] || unrecorded "p4c $ver" p4c "$1"
    fi
    path_note p4c "$bin"
}

inspect_bmv2() {  # inspect_bmv2 PREFIX WANT_FAST LABEL
    local prefix=$1 want_fast=$2 label=$3 bin=$1/bin/simple_switch_grpc out ver build flavour
    local want=${PIN_VER[behavioral-model]} rev=${PIN_REV[behavioral-model]}
    local want_flavour=default
    (( want_fast )) && want_flavour=fast
    if [[ ! -x $bin ]]; then
        row "$label" missing "$bin"
        PROBLEMS+=("simple_switch_grpc is not installed ($bin)")
        return
    fi
    out=$(version_of "$bin")
    # "1.15.5-9674187f": BMv2's VERSION file, then the commit (or "unknown" without git).
    local re='^([0-9][0-9A-Za-z.]*)-([^[:space:]]+)$'
    if [[ ! $out =~ $re ]]; then
        row "$label" unknown "$bin: --version printed '$out'"
        PROBLEMS+=("simple_switch_grpc --version printed '$out', not VERSION-BUILD")
        return
    fi
    ver=${BASH_REMATCH[1]} build=${BASH_REMATCH[2]}
    # The installed bm/config.h says how BMv2 was configured: the performance build has no
    # debug logging macros.
    local config=$prefix/include/bm/config.h
    if [[ ! -f $config ]]; then
        flavour=unknown
    elif grep -q '^#define BM_LOG_DEBUG_ON' "$config"; then
        flavour=default
    else
        flavour=fast
    fi
    local status=ok
    if [[ $ver != "$want" ]]; then
        status=differs
        PROBLEMS+=("$bin is BMv2 $ver, the lock pins $want (${rev:0:12})")
    elif [[ $build =~ ^[0-9a-f]{7,40}$ && $rev != "$build"* ]]; then
        status=differs
        PROBLEMS+=("$bin was built from $build, the lock pins ${rev:0:12}")
    elif [[ ! $build =~ ^[0-9a-f]{7,40}$ ]]; then
        unrecorded "$bin ($out)" behavioral-model "$prefix"
    fi
    if [[ $flavour == unknown ]]; then
        status=differs
        PROBLEMS+=("$config is missing, so BMv2's build (default or fast) is unknown")
    elif [[ $flavour != "$want_flavour" ]]; then
        status=differs
        PROBLEMS+=("$prefix has BMv2's $flavour build; the $want_flavour build is asked for (BMV2_FAST=$want_fast)")
    fi
    local foreign
    foreign=$(foreign_bm_libs "$bin" "$prefix")
    if [[ -n $foreign ]]; then
        status=differs
        PROBLEMS+=("$bin loads BMv2 libraries of another build: $foreign (reinstall it)")
    fi
    row "$label" "$status" "$out, $flavour build  $bin"
}

# BMv2 libraries (libbm*, libsimpleswitch*) that BIN resolves outside its own PREFIX/lib: a
# build installed beside another must not run with the other's libraries.
foreign_bm_libs() {  # foreign_bm_libs BIN PREFIX
    command -v ldd > /dev/null || return 0
    ldd "$1" 2> /dev/null | awk -v own="${2%/}/lib/" '
        $1 ~ /^lib(bm|simpleswitch)/ && $2 == "=>" && index($3, own) != 1 { printf "%s%s", sep, $3; sep = ", " }'
}

inspect_installed() {  # inspect_installed: rows and PROBLEMS for PREFIX (and BMV2_FAST_PREFIX)
    PROBLEMS=()
    NOTES=()
    printf 'P4 toolchain in %s, against %s:\n' "$PREFIX" "$LOCK"
    inspect_p4c "$PREFIX"
    inspect_bmv2 "$PREFIX" "$BMV2_FAST" simple_switch_grpc
    [[ -x $PREFIX/bin/simple_switch_grpc ]] && path_note simple_switch_grpc "$PREFIX/bin/simple_switch_grpc"
    if [[ -x $PREFIX/bin/simple_switch_CLI ]]; then
        row simple_switch_CLI ok "$PREFIX/bin/simple_switch_CLI"
    else
        row simple_switch_CLI missing "$PREFIX/bin/simple_switch_CLI"
        PROBLEMS+=("simple_switch_CLI is not installed ($PREFIX/bin/simple_switch_CLI)")
    fi
    local lib
    lib=$(compgen -G "$PREFIX/lib/libpi.so*" | head -n 1 || true)
    if [[ -n $lib ]]; then
        row PI ok "$lib"
    else
        row PI missing "$PREFIX/lib/libpi.so"
        PROBLEMS+=("PI is not installed ($PREFIX/lib/libpi.so)")
    fi
    if [[ -n $BMV2_FAST_PREFIX ]]; then
        inspect_bmv2 "$BMV2_FAST_PREFIX" 1 "simple_switch_grpc fast"
    fi
    # What this installer recorded when it finished (absent after other ways of installing).
    local manifest=$PREFIX/$MANIFEST_REL name rev
    if [[ -f $manifest ]]; then
        while read -r name _ rev _; do
            [[ -n $name && $name != \#* ]] || continue
            if [[ -n ${PIN_REV[$name]:-} && ${PIN_REV[$name]} != "$rev" ]]; then
                PROBLEMS+=("$name was installed from ${rev:0:12}, the lock pins $(short "$name") ($manifest)")
            fi
        done < "$manifest"
    fi
    printf '  pinned: p4c %s @%s, behavioral-model %s @%s, PI @%s\n' "${PIN_VER[p4c]}" \
        "$(short p4c)" "${PIN_VER[behavioral-model]}" "$(short behavioral-model)" "$(short PI)"
    local note problem
    for note in "${NOTES[@]}"; do printf '  note: %s\n' "$note"; done
    for problem in "${PROBLEMS[@]}"; do printf '  - %s\n' "$problem"; done
    (( ${#PROBLEMS[@]} == 0 ))
}

if [[ $MODE == check ]]; then
    if inspect_installed; then
        echo "result: installed, matching the pins"
        exit 0
    fi
    echo "result: not installed as pinned (make toolchain installs it; see docs/setup.md)"
    exit 1
fi

if (( ! FORCE )); then
    if report=$(inspect_installed); then
        printf '%s\n' "$report"
        say "the toolchain in $PREFIX already matches the pins: nothing to do (--force builds it again)"
        exit 0
    fi
fi

# From here on the install (or its dry run). Builds run niced, like every long job here.
if [[ $MODE == install && -z ${INA_TOOLCHAIN_NICED:-} ]]; then
    current=$(nice)
    if (( current < NICE_LEVEL )); then
        export INA_TOOLCHAIN_NICED=1
        exec nice -n $((NICE_LEVEL - current)) bash "$SCRIPT" "${ARGS[@]}"
    fi
fi

# --- the source trees -----------------------------------------------------------------------
# In a tree with its own git metadata the commit is compared; in an exported tree, the
# versions its files state.
tree_head() {  # the commit of DIR when DIR is itself a git work tree, else empty
    [[ -e $1/.git ]] && git -C "$1" rev-parse -q --verify HEAD 2>/dev/null || true
}
# The value of a line in FILE: value_in FILE SED_SCRIPT
value_in() { [[ -f $1 ]] && sed -n "$2" "$1" | head -n 1 || true; }

check_sources() {  # check_sources DIR: every tree there, at its pins, or one error naming all
    local src=$1 problems=() tree dir head got
    for tree in "${TREES[@]}" "${PI_SUBMODULES[@]}"; do
        dir=$src/$tree
        if [[ ! -d $dir ]]; then
            problems+=("missing source tree $dir/ (${PIN_URL[$tree]} at ${PIN_REV[$tree]})")
        elif [[ -z $(ls -A "$dir") ]]; then
            problems+=("empty source tree $dir/ (${PIN_URL[$tree]} at ${PIN_REV[$tree]}; a submodule not checked out?)")
        else
            head=$(tree_head "$dir")
            if [[ -n $head && $head != "${PIN_REV[$tree]}" ]]; then
                problems+=("$dir/ is at commit $head, the lock pins ${PIN_REV[$tree]}")
            fi
        fi
    done
    if (( ${#problems[@]} == 0 )); then
        check_versions "$src"
        return
    fi
    printf '%s: error: %s does not hold the pinned source trees:\n' "$ME" "$src" >&2
    printf '  - %s\n' "${problems[@]}" >&2
    exit 2
}

check_versions() {  # release numbers in the trees, and p4c's own pins against the lock
    local src=$1 problems=() got sub path
    expect() {  # expect WHAT GOT WANT
        if [[ -z $2 ]]; then
            problems+=("cannot read $1")
        elif [[ $2 != "$3" ]]; then
            problems+=("$1 is '$2', the lock says '$3'")
        fi
    }
    expect "$src/p4c/Version.txt" "$(value_in "$src/p4c/Version.txt" '/[0-9]/{s/[[:space:]]//g;p}')" \
        "${PIN_VER[p4c]}"
    expect "$src/behavioral-model/VERSION" \
        "$(value_in "$src/behavioral-model/VERSION" '/[0-9]/{s/[[:space:]]//g;p}')" \
        "${PIN_VER[behavioral-model]}"
    local config=$src/abseil-cpp/absl/base/config.h
    got=$(value_in "$config" 's/^#define ABSL_LTS_RELEASE_VERSION \([0-9]*\).*/\1/p')
    [[ -n $got ]] && got="$got.$(value_in "$config" 's/^#define ABSL_LTS_RELEASE_PATCH_LEVEL \([0-9]*\).*/\1/p')"
    expect "abseil-cpp's release (absl/base/config.h)" "$got" "${PIN_VER[abseil-cpp]}"
    expect "protobuf's release (version.json)" \
        "$(value_in "$src/protobuf/version.json" 's/.*"protoc_version": *"\([^"]*\)".*/\1/p')" \
        "${PIN_VER[protobuf]}"
    # p4c fetches (or, offline, expects) exactly these; the lock must agree with them.
    expect "p4c's abseil pin (cmake/Abseil.cmake)" \
        "$(value_in "$src/p4c/cmake/Abseil.cmake" 's/.*set *( *P4C_ABSEIL_VERSION *"\{0,1\}\([0-9.]*\).*/\1/p')" \
        "${PIN_VER[abseil-cpp]}"
    expect "p4c's protobuf pin (cmake/Protobuf.cmake)" \
        "$(value_in "$src/p4c/cmake/Protobuf.cmake" 's/.*set *( *P4C_PROTOBUF_VERSION *"\{0,1\}\([0-9.]*\).*/\1/p')" \
        "${PIN_VER[protobuf]}"
    expect "p4c's bdwgc pin (cmake/BDWGC.cmake GIT_TAG)" \
        "$(value_in "$src/p4c/cmake/BDWGC.cmake" 's/.*GIT_TAG *\([0-9a-f]\{40\}\).*/\1/p')" \
        "${PIN_REV[bdwgc]}"
    expect "p4c's p4runtime pin (CMakeLists.txt GIT_TAG)" \
        "$( [[ -f $src/p4c/CMakeLists.txt ]] && grep -A3 'GIT_REPOSITORY.*p4lang/p4runtime' \
            "$src/p4c/CMakeLists.txt" | sed -n 's/.*GIT_TAG *\([0-9a-f]\{40\}\).*/\1/p' | head -n 1)" \
        "${PIN_REV[p4runtime]}"
    if [[ -n $(tree_head "$src/PI") ]]; then
        for sub in "${PI_SUBMODULES[@]}"; do
            path=${sub#PI/}
            got=$(git -C "$src/PI" ls-tree HEAD "$path" | awk '{ print $3 }')
            expect "the commit PI names for $path" "$got" "${PIN_REV[$sub]}"
        done
    fi
    unset -f expect
    if (( ${#problems[@]} )); then
        printf '%s: error: the sources in %s do not match %s:\n' "$ME" "$src" "$LOCK" >&2
        printf '  - %s\n' "${problems[@]}" >&2
        exit 2
    fi
}

fetch_tree() {  # fetch_tree NAME DIR: DIR becomes a git work tree at NAME's pinned commit
    local name=$1 dir=$2 url=${PIN_URL[$1]} rev=${PIN_REV[$1]}
    if [[ $(tree_head "$dir") == "$rev" ]]; then
        return
    fi
    say "fetch: $name at ${rev:0:12} from $url"
    run rm -rf "$dir"
    run git init -q "$dir"
    # GitHub serves a single commit; a server that does not gets the whole history fetched.
    if ! run --try -C "$dir" git fetch -q --depth 1 --no-tags "$url" "$rev"; then
        run -C "$dir" git fetch -q "$url" '+refs/heads/*:refs/remotes/origin/*' \
            '+refs/tags/*:refs/tags/*'
    fi
    run -C "$dir" git -c advice.detachedHead=false checkout -q "$rev"
}

fetch_sources() {  # fetch_sources DIR
    local src=$1 tree
    for tree in "${TREES[@]}" "${PI_SUBMODULES[@]}"; do
        fetch_tree "$tree" "$src/$tree"
    done
}

# --- steps ----------------------------------------------------------------------------------
STEP=""
STEP_START=$SECONDS
BUILT=()
stamp_of() {  # stamp_of STEP KEY: the stamp file of this step with these revisions and options
    printf '%s/stamps/%s-%s.done' "$BUILD" "$1" "$(printf '%s' "$2" | sha256sum | cut -c1-16)"
}
# needed STEP KEY PRODUCT [CHECK...]: whether the step must run. It is skipped when its stamp
# exists and what it installs is still there, or when CHECK (a command) finds that already
# installed as pinned (e.g. by an earlier install that left no stamps here).
needed() {
    local step=$1 key=$2 product=$3 stamp
    shift 3
    stamp=$(stamp_of "$step" "$key")
    STEP=$step
    STEP_START=$SECONDS
    if (( ! FORCE )); then
        if [[ -f $stamp && -e $product ]]; then
            say "$step: done before (stamp $stamp), skipped"
            return 1
        fi
        if (( $# )) && "$@"; then
            say "$step: already installed as pinned ($product), skipped"
            return 1
        fi
    fi
    local why="no stamp $stamp"
    (( FORCE )) && why="--force"
    [[ -f $stamp && ! -e $product ]] && why="$product is missing"
    if [[ $MODE == dry-run ]]; then say "$step: would build ($why)"; else say "$step: building ($why)"; fi
    return 0
}
# The installed-as-pinned checks of single steps (quiet; true when nothing differs). The
# programs' versions say little about what they were linked with: this installer's record
# in the prefix (when there is one) must also name the pinned commits of their parts.
installed_ok() { ( PROBLEMS=(); NOTES=(); "$@" > /dev/null; (( ${#PROBLEMS[@]} == 0 )) ); }
record_agrees() {  # record_agrees PREFIX NAME...
    local manifest=$1/$MANIFEST_REL name
    shift
    [[ -f $manifest ]] || return 0
    for name; do
        [[ $(awk -v n="$name" '$1 == n { print $3 }' "$manifest") == "${PIN_REV[$name]}" ]] ||
            return 1
    done
}
pi_ok() {
    compgen -G "$PREFIX/lib/libpi.so*" > /dev/null &&
        record_agrees "$PREFIX" PI "${PI_SUBMODULES[@]}"
}
bmv2_ok() {  # bmv2_ok PREFIX FAST
    installed_ok inspect_bmv2 "$1" "$2" BMv2 &&
        record_agrees "$1" behavioral-model PI "${PI_SUBMODULES[@]}"
}
p4c_ok() {
    installed_ok inspect_p4c "$PREFIX" &&
        record_agrees "$PREFIX" p4c abseil-cpp protobuf bdwgc p4runtime
}
finished() {  # finished STEP KEY
    BUILT+=("$1")
    [[ $MODE == dry-run ]] && return
    mkdir -p "$BUILD/stamps"
    printf '%s\n' "$2" > "$(stamp_of "$1" "$2")"
    say "$1: done in $(duration $((SECONDS - STEP_START)))"
}
# ldconfig only where the dynamic linker looks anyway; elsewhere the rpaths find the libraries.
refresh_ld_cache() {
    if (( EUID == 0 )) && [[ ${1%/} == /usr/local || ${1%/} == /usr ]]; then
        run ldconfig
    fi
}
# A private copy of a source tree to configure and build in (autotools build in their tree):
# the source set stays as it is and each BMv2 build has its own objects.
copy_tree() {  # copy_tree FROM TO
    run rm -rf "$2"
    run cp -a "$1" "$2"
    if [[ -f $1/Makefile ]]; then
        run --try -C "$2" make distclean || true
    fi
}

step_apt() {
    STEP=apt
    if (( SKIP_APT )); then
        say "apt: skipped (SKIP_APT=1)"
        return
    fi
    if ! command -v dpkg-query > /dev/null 2>&1; then
        say "apt: not a Debian system: install the build dependencies named in this script yourself"
        return
    fi
    local pkg missing=()
    for pkg in "${APT_PACKAGES[@]}"; do
        [[ $(dpkg-query -W -f='${Status}' "$pkg" 2> /dev/null || true) == "install ok installed" ]] ||
            missing+=("$pkg")
    done
    if (( ${#missing[@]} == 0 )); then
        say "apt: the build dependencies are installed"
        return
    fi
    if [[ $MODE != dry-run ]] && (( EUID != 0 )); then
        die 1 "missing Debian packages: ${missing[*]}; run as root, or: sudo apt-get install ${missing[*]}"
    fi
    say "apt: installing ${missing[*]}"
    run env DEBIAN_FRONTEND=noninteractive apt-get update -q
    run env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}"
}

pi_key() {
    printf 'pi %s' "${PIN_REV[PI]}"
    local sub
    for sub in "${PI_SUBMODULES[@]}"; do printf ' %s' "${PIN_REV[$sub]}"; done
    printf ' prefix=%s' "$PREFIX"
}

step_pi() {
    local key work=$BUILD/pi
    key=$(pi_key)
    needed pi "$key" "$PREFIX/lib/libpi.so" pi_ok || return 0
    copy_tree "$S/PI" "$work"
    run -C "$work" ./autogen.sh
    run -C "$work" ./configure --prefix="$PREFIX" --with-proto --without-internal-rpc \
        --without-cli --without-bmv2
    run -C "$work" make -j"$JOBS"
    run -C "$work" make install
    refresh_ld_cache "$PREFIX"
    finished pi "$key"
}

step_bmv2() {  # step_bmv2 PREFIX FAST: BMv2 with simple_switch_grpc, against PREFIX's PI
    local prefix=$1 fast=$2 flavour=default key work
    (( fast )) && flavour=fast
    local step=bmv2
    [[ $prefix != "$PREFIX" ]] && step=bmv2-beside
    key="bmv2 ${PIN_REV[behavioral-model]} pi=$(pi_key) build=$flavour prefix=$prefix rpath=own"
    # A PI built just now may differ from the one an installed BMv2 was linked against.
    local check=(bmv2_ok "$prefix" "$fast")
    [[ " ${BUILT[*]} " == *" pi "* ]] && check=()
    needed "$step" "$key" "$prefix/bin/simple_switch_grpc" "${check[@]}" || return 0
    say "$step: BMv2's $flavour build into $prefix"
    work=$BUILD/bmv2-$flavour
    copy_tree "$S/behavioral-model" "$work"
    local flags=()
    (( fast )) && flags=("${BMV2_FAST_FLAGS[@]}")
    # Its own lib first: a build beside the default one must load its own libbm* (the
    # dynamic linker takes the first RUNPATH entry that has the library), PI from PREFIX.
    local ldflags="-L$PREFIX/lib -Wl,-rpath,$prefix/lib"
    [[ $prefix != "$PREFIX" ]] && ldflags+=" -Wl,-rpath,$PREFIX/lib"
    run -C "$work" ./autogen.sh
    # Configured in its tree: an out-of-tree build misses bm/config.h for simple_switch_grpc.
    run -C "$work" ./configure --prefix="$prefix" --with-pi --with-thrift --with-nanomsg \
        "${flags[@]}" "CPPFLAGS=-I$PREFIX/include" "LDFLAGS=$ldflags"
    run -C "$work" make -j"$JOBS"
    run -C "$work" make install
    refresh_ld_cache "$prefix"
    finished "$step" "$key"
}

P4C_CMAKE_OPTIONS=(-DCMAKE_BUILD_TYPE=Release -DENABLE_BMV2=ON -DENABLE_EBPF=OFF -DENABLE_UBPF=OFF
    -DENABLE_DPDK=OFF -DENABLE_P4TC=OFF -DENABLE_P4FMT=OFF -DENABLE_GTESTS=OFF
    -DENABLE_TOFINO=OFF -DENABLE_P4TEST=OFF -DENABLE_P4C_GRAPHS=OFF -DENABLE_TEST_TOOLS=OFF
    -DENABLE_DOCS=OFF -DFETCHCONTENT_FULLY_DISCONNECTED=ON)

step_p4c() {
    local key dep
    key="p4c ${PIN_REV[p4c]}"
    for dep in abseil-cpp protobuf bdwgc p4runtime; do key+=" $dep=${PIN_REV[$dep]}"; done
    key+=" prefix=$PREFIX ${P4C_CMAKE_OPTIONS[*]}"
    needed p4c "$key" "$PREFIX/bin/p4c" p4c_ok || return 0
    # Debian 12's GCC 12 libstdc++ calls an erase_if predicate with a const element; this p4c
    # takes it by non-const reference in ir/visitor.cpp. A const reference builds everywhere.
    local visitor=$S/p4c/ir/visitor.cpp
    if grep -qF '[this](flow_join_points_t::value_type &el)' "$visitor" 2> /dev/null; then
        say "p4c: ir/visitor.cpp: the erase_if predicate takes a const element (GCC 12)"
        run sed -i 's/\[this\](flow_join_points_t::value_type &el)/[this](const flow_join_points_t::value_type \&el)/' \
            "$visitor"
    fi
    run cmake -S "$S/p4c" -B "$BUILD/p4c" -DCMAKE_INSTALL_PREFIX="$PREFIX" \
        "${P4C_CMAKE_OPTIONS[@]}" \
        -DFETCHCONTENT_SOURCE_DIR_ABSEIL="$S/abseil-cpp" \
        -DFETCHCONTENT_SOURCE_DIR_PROTOBUF="$S/protobuf" \
        -DFETCHCONTENT_SOURCE_DIR_BDWGC="$S/bdwgc" \
        -DFETCHCONTENT_SOURCE_DIR_P4RUNTIME="$S/p4runtime"
    run cmake --build "$BUILD/p4c" -j"$JOBS"
    run cmake --install "$BUILD/p4c"
    finished p4c "$key"
}

write_manifest() {  # the pins each prefix was installed from, read by --check
    local prefix file name
    for prefix in "$PREFIX" ${BMV2_FAST_PREFIX:+"$BMV2_FAST_PREFIX"}; do
        file=$prefix/$MANIFEST_REL
        if [[ $MODE == dry-run ]]; then
            printf '    + record the pins in %s\n' "$file"
            continue
        fi
        mkdir -p "$(dirname "$file")"
        {
            printf '# Installed by scripts/install-p4-toolchain.sh on %s from %s\n' \
                "$(date -Is)" "${SRC:-the repositories below}"
            for name in "${PIN_NAMES[@]}"; do
                printf '%s %s %s %s\n' "$name" "${PIN_URL[$name]}" "${PIN_REV[$name]}" \
                    "${PIN_VER[$name]}"
            done
        } > "$file"
    done
}

# --- the install ----------------------------------------------------------------------------
writable_dir() {  # writable_dir VAR
    local dir=${!1}
    if [[ -d $dir ]]; then
        [[ -w $dir ]] || die 1 "$1=$dir is not writable: run as root, or set $1 to a directory of yours"
    else
        mkdir -p "$dir" 2> /dev/null ||
            die 1 "$1=$dir cannot be created: run as root, or set $1 to a directory of yours"
    fi
}

if [[ -n $SRC ]]; then
    S=$SRC
    check_sources "$S"
else
    S=$BUILD/src
fi

if [[ $MODE == install ]]; then
    writable_dir BUILD
    writable_dir PREFIX
    [[ -n $BMV2_FAST_PREFIX ]] && writable_dir BMV2_FAST_PREFIX
    mkdir -p "$(dirname "$LOG")"
    : >> "$LOG" || die 1 "LOG=$LOG: cannot write there"
    exec 9> "$BUILD/.lock"
    flock -n 9 || die 1 "another install is running with BUILD=$BUILD (it holds $BUILD/.lock)"
    LOG_OPEN=1
    printf '\n==== %s %s (nice %s)\n' "$(date -Is)" "$(shown "$SCRIPT" "${ARGS[@]}")" "$(nice)" \
        >> "$LOG"
    say "log: $LOG (a full build takes 60-90 minutes on 2 cores; steps already done are skipped)"
else
    say "dry run: nothing is changed"
fi
say "sources: ${SRC:-fetched into $S}; PREFIX=$PREFIX; BMv2: $BMV2_FLAVOUR build${BMV2_FAST_PREFIX:+, and the fast build in $BMV2_FAST_PREFIX}; JOBS=$JOBS"

START=$SECONDS
step_apt
if [[ -z $SRC ]]; then
    STEP=fetch
    STEP_START=$SECONDS
    if [[ $MODE == install ]]; then mkdir -p "$S"; fi
    fetch_sources "$S"
    [[ $MODE == dry-run ]] || check_sources "$S"
fi
step_pi
step_bmv2 "$PREFIX" "$BMV2_FAST"
[[ -n $BMV2_FAST_PREFIX ]] && step_bmv2 "$BMV2_FAST_PREFIX" 1
step_p4c
write_manifest

if [[ $MODE == dry-run ]]; then
    say "dry run: would build: ${BUILT[*]:-nothing}"
    exit 0
fi
say "built: ${BUILT[*]:-nothing} in $(duration $((SECONDS - START))); log: $LOG"
if report=$(inspect_installed); then
    printf '%s\n' "$report" | tee -a "$LOG"
    beside=""
    [[ -z $BMV2_FAST_PREFIX ]] || beside=", the BMv2 performance build in $BMV2_FAST_PREFIX"
    say "toolchain ready: p4c, PI and the BMv2 $BMV2_FLAVOUR build in $PREFIX$beside"
    exit 0
fi
printf '%s\n' "$report" | tee -a "$LOG"
die 1 "the installed programs do not match the pins (see above)"
