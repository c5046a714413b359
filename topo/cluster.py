"""One topology across several machines, with Mininet's cluster edition.

``start_network(topo, target, cluster=ClusterSpec(("10.0.0.11", "10.0.0.12")))`` places every
node on a server (:func:`place`: a leaf switch and its hosts together, so an aggregation
tree's first level stays on one machine; the topology file's ``server`` keys win), and builds
the network from Mininet's cluster classes (``mininet.examples.cluster``):

* hosts and switches are ``RemoteMixin`` nodes: their shells (and every ``popen``) run on
  their server through ``ssh`` and ``sudo``; a switch process is started there too, logging
  into the run directory's path on that server;
* a switch on another server listens for P4Runtime on that server's address, which
  ``topology.json`` records, so the controller reaches every switch from here;
* a link inside one server is a veth pair made there; a link between servers is Mininet's
  ``RemoteLink`` tunnel: a tap device at each end joined by ``ssh -o Tunnel=Ethernet``
  (sshd needs ``PermitTunnel yes``), shaped by htb like every other link.

Every ``ssh`` gets :attr:`ClusterSpec.ssh_options` (``-F FILE`` for a test's keys), and the
same project checkout must exist at the same path on every server (docs/scale.md).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import select
import shlex
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mininet.examples.cluster import RemoteLink, RemoteMixin, findUser
from mininet.util import decode

from topo.errors import NetworkError, SwitchStartError, TopologyError
from topo.forkserver import ProcessHandle
from topo.links import AckFirstIntf, tclink_params
from topo.nodes import BMv2Switch, P4Switch, SoftSwitch, TestbedHost
from topo.topologies import TestbedTopo
from vtime import REAL_TIME, VirtualClock

log = logging.getLogger(__name__)

LOCALHOST = "localhost"
SSH_TIMEOUT_S = 30.0
TUNNEL_TIMEOUT_S = 20.0
#: The tap device Mininet's ssh tunnels are made on before they are renamed.
TUNNEL_TAP = 9
#: This checkout: the same path on every server.
REPO_ROOT = Path(__file__).resolve().parent.parent


class ClusterError(NetworkError):
    """A server that cannot be reached or used, or a tunnel that did not come up."""


@dataclass(frozen=True)
class ClusterSpec:
    """Where a run's nodes go: ``servers`` (names or addresses; ``localhost`` is this
    machine), ``placement`` overrides {node: server} (a topology file's ``server`` keys),
    the ssh ``user`` (default: the invoking user) and extra options of every ssh command
    (``("-F", "/path/ssh_config")``)."""

    servers: tuple[str, ...]
    placement: Mapping[str, str] = field(default_factory=dict)
    user: str | None = None
    ssh_options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.servers:
            raise TopologyError("servers: give at least one server")
        if len(set(self.servers)) != len(self.servers):
            raise TopologyError(f"servers: {','.join(self.servers)} names one twice")
        for node, server in self.placement.items():
            if server not in self.servers:
                raise TopologyError(f"node {node}: server {server!r} is not one of "
                                    f"{', '.join(self.servers)}")

    @classmethod
    def parse(cls, servers: str, ssh_config: str | Path | None = None,
              placement: Mapping[str, str] | None = None) -> ClusterSpec:
        """From ``make run servers=A,B`` and an optional ssh client config file."""
        names = tuple(s.strip() for s in servers.split(",") if s.strip())
        options = ("-F", str(Path(ssh_config).resolve())) if ssh_config else ()
        return cls(names, dict(placement or {}), ssh_options=options)

    @classmethod
    def for_file(cls, servers: str, wanted: Mapping[str, int | str],
                 ssh_config: str | Path | None = None) -> ClusterSpec:
        """:meth:`parse`, with a topology file's ``server`` keys (:func:`file_placement`)."""
        spec = cls.parse(servers, ssh_config)
        return cls.parse(servers, ssh_config, file_placement(wanted, spec.servers))


# ----------------------------------------------------------------------------- placement


def file_placement(wanted: Mapping[str, int | str], servers: Sequence[str]) -> dict[str, str]:
    """{node: server} from a topology file's ``server`` keys: an index into ``servers``
    (so one file serves any machines) or one of their names."""
    out = {}
    for node, where in wanted.items():
        if isinstance(where, int) and not isinstance(where, bool):
            if not 0 <= where < len(servers):
                raise TopologyError(f"node {node}: server {where}: there are only "
                                    f"{len(servers)} servers ({', '.join(servers)})")
            out[node] = servers[where]
        elif where in servers:
            out[node] = str(where)
        else:
            raise TopologyError(f"node {node}: server {where!r} is not one of "
                                f"{', '.join(servers)} (nor an index into them)")
    return out



def place(topo: TestbedTopo, servers: Sequence[str],
          fixed: Mapping[str, str] | None = None) -> dict[str, str]:
    """{node: server}. Why this rule: the in-network all-reduce's first level is a leaf and
    its hosts, so each leaf goes with its hosts onto one server (the least loaded, counting
    nodes); switches without hosts (spines) spread over the servers in turn, so that only
    fabric links cross machines. ``fixed`` nodes keep their server; a host placed by hand
    pulls nothing with it."""
    fixed = dict(fixed or {})
    unknown = sorted(set(fixed) - set(topo.nodes()))
    if unknown:
        raise TopologyError(f"placement names unknown node(s): {', '.join(unknown)}")
    out = dict(fixed)
    load = {s: 0 for s in servers}
    for server in out.values():
        load[server] += 1
    hosts_of = _hosts_of(topo)
    leaves = sorted(hosts_of, key=lambda s: (-len(hosts_of[s]), s))
    for sw in leaves:
        group = [n for n in [sw, *hosts_of[sw]] if n not in out]
        if not group:
            continue
        server = out.get(sw) or min(servers, key=lambda s: (load[s], servers.index(s)))
        for node in group:
            out[node] = server
            load[server] += 1
    for node in sorted(topo.nodes()):
        if node not in out:  # spines and isolated nodes: the least loaded server
            server = min(servers, key=lambda s: (load[s], servers.index(s)))
            out[node] = server
            load[server] += 1
    return out


def _hosts_of(topo: TestbedTopo) -> dict[str, list[str]]:
    """{switch: the hosts linked to it}, for the switches that have hosts (the leaves)."""
    hosts_of: dict[str, list[str]] = {}
    for a, b in topo.links(sort=True):
        for sw, host in ((a, b), (b, a)):
            if topo.isSwitch(sw) and not topo.isSwitch(host):
                hosts_of.setdefault(sw, []).append(host)
    return hosts_of


def crossing_links(topo: TestbedTopo, placement: Mapping[str, str]
                   ) -> list[tuple[str, str, str, str]]:
    """(node1, node2, server1, server2) of every link whose ends are on different servers."""
    out = []
    for a, b in topo.links(sort=True):
        if placement[a] != placement[b]:
            out.append((a, b, placement[a], placement[b]))
    return out


def server_address(server: str) -> str:
    """The IPv4 address ``server`` is reached at (an address stays itself)."""
    if server == LOCALHOST:
        return "127.0.0.1"
    ip = RemoteMixin.findServerIP(server)
    if not ip:
        raise ClusterError(f"server {server!r}: no IPv4 address (getent ahostsv4)")
    return str(ip)


def apply_placement(topo: TestbedTopo, placement: Mapping[str, str],
                    addresses: Mapping[str, str]) -> None:
    """Writes ``server``/``serverIP`` into every node's options (what Mininet's cluster
    nodes read) and makes a switch on another server listen for P4Runtime on that server's
    address, so that ``topology.json`` tells the controller where it is."""
    for node, server in placement.items():
        info = topo.nodeInfo(node)
        info["server"] = server
        info["serverIP"] = addresses[server]
        if topo.isSwitch(node) and server != LOCALHOST:
            info["grpc_host"] = addresses[server]
        topo.setNodeInfo(node, info)


# ----------------------------------------------------------------------------- ssh


def ssh_argv(spec: ClusterSpec, address: str, *, tty: bool = False) -> list[str]:
    """``ssh [-tt] OPTIONS user@address`` (a remote command follows, as one quoted string)."""
    user = spec.user or findUser()
    argv = ["ssh", "-q", "-o", "BatchMode=yes", *spec.ssh_options]
    if tty:
        argv.append("-tt")
    return [*argv, f"{user}@{address}"]


def precheck(spec: ClusterSpec, addresses: Mapping[str, str]) -> None:
    """Every remote server answers ``ssh ... sudo -n true`` (what MininetCluster's own
    precheck asks), else a ClusterError naming the server and ssh's message."""
    for server in spec.servers:
        if server == LOCALHOST:
            continue
        argv = [*ssh_argv(spec, addresses[server]), "-n", "sudo -n true"]
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=SSH_TIMEOUT_S,
                                 check=False)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"server {server}: ssh did not answer within "
                               f"{SSH_TIMEOUT_S:g} s ({shlex.join(argv)})") from None
        if res.returncode != 0:
            raise ClusterError(f"server {server}: `{shlex.join(argv)}` failed "
                               f"({res.returncode}): {(res.stderr or res.stdout).strip()}")


