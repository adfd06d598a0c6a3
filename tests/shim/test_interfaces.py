"""The node's interface as programs look for it (issue 16, item 1; docs/compatibility.md):
under ulsrun, getifaddrs, if_nameindex, if_nametoindex, if_indextoname and the SIOCGIF*
ioctls show the loopback and the node's interface (the TAP's name and index in the node's
namespace, the node's address, prefix, MAC and MTU), from C and from Python, and a program
that picks its address by walking the interfaces serves on the node."""
import json
import os
import re
import subprocess
import threading

from conftest import BUILD, PYTHON, ULSRUN
from tblib import ECHO_CLIENT

IFADDRS = os.path.join(BUILD, "tests", "shim", "ifaddrs")

# ioctl numbers (linux/sockios.h); Python's socket module does not export them.
SIOCGIFCONF, SIOCGIFFLAGS, SIOCGIFADDR, SIOCGIFBRDADDR = 0x8912, 0x8913, 0x8915, 0x8919
SIOCGIFNETMASK, SIOCGIFMTU, SIOCGIFHWADDR, SIOCGIFINDEX = 0x891B, 0x8921, 0x8927, 0x8933

NODE_FLAGS = 0x1 | 0x2 | 0x40  # UP, BROADCAST, RUNNING
LO_FLAGS = 0x1 | 0x8 | 0x40    # UP, LOOPBACK, RUNNING
LOWER_UP = 0x10000             # in getifaddrs' flags, not in SIOCGIFFLAGS' 16 bits


def expected(bed):
    """What the node's interface must look like: the TAP's name and kernel index in the
    node namespace, and the node's address, mask, broadcast, MAC and MTU."""
    e = bed.env
    tap = e["TB_NODE1_TAP"]
    out = subprocess.run(["ip", "-n", bed.ns, "-o", "link", "show", "dev", tap],
                         capture_output=True, text=True, check=True).stdout
    index = int(out.split(":", 1)[0])
    plen = int(e["TB_PREFIX"])
    mask = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF
    ip = [int(x) for x in e["TB_NODE1_IP"].split(".")]
    ipn = (ip[0] << 24) | (ip[1] << 16) | (ip[2] << 8) | ip[3]
    dq = lambda n: ".".join(str((n >> s) & 255) for s in (24, 16, 8, 0))  # noqa: E731
    return dict(name=tap, index=index, ip=e["TB_NODE1_IP"], mask=dq(mask),
                brd=dq(ipn | (~mask & 0xFFFFFFFF)), mac=e["TB_NODE1_MAC"].lower(),
                mtu=int(e["TB_MTU"]))


PY_VIEW = r"""
import fcntl, json, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
def q(req, name):
    return fcntl.ioctl(s.fileno(), req, struct.pack("16s16x", name.encode()))
def addr(req, name):
    return socket.inet_ntoa(q(req, name)[20:24])
out = {"nameindex": socket.if_nameindex(), "ifs": {}}
for index, name in out["nameindex"]:
    hw = q(0x8927, name)
    out["ifs"][name] = {
        "nametoindex": socket.if_nametoindex(name),
        "indextoname": socket.if_indextoname(index),
        "index": struct.unpack_from("i", q(0x8933, name), 16)[0],
        "flags": struct.unpack_from("H", q(0x8913, name), 16)[0],
        "mtu": struct.unpack_from("i", q(0x8921, name), 16)[0],
        "addr": addr(0x8915, name), "mask": addr(0x891B, name), "brd": addr(0x8919, name),
        "hatype": struct.unpack_from("H", hw, 16)[0],
        "mac": ":".join("%02x" % b for b in hw[18:24]),
    }
try:
    socket.if_nametoindex("nosuch0")
    out["nosuch"] = "found"
except OSError:
    out["nosuch"] = "no such interface"
# SIOCGIFCONF with room for 8 entries of 40 bytes (struct ifconf: int, padding, pointer)
import array
arr = array.array("B", bytes(8 * 40))
ptr, _ = arr.buffer_info()
res = fcntl.ioctl(s.fileno(), 0x8912, struct.pack("iiL", len(arr), 0, ptr))
n = struct.unpack_from("i", res, 0)[0]
raw = arr.tobytes()[:n]
out["ifconf"] = [[raw[i:i + 16].split(b"\0")[0].decode(), socket.inet_ntoa(raw[i + 20:i + 24])]
                 for i in range(0, n, 40)]
print(json.dumps(out))
"""


def py_view(bed, ulsrun=True):
    argv = [PYTHON, "-c", PY_VIEW]
    if ulsrun:
        r = bed.ulsrun(argv, timeout=30)
    else:
        r = subprocess.run(["ip", "netns", "exec", bed.ns, *argv], capture_output=True,
                           timeout=30)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return json.loads(r.stdout)


