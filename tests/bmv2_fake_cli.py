"""A stand-in for BMv2's ``simple_switch_CLI``, for testing the controller's Thrift fallback
where BMv2 is not installed.

It speaks the same dialogue as the real CLI on a pipe: a banner, then the prompt
``RuntimeCmd: `` before every command read from stdin, and ``register_read`` /
``register_write`` answered in the real CLI's formats (``NAME[I]= V``, ``NAME= V, V, ...``,
``Error: Invalid register name (NAME)``, ``Invalid register operation (INVALID_INDEX)``).
Registers live in the JSON file named by ``$FAKE_BMV2_STATE`` (``{"ports": [thrift ports
that answer], "registers": {name: [cells]}}``); a port not listed behaves like a switch that is
not running. :func:`install` writes an executable ``simple_switch_CLI`` that runs this file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

STATE_ENV = "FAKE_BMV2_STATE"


def install(bindir: Path) -> Path:
    """Writes ``bindir/simple_switch_CLI`` (runs this module with the current Python)."""
    bindir.mkdir(parents=True, exist_ok=True)
    exe = bindir / "simple_switch_CLI"
    exe.write_text(f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = {str(exe)!r}\n"
                   f"runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')\n")
    exe.chmod(0o755)
    return exe


def _port(argv: list[str]) -> int:
    if "--thrift-port" in argv:
        return int(argv[argv.index("--thrift-port") + 1])
    return 9090


def main(argv: list[str]) -> int:
    path = Path(os.environ[STATE_ENV])
    state = json.loads(path.read_text())
    port = _port(argv)
    if port not in state["ports"]:
        print(f"Could not connect to thrift client on port {port}")
        print("Make sure the switch is running and that you have the right port")
        return 1
    regs: dict[str, list[int]] = state["registers"]
    print("Obtaining JSON from switch...\nDone")
    print("Control utility for runtime P4 table manipulation")
    while True:
        sys.stdout.write("RuntimeCmd: ")
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            print()
            break
        words = line.split()
        if not words:
            continue
        verb, args = words[0], words[1:]
        if verb not in ("register_read", "register_write"):
            print(f"*** Unknown syntax: {line.strip()}")
            continue
        name = args[0] if args else ""
        if name not in regs:
            print(f"Error: Invalid register name ({name})")
            continue
        cells = regs[name]
        index = int(args[1]) if len(args) > 1 else None
        if index is not None and not 0 <= index < len(cells):
            print("Invalid register operation (INVALID_INDEX)")
            continue
        if verb == "register_read":
            if index is None:
                sys.stderr.write("register index omitted, reading entire array\n")
                print(f"{name}=", ", ".join(str(c) for c in cells))
            else:
                print(f"{name}[{index}]=", cells[index])
        else:
            cells[index] = int(args[2])  # type: ignore[index]
            path.write_text(json.dumps(state))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