# ----------------------------------------------------------------------------- nodes


#: The prefix that gives a node's process SIGHUP's default action back. Mininet stops a
#: remote node with SIGHUP to its local ssh client's process group; a run started under
#: ``nohup`` hands every child SIGHUP ignored, ssh then never exits, and the run hung in its
#: teardown waiting for it (a fresh-clone ``make test`` started with nohup: the cluster run
#: timed out after 180 s and left its remote host shells).
SIGHUP_DEFAULT = ("env", "--default-signal=HUP")


class _ForkSafePopen:
    """Starts a node's processes in their own process group without Python code between
    fork and exec: RemoteMixin's ``preexec_fn=os.setpgrp`` crashed a child of the gRPC
    controller's process ("Mutex::Fer with pending CondVar", Fatal Python error); and with
    SIGHUP's default action (:data:`SIGHUP_DEFAULT`), which Mininet stops them with."""

    def _popen(self, cmd: Any, **params: Any) -> Any:
        if params.get("preexec_fn") is RemoteMixin._ignoreSignal:
            del params["preexec_fn"]
            params["process_group"] = 0
            cmd = [*SIGHUP_DEFAULT, *cmd]  # RemoteMixin._popen made it a list
        return super()._popen(cmd, **params)  # type: ignore[misc]