def test_python_sees_the_node_interface_and_loopback_through_if_nameindex_and_ioctls(bed):
    x = expected(bed)
    v = py_view(bed)
    assert v["nameindex"] == [[1, "lo"], [x["index"], x["name"]]], v["nameindex"]
    node, lo = v["ifs"][x["name"]], v["ifs"]["lo"]
    assert node == dict(nametoindex=x["index"], indextoname=x["name"], index=x["index"],
                        flags=NODE_FLAGS, mtu=x["mtu"], addr=x["ip"], mask=x["mask"],
                        brd=x["brd"], hatype=1, mac=x["mac"]), node
    assert lo == dict(nametoindex=1, indextoname="lo", index=1, flags=LO_FLAGS, mtu=65536,
                      addr="127.0.0.1", mask="255.0.0.0", brd="0.0.0.0", hatype=772,
                      mac="00:00:00:00:00:00"), lo
    assert v["nosuch"] == "no such interface", v["nosuch"]
    assert v["ifconf"] == [["lo", "127.0.0.1"], [x["name"], x["ip"]]], v["ifconf"]


def test_without_ulsrun_the_same_program_sees_the_kernel_view(bed):
    """The control: the kernel's interfaces of the namespace, where the TAP has no
    address (the node's address is the user-level stack's)."""
    argv = [PYTHON, "-c", "import socket; print(socket.if_nameindex())"]
    r = subprocess.run(["ip", "netns", "exec", bed.ns, *argv], capture_output=True,
                       timeout=30, text=True)
    assert r.returncode == 0 and "br0" in r.stdout, r


def test_c_program_sees_one_consistent_view_in_getifaddrs_if_nameindex_and_ioctls(bed):
    x = expected(bed)
    r = bed.ulsrun([IFADDRS, "list"], timeout=30)
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, out + r.stderr.decode(errors="replace")
    lines = set(out.splitlines())
    lo_f = LO_FLAGS | LOWER_UP
    nf = NODE_FLAGS | LOWER_UP
    n = x["name"]
    want = [
        f"ifaddr lo packet index 1 hatype 772 mac 00:00:00:00:00:00 flags {lo_f:#x}",
        f"ifaddr {n} packet index {x['index']} hatype 1 mac {x['mac']} flags {nf:#x}",
        f"ifaddr lo inet 127.0.0.1 mask 255.0.0.0 brd - flags {lo_f:#x}",
        f"ifaddr {n} inet {x['ip']} mask {x['mask']} brd {x['brd']} flags {nf:#x}",
        "nameindex 1 lo", f"nameindex {x['index']} {n}",
        "nametoindex lo 1", f"nametoindex {n} {x['index']}",
        "indextoname 1 lo", f"indextoname {x['index']} {n}",
        f"nametoindex nosuch 0 errno 19",
        "ifconf need 80", "ifconf lo 127.0.0.1", f"ifconf {n} {x['ip']}",
    ]
    for tag in ("inet", "unix"):  # any socket answers, as the kernel's do
        want += [
            f"ioctl {tag} lo index 1 flags {LO_FLAGS:#x} mtu 65536 addr 127.0.0.1 "
            f"mask 255.0.0.0 brd 0.0.0.0 hw 772 00:00:00:00:00:00",
            f"ioctl {tag} {n} index {x['index']} flags {NODE_FLAGS:#x} mtu {x['mtu']} "
            f"addr {x['ip']} mask {x['mask']} brd {x['brd']} hw 1 {x['mac']}",
            f"ioctl {tag} name 1 lo", f"ioctl {tag} name {x['index']} {n}",
        ]
    missing = [w for w in want if w not in lines]
    assert not missing, f"missing {missing}\nin:\n{out}"
    assert sum(1 for ln in lines if ln.startswith("ifaddr ")) == 4, out


def test_a_program_that_walks_the_interfaces_serves_on_the_node_address(bed):
    """ifaddrs serve: the first non-loopback IPv4 interface is the node's; it listens
    there and echoes 1 MiB to the kernel peer, byte for byte."""
    x = expected(bed)
    port = 7300
    srv = subprocess.Popen(["ip", "netns", "exec", bed.ns, ULSRUN, "--ctl", bed.ctl, "--",
                            IFADDRS, "serve", str(port)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        line = srv.stdout.readline()
        assert line.split() == ["serving", x["name"], x["ip"], str(port)], \
            line + srv.stderr.read() if srv.poll() is not None else line
        r = subprocess.run(["ip", "netns", "exec", bed.env["TB_KERNEL_NETNS"], PYTHON,
                            "-c", ECHO_CLIENT, x["ip"], str(port), "16", str(1 << 20)],
                           capture_output=True, text=True, timeout=60)
        assert r.stdout.strip() == "match", r
        out, err = srv.communicate(timeout=30)
        assert srv.returncode == 0 and f"echoed {1 << 20}" in out, (out, err)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait(timeout=10)
