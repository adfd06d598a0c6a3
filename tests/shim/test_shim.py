"""What libuls-preload promises a program (issue 4, docs/compatibility.md), one program
per behaviour under ulsrun. The cases themselves are in cases.py."""
import os
import shutil
import stat
import subprocess
import tempfile

import pytest

from conftest import BUILD, ULSRUN


@pytest.mark.parametrize("name", [
    "fd_numbers",
    "mixed_epoll",
    "nested_epoll",
    "poll_select",
    "eintr_without_sa_restart",
    "sa_restart_restarts",
    "rcvtimeo",
    "threads_share_sockets",
    "fork_listener_both_accept",
    "fork_connected_child_closes",
    "fork_connected_moves_to_child",
    "fork_connected_moves_with_data_in_flight",
    "fork_connected_parent_keeps_using",
    "fork_connected_claim_interrupted_by_signal",
    "nonblocking_connect",
    "peek_and_waitall",
    "udp",
    "sendfile_and_large_transfer",
    "exec_inherited_socket_is_closed",
    "close_range_spares_the_stack",
    "loopback_and_unix_pass_through",
])
def test_case(bed, name):
    bed.case(name)


def test_ulsrun_refuses_a_static_binary(bed, tmp_path):
    src = tmp_path / "s.c"
    src.write_text("int main(void) { return 0; }\n")
    exe = tmp_path / "static"
    subprocess.run(["cc", "-static", "-o", str(exe), str(src)], check=True)
    r = bed.ulsrun([str(exe)])
    assert r.returncode == 126 and b"statically linked" in r.stderr, r


def test_ulsrun_refuses_a_setuid_binary(bed, tmp_path):
    exe = tmp_path / "true"
    shutil.copy("/bin/true", exe)
    os.chmod(exe, 0o4755)
    r = bed.ulsrun([str(exe)])
    assert r.returncode == 126 and b"set-user-ID" in r.stderr, r


def test_ulsrun_without_a_node_says_so(bed):
    r = subprocess.run([ULSRUN, "--ctl", "/nonexistent.ctl", "--", "/bin/true"],
                       capture_output=True, timeout=10)
    assert r.returncode == 2 and b"not a ulsd control socket" in r.stderr, r
    r = subprocess.run([ULSRUN, "--", "/bin/true"], capture_output=True, timeout=10,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    assert r.returncode == 2 and b"no node" in r.stderr, r


def test_a_socket_that_cannot_reach_ulsd_fails_with_a_message(bed, tmp_path):
    """No silent fallback to the kernel: ULS_CTL names a socket nobody serves."""
    import socket as pysock
    dead = tmp_path / "dead.ctl"
    s = pysock.socket(pysock.AF_UNIX, pysock.SOCK_SEQPACKET)
    s.bind(str(dead))
    s.close()  # a socket file with no listener behind it
    r = subprocess.run([ULSRUN, "--ctl", str(dead), "--", "/usr/bin/python3", "-c",
                        "import socket\ntry:\n socket.socket()\nexcept OSError as e:\n"
                        " print('refused', e.errno)\n"], capture_output=True, timeout=20)
    assert b"refused" in r.stdout and b"no user-level socket" in r.stderr, r


def test_signal_handler_using_sockets_does_not_deadlock(bed):
    """A handler sends on a UDP socket every millisecond while its thread streams over TCP:
    calls into the stack run with signals blocked, so the handler never finds the stack's
    lock held by the thread it interrupted."""
    r = bed.ulsrun([f"{BUILD}/tests/shim/sighandler", bed.kip, "7100", "7104", "2"], timeout=30)
    assert r.returncode == 0, r
    handled, echoed = (int(x) for x in r.stdout.split()[1::2])
    assert handled > 100 and echoed > 10, r.stdout
