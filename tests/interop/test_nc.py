"""netcat-openbsd under ulsrun on both nodes: 100 MiB each way, the bytes verified by SHA-256.

Both data directions, and for each the listening end either receives (`nc -l > file`, the
sender `nc -N < file` half-closes at end of input) or sends (`nc -N -l < file`, the
connecting end reads to end-of-file). `-4`: nc asks getaddrinfo for any family, and an IPv6
socket would pass through the shim to the kernel.
"""
import pytest

from conftest import PAYLOAD_BYTES, check_copy, program, received_file

TIMEOUT = 60   # seconds for one 100 MiB transfer

CASES = [
    # (sender node, receiver node, the listening end)
    (1, 2, "receiver"),
    (1, 2, "sender"),
    (2, 1, "receiver"),
    (2, 1, "sender"),
]


@pytest.mark.parametrize("src,dst,listener", CASES,
                         ids=[f"node{s}-to-node{d}-{l}-listens" for s, d, l in CASES])
def test_nc_moves_100mib_intact_between_nodes(tb, payload, datadir, src, dst, listener):
    nc = program("nc")
    path, digest = payload
    port = 5100 + CASES.index((src, dst, listener))
    out = received_file(datadir, f"nc-{src}-{dst}-{listener}.bin")
    before = tb.counters()
    if listener == "receiver":
        server = tb.start(tb.uls(dst, [nc, "-4", "-l", str(port)]), f"nc-listen-recv-n{dst}", stdout=out)
        tb.wait_listening(dst, port, server)
        client = tb.start(tb.uls(src, [nc, "-4", "-N", tb.ip(dst), str(port)]), f"nc-send-n{src}",
                          stdin=path)
    else:
        server = tb.start(tb.uls(src, [nc, "-4", "-N", "-l", str(port)]), f"nc-listen-send-n{src}",
                          stdin=path)
        tb.wait_listening(src, port, server)
        client = tb.start(tb.uls(dst, [nc, "-4", tb.ip(src), str(port)]), f"nc-recv-n{dst}", stdout=out)
    client.check(TIMEOUT)
    server.check(TIMEOUT)
    check_copy(out, digest, PAYLOAD_BYTES)
    tb.assert_through_ulstack(before, received={dst: PAYLOAD_BYTES}, sent={src: PAYLOAD_BYTES})
