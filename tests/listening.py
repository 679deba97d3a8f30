"""The TCP ports a process listens on, read from /proc (its socket inodes against /proc/net/tcp and tcp6), so
that a test can check that a server, a balancer or a Ray node listens on loopback only."""
import ipaddress
import os
import pathlib
import socket
import struct

LISTEN = "0A"


def _address(hex_addr):
    """An address of /proc/net/tcp*; an IPv4-mapped IPv6 one (a dual-stack socket's) as its IPv4 address."""
    if len(hex_addr) == 8:
        return str(ipaddress.IPv4Address(socket.ntohl(int(hex_addr, 16))))
    words = struct.unpack("<4I", bytes.fromhex(hex_addr))
    a = ipaddress.IPv6Address(struct.pack(">4I", *words))
    return str(a.ipv4_mapped or a)


def listening(pids):
    """{(address, port)} of the TCP sockets the processes `pids` hold open in state LISTEN."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:  # gone meanwhile
            continue
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in pathlib.Path(table).read_text().splitlines()[1:]:
            f = line.split()
            local, state, inode = f[1], f[3], f[9]
            if state == LISTEN and inode in inodes:
                addr, port = local.split(":")
                out.add((_address(addr), int(port, 16)))
    return out


def descendants(pid):
    """pid and every process below it."""
    children = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                ppid = int(pathlib.Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(p))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def loopback(address):
    a = ipaddress.ip_address(address)
    mapped = getattr(a, "ipv4_mapped", None)  # ::ffff:127.0.0.1, as a dual-stack socket shows it
    return a.is_loopback or bool(mapped and mapped.is_loopback)


def not_loopback(addresses):
    """The (address, port) pairs reachable beyond loopback: on another address, or on the wildcard address
    (0.0.0.0, ::) in a network namespace that has an interface besides loopback (in one holding only `lo`, a
    wildcard socket is reached through loopback alone)."""
    only_lo = interfaces() == ["lo"]
    return {(a, p) for a, p in addresses
            if not loopback(a) and not (only_lo and ipaddress.ip_address(a).is_unspecified)}


def interfaces():
    """The network interfaces of this process's network namespace."""
    return [l.split(":")[0].strip() for l in pathlib.Path("/proc/net/dev").read_text().splitlines()[2:]]