class ClusterNodeMixin(RemoteMixin, _ForkSafePopen):
    """Mininet's ``RemoteMixin`` with the run's ssh options on every ssh command; every
    remote command line is quoted (ssh hands the remote shell one string)."""

    def __init__(self, name: str, ssh_options: Sequence[str] = (), **params: Any) -> None:
        self.ssh_options = tuple(ssh_options)
        super().__init__(name, **params)

    @property
    def sshbase(self) -> list[str]:  # read by RemoteMixin.__init__
        return ["ssh", "-q", "-o", "BatchMode=yes", *self.ssh_options, "-tt"]

    def _popen(self, cmd: Any, sudo: bool = True, tt: bool = True, **params: Any) -> Any:
        if self.isRemote:
            cmd = [shlex.quote(str(c)) for c in (cmd.split() if isinstance(cmd, str) else cmd)]
        return super()._popen(cmd, sudo=sudo, tt=tt, **params)

    def popen(self, *args: Any, **kwargs: Any) -> Any:
        """Mininet's popen; on another server the working directory (``cwd``) is set there
        too (``env -C``), as the same checkout lives at the same path."""
        cwd = kwargs.get("cwd")
        if self.isRemote and cwd is not None and len(args) == 1 and isinstance(args[0], list):
            args = (["env", "-C", str(cwd), *args[0]],)
        return super().popen(*args, **kwargs)

    def remote_argv(self, command: str, *, tty: bool = False) -> list[str]:
        """``ssh ... DEST COMMAND`` to this node's server (``command``: one shell string)."""
        argv = ["ssh", "-q", "-o", "BatchMode=yes", *self.ssh_options]
        if tty:
            argv.append("-tt")
        return [*argv, self.dest, command]

    def stop_namespace_processes(self) -> None:
        """Kills every process left in this node's network namespace on its server (the
        host's workloads, started through ssh, outlive a killed local ssh client)."""
        if not self.isRemote or not self.inNamespace or self.pid is None:
            return
        shell = int(self.pid)  # the node's own shell stays: Mininet stops it (and its links)
        script = (f'for p in $(pgrep --ns {shell} --nslist net); do '
                  f'[ "$p" = {shell} ] || kill -KILL "$p" 2>/dev/null; done; true')
        cmd = shlex.join(["sudo", "-n", "sh", "-c", script])
        try:
            subprocess.run(self.remote_argv(cmd), capture_output=True, timeout=SSH_TIMEOUT_S,
                           check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("%s: could not stop its processes on %s: %s", self.name, self.server, exc)


class ClusterHost(ClusterNodeMixin, TestbedHost):
    """A worker host on its server."""


class RemoteProcessMixin(ClusterNodeMixin):
    """A :class:`~topo.nodes.ProcessNode` whose process runs on its server: started through
    ``ssh -tt`` (the local ssh client is the handle: it exits when the process does), the
    process's pid there read from its first line, signals sent there by ssh."""

    remote_pid: int | None = None
    proc: ProcessHandle | None  # the local ssh client (ProcessNode's handle)

    def launch(self, argv: Sequence[str], kind: str) -> None:
        if not self.isRemote:
            super().launch(argv, kind)
            return
        logfile = self.log_file
        # $0: the log file, $1: the checkout (the switch imports this project from there)
        script = ('log=$0; cd "$1" || exit 1; shift; mkdir -p "$(dirname "$log")"; '
                  'echo "pid $$"; printf "# %s\\n" "$*" >>"$log"; '
                  'exec "$@" >>"$log" 2>&1 </dev/null')
        command = shlex.join(["sudo", "-n", "-E", "sh", "-c", script, str(logfile),
                              str(REPO_ROOT), *argv])
        log.info("starting %s on %s: %s", self.name, self.server, shlex.join(argv))
        proc = subprocess.Popen(
            self.remote_argv(command, tty=True), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self.proc = proc
        line = _read_line(proc, SSH_TIMEOUT_S)
        if not line.startswith("pid "):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            rest = decode(proc.stdout.read() or b"") if proc.stdout is not None else ""
            raise SwitchStartError(f"{self.what} {self.name} did not start on "
                                   f"{self.server}: {line} {rest}".strip())
        self.remote_pid = int(line.split()[1])
        if self.rundir is not None:
            self.rundir.record_process(self.name, kind, proc.pid, proc.pid)

    def cpu_seconds(self) -> float | None:
        """User+system CPU seconds of the process on its server (None when it is gone or
        unreadable): the local handle is an ssh client, whose CPU says nothing."""
        if not self.isRemote or self.remote_pid is None:
            return None
        cmd = f"getconf CLK_TCK; cat /proc/{int(self.remote_pid)}/stat"
        try:
            res = subprocess.run(self.remote_argv(cmd), capture_output=True, text=True,
                                 timeout=SSH_TIMEOUT_S, check=False)
            hz, stat = res.stdout.split("\n", 1)
            fields = stat.rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / int(hz)
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
            return None

    def _signal_group(self, sig: int) -> None:
        if not self.isRemote or self.remote_pid is None:
            super()._signal_group(sig)
            return
        if self.proc is not None and self.proc.poll() is None:
            cmd = f"sudo -n kill -{int(sig)} {self.remote_pid}"
            try:
                subprocess.run(self.remote_argv(cmd), capture_output=True,
                               timeout=SSH_TIMEOUT_S, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                log.warning("%s: cannot signal its process on %s: %s", self.name,
                            self.server, exc)
        if sig == signal.SIGKILL:
            super()._signal_group(sig)


    def prepare_port(self, intf: str) -> None:
        """IPv6 off on the port, on the node's own server (its shell)."""
        if not self.isRemote:
            super().prepare_port(intf)
            return
        self.cmd(f"sysctl -q -w net.ipv6.conf.{intf}.disable_ipv6=1")


class RemoteSoftSwitch(RemoteProcessMixin, SoftSwitch):
    """The built-in target on its server."""


class RemoteBMv2Switch(RemoteProcessMixin, BMv2Switch):
    """BMv2 on its server."""

    def prepare_port(self, intf: str) -> None:
        """As every remote switch, and the offloads off there (see
        :func:`topo.nodes.pcap_ring_offloads_off` for why)."""
        if not self.isRemote:
            super().prepare_port(intf)
            return
        RemoteProcessMixin.prepare_port(self, intf)
        out = self.cmd(shlex.join(["ethtool", "-K", intf, "tso", "off", "gso", "off",
                                   "gro", "off", "lro", "off"]))
        if "error" in out.lower() or "cannot" in out.lower():
            log.warning("%s: ethtool on %s: %s", intf, self.server, out.strip())


REMOTE_SWITCHES: dict[type[P4Switch], type[P4Switch]] = {
    SoftSwitch: RemoteSoftSwitch, BMv2Switch: RemoteBMv2Switch}


def remote_switch_class(switch_cls: type[P4Switch]) -> type[P4Switch]:
    """The cluster variant of a switch class (TargetError-like message when there is none)."""
    for base, remote in REMOTE_SWITCHES.items():
        if issubclass(switch_cls, base):
            return remote
    raise ClusterError(f"target {switch_cls.target}: no cluster variant")


# ----------------------------------------------------------------------------- links


class ClusterLink(RemoteLink):
    """A shaped link (:class:`topo.links.ShapedLink`'s interfaces and options) that is a
    veth pair inside one server and Mininet's ssh tunnel between two."""

    def __init__(self, node1: Any, node2: Any, netem: bool = True,
                 clock: VirtualClock = REAL_TIME, ssh_options: Sequence[str] = (),
                 **params: Any) -> None:
        self.ssh_options = tuple(ssh_options)
        super().__init__(node1, node2, cls1=AckFirstIntf, cls2=AckFirstIntf,
                         **tclink_params(params, netem, clock))

    def makeTunnel(self, node1: Any, node2: Any, intfname1: str, intfname2: str,  # noqa: N802
                   addr1: str | None = None, addr2: str | None = None) -> Any:
        """Mininet's ssh tunnel (tap devices joined by ``ssh -w``), with the run's ssh
        options and a deadline on the tunnel's start."""
        if node2.server == LOCALHOST:
            return self.makeTunnel(node2, node1, intfname2, intfname1, addr2, addr1)
        tap = f"tap{TUNNEL_TAP}"
        for node in (node1, node2):
            out = node.rcmd(f"ip tuntap add dev {tap} mode tap user {node.user}")
            if out.strip():
                raise ClusterError(f"tunnel {intfname1}-{intfname2}: cannot create {tap} "
                                   f"on {node.server}: {out.strip()}")
        # Mininet's 'echo @' alone ends the session (and the tunnel with it) at once with
        # OpenSSH 9: 'exec cat' holds it until our end's stdin closes (its ssh is stopped)
        # its own connection: a shared one (ControlMaster) would open the tap device where
        # that connection's master runs, not on this server
        argv = ["ssh", "-o", "BatchMode=yes", *self.ssh_options, "-o", "ControlPath=none",
                "-o", "Tunnel=Ethernet",
                "-w", f"{TUNNEL_TAP}:{TUNNEL_TAP}", f"{node2.user}@{node2.serverIP}",
                "echo @; exec cat >/dev/null"]
        self.cmd = argv
        tunnel = node1.rpopen(argv, sudo=False)
        if not _wait_for_char(tunnel, "@", TUNNEL_TIMEOUT_S):
            tunnel.kill()
            raise ClusterError(f"tunnel {node1.server}:{intfname1} == {node2.server}:"
                               f"{intfname2} did not come up ({shlex.join(argv)})")
        for node, intf, addr in ((node1, intfname1, addr1), (node2, intfname2, addr2)):
            self.moveIntf(tap, node)
            cmd = f"ip link set {tap} name {intf}" + (f" address {addr}" if addr else "")
            out = node.cmd(cmd)
            if out.strip():
                raise ClusterError(f"tunnel end {intf} on {node.server}: {out.strip()}")
        return tunnel


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The first line ``proc`` prints (stripped), or what it printed by ``timeout``."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    data = b""
    while b"\n" not in data and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 1)
        if not chunk:
            break
        data += chunk
    return decode(data).strip()


def _wait_for_char(proc: subprocess.Popen[bytes], char: str, timeout: float) -> bool:
    """True once ``proc`` printed ``char`` (skipping other output) before ``timeout``."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        data = os.read(fd, 1)
        if not data:
            return False
        if decode(data) == char:
            return True
    return False


# ----------------------------------------------------------------------------- a run


@dataclass(frozen=True)
class ClusterPlan:
    """A placed run: {node: server}, the servers' addresses and the links that cross."""

    spec: ClusterSpec
    placement: dict[str, str]
    addresses: dict[str, str]
    crossing: list[tuple[str, str, str, str]]

    def summary_lines(self) -> list[str]:
        """Which server holds what, and each link that crosses machines."""
        lines = []
        for server in self.spec.servers:
            nodes = sorted(n for n, s in self.placement.items() if s == server)
            lines.append(f"server {server} ({self.addresses[server]}): {' '.join(nodes)}")
        if self.crossing:
            lines.append("links between machines (ssh tunnels): " + ", ".join(
                f"{a}-{b} ({sa}-{sb})" for a, b, sa, sb in self.crossing))
        else:
            lines.append("links between machines: none")
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {"servers": {s: self.addresses[s] for s in self.spec.servers},
                "placement": dict(sorted(self.placement.items())),
                "crossing_links": [list(c) for c in self.crossing],
                # how to run a command on each other server (the live view's counters)
                "ssh": {s: ssh_argv(self.spec, self.addresses[s]) for s in self.spec.servers
                        if s != LOCALHOST}}


def plan(topo: TestbedTopo, spec: ClusterSpec, check: bool = True) -> ClusterPlan:
    """Places ``topo`` on ``spec``'s servers and writes the placement into its node options;
    ``check``: every remote server answers ssh and sudo first."""
    addresses = {s: server_address(s) for s in spec.servers}
    if check:
        precheck(spec, addresses)
    placement = place(topo, spec.servers, spec.placement)
    apply_placement(topo, placement, addresses)
    return ClusterPlan(spec, placement, addresses, crossing_links(topo, placement))


def remove_remote_interfaces(switches: Iterable[Any]) -> list[str]:
    """Deletes each remote switch's ``<name>-eth*`` left on its server (Mininet deletes
    them when its stop went well; this is for when it did not, as ``remove_interfaces``
    does here). Returns ``server:switch`` of those that had some; never raises."""
    left = []
    for sw in switches:
        if not getattr(sw, "isRemote", False):
            continue
        script = (f'n=0; for p in /sys/class/net/{sw.name}-eth*; do [ -e "$p" ] || continue; '
                  'ip link del "${p##*/}" && n=$((n+1)); done; echo $n')
        try:
            res = subprocess.run(sw.remote_argv(shlex.join(["sudo", "-n", "sh", "-c", script])),
                                 capture_output=True, text=True, timeout=SSH_TIMEOUT_S,
                                 check=False)
        except Exception as exc:  # a teardown step: log, go on with the next switch
            log.warning("%s: cannot check its interfaces on %s: %s", sw.name, sw.server, exc)
            continue
        if res.stdout.strip() not in ("", "0"):
            left.append(f"{sw.server}:{sw.name}")
    return left


def stop_remote_processes(nodes: Iterable[Any]) -> None:
    """Kills what remains in every remote host's namespace (before Mininet stops them);
    never raises (a teardown step)."""
    for node in nodes:
        stop = getattr(node, "stop_namespace_processes", None)
        if stop is None:
            continue
        try:
            stop()
        except Exception:
            log.exception("%s: stopping its processes on its server failed", node.name)


@dataclass(frozen=True)
class ClusterClasses:
    """What ``Mininet(...)`` is given for a cluster run."""

    switch: type[P4Switch]
    host: Any
    link: Any


def cluster_classes(spec: ClusterSpec, switch_cls: type[P4Switch], netem: bool,
                    clock: VirtualClock) -> ClusterClasses:
    """The remote switch class of ``switch_cls``, and host and link factories that carry the
    run's ssh options (and user)."""
    node_opts: dict[str, Any] = {"ssh_options": spec.ssh_options}
    if spec.user:
        node_opts["user"] = spec.user
    return ClusterClasses(
        remote_switch_class(switch_cls),
        functools.partial(ClusterHost, **node_opts),
        functools.partial(ClusterLink, netem=netem, clock=clock, ssh_options=spec.ssh_options),
    )


def write_plan(placed: ClusterPlan, rundir: str | Path) -> Path:
    """``<rundir>/cluster.json``: the servers, each node's server, the crossing links."""
    path = Path(rundir) / "cluster.json"
    path.write_text(json.dumps(placed.as_dict(), indent=2) + "\n")
    return path
