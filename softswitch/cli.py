"""Command line of the built-in target: ``compile``, ``stf``, ``run`` and ``wire``.

``compile`` writes P4Info (text format, as ``p4c --p4runtime-files``) and optionally the
device config that the switch accepts in SetForwardingPipelineConfig; ``stf`` runs a p4c-style
STF test; ``run`` starts the P4Runtime switch (``softswitch.switch``); ``wire`` a delay node
(``softswitch.wire``); ``forkserver`` the process a network forks its switches from
(``softswitch.forkserver``). Every user error is one line on stderr and exit status 1, never a
traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from softswitch.errors import P4Error

log = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="softswitch",
        description="Built-in P4 (v1model) target: compile programs, run STF tests, run the "
        "P4Runtime switch.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    comp = sub.add_parser("compile", help="check a program; write P4Info and device config")
    comp.add_argument("program", type=Path, metavar="PROG.p4")
    comp.add_argument(
        "--p4info", type=Path, metavar="OUT.txtpb", help="write P4Info in protobuf text format here"
    )
    comp.add_argument(
        "--device-config",
        type=Path,
        metavar="OUT",
        help="write the self-contained device config here",
    )
    comp.add_argument(
        "-I",
        dest="include_dirs",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="add DIR to the #include search path",
    )

    stf = sub.add_parser("stf", help="run a p4c-style STF test against a program")
    stf.add_argument("program", type=Path, metavar="PROG.p4")
    stf.add_argument("test", type=Path, metavar="TEST.stf")
    stf.add_argument(
        "-I",
        dest="include_dirs",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="add DIR to the #include search path",
    )
    stf.add_argument(
        "--engine",
        choices=("python", "c"),
        default="python",
        help="packet engine: the Python reference (default) or the compiled C path",
    )

    sub.add_parser(
        "run", help="run the P4Runtime switch (see 'softswitch run --help')", add_help=False
    )
    sub.add_parser(
        "wire", help="run a delay node: a two-port wire that holds frames for a link's delay "
        "(see 'softswitch wire --help')", add_help=False
    )
    sub.add_parser(
        "stats", help="print a running switch's port counters (its --stats-file)", add_help=False
    )
    return parser


def _compile(args: argparse.Namespace) -> int:
    from softswitch.device_config import make_device_config
    from softswitch.frontend import compile_file
    from softswitch.p4info import build_p4info, p4info_to_text

    program = compile_file(str(args.program), [str(d) for d in args.include_dirs])
    if args.p4info is not None:
        text = p4info_to_text(build_p4info(program))
        args.p4info.write_text(text, encoding="utf-8")
        log.info("wrote P4Info to %s", args.p4info)
    if args.device_config is not None:
        args.device_config.write_bytes(make_device_config(args.program, args.include_dirs))
        log.info("wrote device config to %s", args.device_config)
    return 0


def _stf(args: argparse.Namespace) -> int:
    from softswitch.pipeline import Pipeline
    from softswitch.stf import parse_stf

    try:
        stf_text = args.test.read_text(encoding="utf-8")
    except OSError as err:
        print(f"error: cannot read {args.test}: {err.strerror}", file=sys.stderr)
        return 1
    lines = parse_stf(stf_text, str(args.test))
    pipeline = Pipeline.from_file(
        str(args.program), [str(d) for d in args.include_dirs], engine=args.engine
    )
    from softswitch.stf import StfRunner

    result = StfRunner(pipeline).run(lines)
    if not result.passed:
        print(f"FAIL: {result.first_mismatch}", file=sys.stderr)
        for more in result.mismatches[1:]:
            log.info("also: %s", more)
        return 1
    print(f"PASS: {args.test} ({result.packets_sent} packets, {result.expectations} expectations)")
    return 0


def _run_own_parser(argv: list[str]) -> int | None:
    """Runs a command whose process parses its own options (``run``, ``forkserver``, ``wire``,
    ``stats``) and returns its exit status; None when ``argv`` names none of them."""
    run_at = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if run_at is None:
        return None
    if argv[run_at] == "run":
        try:
            from softswitch import switch
        except ImportError as err:
            print(f"error: the P4Runtime switch is not available ({err})", file=sys.stderr)
            return 1
        return int(switch.main(argv[run_at + 1 :]) or 0)
    if argv[run_at] == "forkserver":  # forks switches (the network's)
        from softswitch import forkserver

        return int(forkserver.main(argv[run_at + 1 :]) or 0)
    if argv[run_at] == "wire":  # a delay node parses its own too
        from softswitch import wire

        return int(wire.main(argv[run_at + 1 :]) or 0)
    if argv[run_at] == "stats":
        from softswitch import stats

        return int(stats.main(argv[run_at + 1 :]) or 0)
    return None


def _run_offline(args: argparse.Namespace) -> int:
    """Runs ``compile`` or ``stf``; an error in the program, the test or the installation
    becomes one message on stderr and exit status 1."""
    from softswitch.device_config import DeviceConfigError
    from softswitch.p4info import P4InfoError
    from softswitch.stf import StfError

    try:
        if args.command == "compile":
            return _compile(args)
        return _stf(args)
    except (P4Error, StfError, DeviceConfigError) as err:
        print(str(err), file=sys.stderr)
        return 1
    except P4InfoError as err:
        print(f"{args.program}: error: {err}", file=sys.stderr)
        return 1
    except ImportError as err:
        print(
            f"error: this installation lacks a part of the built-in target ({err})", file=sys.stderr
        )
        return 1
    except OSError as err:
        name = err.filename if err.filename is not None else args.program
        print(f"error: cannot access {name}: {err.strerror}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m softswitch`` and the ``softswitch`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # 'run' belongs to the switch process, which parses its own options
    status = _run_own_parser(argv)
    if status is not None:
        return status
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    return _run_offline(args)
