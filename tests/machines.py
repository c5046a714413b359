"""Namespaced "machines" for the cluster tests: each is a network namespace running its own
sshd on an address inside the namespaces created here, plus one master namespace (where
Mininet's cluster code and the controller run) joined to them by a bridge. Nothing is
addressed or routed in the root namespace.

``with machines(2) as lab: lab.run_in_master([...])`` creates ``<tag>m`` (the master, bridge
``<tag>br`` with 10.231.N.1/24), ``<tag>a``, ``<tag>b`` ... (each with ``eth0`` at
10.231.N.11, .12 ...), a key pair, an ssh client config and one sshd per machine, waits until
every sshd answers, and on exit stops the sshds (by pid), kills whatever still runs in the
namespaces (by namespace, not by name) and deletes them, also after a failure.

``python -m tests.machines TAG COUNT DIR`` makes them for hands-on work and removes them when
its standard input closes (run it inside ``flock`` on the machine lock).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SSHD = "/usr/sbin/sshd"
SSH_PORT = 22
READY_TIMEOUT_S = 20.0


def run(argv: Sequence[str], timeout: float = 30.0) -> str:
    """Runs ``argv``; raises RuntimeError with its message on failure."""
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)}: {(proc.stderr or proc.stdout).strip()}")
    return proc.stdout


def in_ns(ns: str, argv: Sequence[str]) -> list[str]:
    """``argv`` run inside namespace ``ns``."""
    return ["ip", "netns", "exec", ns, *argv]


@dataclass
class Machines:
    """The master namespace, the machines' namespaces and addresses, and the ssh files."""

    tag: str
    subnet: int
    workdir: Path
    count: int
    master: str = ""
    names: list[str] = field(default_factory=list)  # the machines' namespaces
    addresses: list[str] = field(default_factory=list)
    sshd: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def key(self) -> Path:
        return self.workdir / "id_ed25519"

    @property
    def ssh_config(self) -> Path:
        """The ssh client config every ssh of a cluster run is given (``ssh -F``)."""
        return self.workdir / "ssh_config"

    @property
    def master_address(self) -> str:
        return f"10.231.{self.subnet}.1"

    def create(self) -> None:
        """The namespaces, the bridge and links, the keys and the sshds (ready). Namespaces
        of these names left by a killed earlier run (the machine lock is held: nobody else
        uses them now) are removed first, with what still runs in them."""
        self.master = f"{self.tag}m"
        for ns in [self.master] + [f"{self.tag}{chr(ord('a') + i)}" for i in range(self.count)]:
            _remove_stale(ns)
        run(["ip", "netns", "add", self.master])
        bridge = f"{self.tag}br"
        run(["ip", "-n", self.master, "link", "add", bridge, "type", "bridge"])
        run(["ip", "-n", self.master, "addr", "add", f"{self.master_address}/24", "dev", bridge])
        for dev in ("lo", bridge):
            run(["ip", "-n", self.master, "link", "set", dev, "up"])
        for i in range(self.count):
            ns = f"{self.tag}{chr(ord('a') + i)}"
            addr = f"10.231.{self.subnet}.{11 + i}"
            run(["ip", "netns", "add", ns])
            self.names.append(ns)
            self.addresses.append(addr)
            port = f"{ns}v"
            run(["ip", "-n", self.master, "link", "add", port, "type", "veth", "peer", "name",
                 "eth0", "netns", ns])
            run(["ip", "-n", self.master, "link", "set", port, "master", bridge, "up"])
            run(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0"])
            for dev in ("lo", "eth0"):
                run(["ip", "-n", ns, "link", "set", dev, "up"])
        self._keys()
        for ns, addr in zip(self.names, self.addresses, strict=True):
            self._start_sshd(ns, addr)
        self.wait_ready()

    def _keys(self) -> None:
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key)])
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
             str(self.workdir / "host_ed25519")])
        (self.workdir / "authorized_keys").write_text(
            (self.workdir / "id_ed25519.pub").read_text())
        (self.workdir / "authorized_keys").chmod(0o600)
        self.ssh_config.write_text(
            "Host *\n"
            f"  IdentityFile {self.key}\n"
            "  IdentitiesOnly yes\n"
            "  UserKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking no\n"
            "  LogLevel ERROR\n"
            "  ConnectTimeout 10\n"
            f"  ControlPath {self.workdir}/cm-%r@%h:%p\n"
            "  ControlMaster auto\n"
            "  ControlPersist no\n"
        )

    def _start_sshd(self, ns: str, addr: str) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
        log = (self.workdir / f"sshd-{ns}.log").open("ab")
        opts = {
            "ListenAddress": f"{addr}:{SSH_PORT}", "HostKey": str(self.workdir / "host_ed25519"),
            "AuthorizedKeysFile": str(self.workdir / "authorized_keys"),
            "PidFile": "none", "PermitRootLogin": "prohibit-password",
            "PasswordAuthentication": "no", "KbdInteractiveAuthentication": "no",
            "UsePAM": "no", "PermitTunnel": "yes", "UseDNS": "no", "StrictModes": "no",
            "MaxSessions": "200", "MaxStartups": "200", "AcceptEnv": "none",
        }
        argv = [SSHD, "-D", "-e", "-f", "/dev/null"]
        for key, value in opts.items():
            argv += ["-o", f"{key}={value}"]
        self.sshd[ns] = subprocess.Popen(in_ns(ns, argv), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, start_new_session=True)
        log.close()

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Until every sshd answers a login (``ssh ... true``) from the master."""
        deadline = time.monotonic() + timeout
        for ns, addr in zip(self.names, self.addresses, strict=True):
            while True:
                proc = self.sshd[ns]
                if proc.poll() is not None:
                    tail = (self.workdir / f"sshd-{ns}.log").read_text()[-2000:]
                    raise RuntimeError(f"sshd in {ns} exited ({proc.returncode}): {tail}")
                res = subprocess.run(in_ns(self.master, ["ssh", "-F", str(self.ssh_config),
                                                         "-o", "ControlMaster=no",
                                                         "-o", "BatchMode=yes", addr, "true"]),
                                     capture_output=True, text=True, timeout=30)
                if res.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"sshd in {ns} at {addr} not answering: {res.stderr}")
                time.sleep(0.1)

    def run_in_master(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Starts ``argv`` in the master namespace (``kwargs``: Popen's)."""
        proc: subprocess.Popen[Any] = subprocess.Popen(in_ns(self.master, argv), **kwargs)
        return proc

    def namespace_pids(self) -> dict[str, list[int]]:
        """{namespace: pids of processes in it} for the master and the machines."""
        out = {}
        for ns in [self.master, *self.names]:
            if not ns:
                continue
            res = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                                 timeout=30)
            out[ns] = [int(p) for p in res.stdout.split()]
        return out

    def remote_processes(self) -> list[int]:
        """Everything the machines run besides their sshds: processes in their namespaces
        or started under their sshds, and every process in a namespace one of those is in
        (the hosts' namespaces, whose workloads outlive their ssh session), never the root
        namespace's."""
        table = _process_table()
        root_ns = _netns(os.getpid())
        mine = {_named_netns(ns) for ns in [self.master, *self.names] if ns}
        listeners: set[int] = set()
        for proc in self.sshd.values():
            listeners.update(p for p, (ppid, _ns, _exe) in table.items() if ppid == proc.pid)
        seeds = {p for p, (_ppid, ns, _exe) in table.items() if ns in mine}
        seeds |= _descendants(table, listeners)
        spaces = {table[p][1] for p in seeds if p in table} - {root_ns, None}
        found = {p for p, (_ppid, ns, _exe) in table.items() if ns in spaces} | seeds
        sshd_pids = {proc.pid for proc in self.sshd.values()}
        return sorted(p for p in found if p not in sshd_pids and p in table
                      and not table[p][2].endswith("sshd") and p != os.getpid())

    def wait_idle(self, timeout: float = 10.0) -> list[int]:
        """:meth:`remote_processes` once it is empty, or what is still there at the deadline
        (a shared ssh connection ends just after its last session)."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.remote_processes()
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.1)

    def interfaces(self) -> dict[str, list[str]]:
        """{machine namespace: interfaces besides lo and eth0} (a run's leftovers)."""
        out = {}
        for ns in self.names:
            text = run(["ip", "-n", ns, "-o", "link", "show"])
            names = [line.split(":")[1].strip().split("@")[0] for line in text.splitlines()]
            out[ns] = [n for n in names if n not in ("lo", "eth0")]
        return out

    def destroy(self) -> None:
        """Stops the sshds, kills what is left in the namespaces, deletes them."""
        left = self.remote_processes()
        _kill_all(left)
        if left:
            print(f"machines: killed {len(left)} process(es) the run left", file=sys.stderr)
        for proc in self.sshd.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.sshd.values():
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for ns, pids in self.namespace_pids().items():
            _kill_all(pids)
            if pids:
                print(f"machines: killed {len(pids)} process(es) left in {ns}", file=sys.stderr)
        for ns in [*self.names, self.master]:
            if ns:
                subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def _kill_all(pids: Iterable[int]) -> None:
    """SIGKILL every pid (those already gone are skipped)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _remove_stale(ns: str) -> None:
    if not Path(f"/run/netns/{ns}").exists():
        return
    res = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=30)
    for pid in res.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
    print(f"machines: removed namespace {ns} left by an earlier run", file=sys.stderr)


def _netns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _named_netns(name: str) -> str | None:
    """``net:[INODE]`` of a named namespace (as /proc/PID/ns/net reads), None when gone."""
    try:
        return f"net:[{os.stat(f'/run/netns/{name}').st_ino}]"
    except OSError:
        return None


def _process_table() -> dict[int, tuple[int, str | None, str]]:
    """{pid: (parent pid, network namespace, executable name)} of every process."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        out[int(entry.name)] = (ppid, _netns(int(entry.name)), name)
    return out


def _descendants(table: dict[int, tuple[int, str | None, str]], roots: set[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _ns, _exe) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.add(pid)
        todo.extend(children.get(pid, []))
    return out


def _subnet(tag: str) -> int:
    return 100 + sum(tag.encode()) % 100


@contextmanager
def machines(count: int, tag: str | None = None) -> Iterator[Machines]:
    """``count`` namespaced machines and a master namespace; always removed on exit."""
    tag = tag or f"cl{os.getpid() % 1000:03d}"
    with tempfile.TemporaryDirectory(prefix=f"{tag}-") as tmp:
        lab = Machines(tag, _subnet(tag), Path(tmp), count)
        try:
            lab.create()
            yield lab
        finally:
            lab.destroy()


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """``TAG COUNT DIR``: create, print the addresses, keep until stdin closes."""
    parser = argparse.ArgumentParser(prog="python -m tests.machines")
    parser.add_argument("tag")
    parser.add_argument("count", type=int)
    parser.add_argument("workdir", type=Path)
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    lab = Machines(args.tag, _subnet(args.tag), args.workdir.resolve(), args.count)
    try:
        lab.create()
        print(f"master {lab.master} {lab.master_address}; machines "
              + " ".join(f"{n}={a}" for n, a in zip(lab.names, lab.addresses, strict=True))
              + f"; ssh -F {lab.ssh_config}", flush=True)
        sys.stdin.read()
    finally:
        lab.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
