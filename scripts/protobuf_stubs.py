"""Type stubs (.pyi) for the P4Runtime and google.rpc protobuf modules, kept in typings/.

The p4runtime package ships generated code but no .proto files and no stubs, so mypy saw every
P4Info message as Any. Each generated module embeds its FileDescriptorProto; this script hands
those descriptors to mypy-protobuf's plugins (protoc-gen-mypy, protoc-gen-mypy_grpc: the same
request protoc would send), so the stubs come from exactly the installed modules, with no protoc
and no .proto files. google.protobuf's own stubs come from the pinned types-protobuf package.

    .venv/bin/python scripts/protobuf_stubs.py           # rewrite typings/
    .venv/bin/python scripts/protobuf_stubs.py --check   # exit 1 if typings/ is out of date
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2
from google.protobuf.descriptor import FileDescriptor

ROOT = Path(__file__).resolve().parent.parent
TYPINGS = ROOT / "typings"

# The modules the project imports; their dependencies are added to the request, and stubs are
# written for these only (google.protobuf's come from types-protobuf).
MODULES = (
    "p4.v1.p4runtime_pb2",
    "p4.v1.p4data_pb2",
    "p4.config.v1.p4info_pb2",
    "p4.config.v1.p4types_pb2",
    "google.rpc.status_pb2",
    "google.rpc.code_pb2",
)
# Modules with services: their gRPC stubs too.
GRPC_MODULES = ("p4.v1.p4runtime_pb2",)
# mypy-protobuf's options: no progress lines on stderr.
PARAMETER = "quiet"


def _with_dependencies(files: list[FileDescriptor]) -> list[FileDescriptor]:
    """Every file and its imports, each after what it imports, as a plugin request requires."""
    ordered: list[FileDescriptor] = []
    seen: set[str] = set()

    def visit(fd: FileDescriptor) -> None:
        if fd.name in seen:
            return
        seen.add(fd.name)
        for dep in fd.dependencies:
            visit(dep)
        ordered.append(fd)

    for fd in files:
        visit(fd)
    return ordered


def _request(modules: tuple[str, ...]) -> plugin_pb2.CodeGeneratorRequest:
    """The CodeGeneratorRequest protoc would send for these modules' .proto files."""
    files = [importlib.import_module(name).DESCRIPTOR for name in modules]
    request = plugin_pb2.CodeGeneratorRequest()
    request.parameter = PARAMETER
    request.file_to_generate.extend(fd.name for fd in files)
    for fd in _with_dependencies(files):
        serialized: bytes = fd.serialized_pb
        request.proto_file.append(descriptor_pb2.FileDescriptorProto.FromString(serialized))
    return request


def _run_plugin(plugin: str, request: plugin_pb2.CodeGeneratorRequest) -> dict[str, str]:
    """Run one protoc plugin from the venv's bin/ on the request: {relative path: content}."""
    exe = Path(sys.executable).parent / plugin
    out = subprocess.run(
        [str(exe)], input=request.SerializeToString(), capture_output=True, check=True
    ).stdout
    response = plugin_pb2.CodeGeneratorResponse()
    response.ParseFromString(out)
    if response.error:
        raise SystemExit(f"{plugin}: {response.error}")
    return {f.name: f.content for f in response.file}


def _package_markers(stubs: dict[str, str]) -> dict[str, str]:
    """An empty __init__.pyi in each stub directory that is a regular package when installed.

    Without them mypy took p4.v1 for a namespace package and, with a cache written while p4
    had no stubs, missed its submodules ("p4.v1 has no attribute p4runtime_pb2"). google/ and
    google/rpc/ are namespace packages when installed, so they get none.
    """
    markers: dict[str, str] = {}
    for name in stubs:
        package = Path(name).parent
        while package != Path("."):
            module = importlib.import_module(".".join(package.parts))
            if getattr(module, "__file__", None) is not None:  # not a namespace package
                markers[str(package / "__init__.pyi")] = ""
            package = package.parent
    return markers


def generate() -> dict[str, str]:
    """All stub files, by path under typings/."""
    stubs = _run_plugin("protoc-gen-mypy", _request(MODULES))
    stubs.update(_run_plugin("protoc-gen-mypy_grpc", _request(GRPC_MODULES)))
    stubs.update(_package_markers(stubs))
    return stubs


def main(argv: list[str] | None = None) -> int:
    """Write the stubs to typings/, or with --check report the ones that differ."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a change")
    parser.add_argument("--out", type=Path, default=TYPINGS, help="directory (default typings/)")
    args = parser.parse_args(argv)
    stubs = generate()
    stale = sorted(
        name for name, text in stubs.items()
        if not (args.out / name).is_file() or (args.out / name).read_text() != text
    )
    # stubs of modules no longer generated
    extra = sorted(str(p.relative_to(args.out)) for p in args.out.rglob("*.pyi")
                   if str(p.relative_to(args.out)) not in stubs)
    if args.check:
        for name in stale + extra:
            print(f"out of date: {args.out / name} (run: make stubs)", file=sys.stderr)
        return 1 if stale or extra else 0
    for name in extra:
        (args.out / name).unlink()
        print(f"removed {args.out / name}")
    for name in stale:
        path = args.out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(stubs[name])
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
