"""Long transfers between a ulstack node and the Linux kernel, every byte verified.

ulsbench sends apps/pattern.h's pattern, in which every byte depends on its stream offset;
the receiver checks each byte and the sender's clock only stops on the receiver's verdict.
"""
import subprocess
import time

from conftest import BENCH, transfer, wait_stderr_line

GIB = 1 << 30


def test_one_gib_from_ulstack_to_kernel_arrives_intact(testbed, tmp_path):
    res = transfer(testbed, "send", GIB, tmp_path)
    assert res["verified"] is True
    assert res["bytes_verified"] == GIB


def test_one_gib_from_kernel_to_ulstack_arrives_intact(testbed, tmp_path):
    res = transfer(testbed, "recv", GIB, tmp_path)
    assert res["verified"] is True
    assert res["bytes_verified"] == GIB


def _flight_from_capture(path, node_ip, peer_ip):
    """Largest amount of data the node had sent but the peer had not yet acknowledged,
    and the window-scale shifts of both SYNs (RFC 7323 §2.2)."""
    from scapy.all import IP, TCP, PcapReader

    high = None   # highest sequence number sent by the node (relative)
    acked = None  # highest ACK from the peer
    isn = None
    best = 0
    shifts = {}
    with PcapReader(str(path)) as pcap:
        for pkt in pcap:
            if IP not in pkt or TCP not in pkt:
                continue
            ip, tcp = pkt[IP], pkt[TCP]
            if tcp.flags & 0x02:  # SYN: record the window-scale option
                shifts[ip.src] = dict(tcp.options).get("WScale")
                if ip.src == node_ip:
                    isn = tcp.seq
                continue
            if isn is None:
                continue
            if ip.src == node_ip:
                # Payload length from the IP header: captures are truncated (snaplen).
                plen = ip.len - ip.ihl * 4 - tcp.dataofs * 4
                end = (tcp.seq - isn + plen) % (1 << 32)
                high = end if high is None or end > high else high
            elif ip.src == peer_ip and tcp.flags & 0x10:
                a = (tcp.ack - isn) % (1 << 32)
                acked = a if acked is None or a > acked else acked
            if high is not None and acked is not None:
                best = max(best, high - acked)
    return best, shifts


def test_capture_shows_more_than_64k_unacknowledged_in_flight(testbed, tmp_path):
    """RFC 7323 §2: with window scaling agreed, a sender may have more than 2^16 bytes
    outstanding. A capture of a ulstack -> kernel stream must show it doing so."""
    env = testbed.env
    pcap = tmp_path / "flight.pcap"
    cap = testbed.start(env["TB_NETNS"], ["tcpdump", "-i", "br0", "-s", "96", "-U", "-w", str(pcap),
                                          "-c", "200000", f"tcp port 5001 and host {env['TB_NODE1_IP']}"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_stderr_line(cap, "listening on")  # it captures from then on (the SYNs too)
    transfer(testbed, "send", 64 << 20, tmp_path)
    time.sleep(0.5)
    testbed.stop(cap)
    best, shifts = _flight_from_capture(pcap, env["TB_NODE1_IP"], env["TB_KERNEL_IP"])
    assert shifts.get(env["TB_NODE1_IP"]) is not None and shifts[env["TB_NODE1_IP"]] >= 7, shifts
    assert shifts.get(env["TB_KERNEL_IP"]) is not None, "kernel peer did not offer window scaling"
    print(f"largest unacknowledged flight: {best} bytes")
    assert best > 65535


def test_read_write_fallback_without_io_uring_transfers_intact(testbed, tmp_path):
    """Without io_uring (ULS_NO_IO_URING=1 stands in for a kernel that lacks it) the TAP
    falls back to poll/read/write, says so once, and moves data as before."""
    env = testbed.env
    out = tmp_path / "fallback.json"
    r = subprocess.run(["ip", "netns", "exec", env["TB_NETNS"], "env", "ULS_NO_IO_URING=1",
                        BENCH, "client", *testbed.node_args(), "--to", f"{env['TB_KERNEL_IP']}:5001",
                        "--bytes", str(64 << 20), "--json", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr.count("io_uring disabled by ULS_NO_IO_URING=1") == 1, r.stderr
    import json
    res = json.loads(out.read_text())
    assert res["verified"] is True and res["bytes_verified"] == 64 << 20


def test_receiving_node_answers_a_batch_of_segments_with_one_ack(testbed, tmp_path):
    """lwIP patch 0088 (stack/outbatch.c): a receiver acknowledges the frames it takes from
    its device in one batch with one ACK, not one per segment pair or per super-segment.
    In a 256 MiB kernel -> ulstack transfer without loss the node sends fewer than 0.4 ACK
    frames per data frame it receives (lwIP alone: 0.5 for wire-sized segments, about 1 for
    super-segments, each of which is two full-sized segments or more)."""
    res = transfer(testbed, "recv", 256 << 20, tmp_path)
    assert res["verified"] is True
    c = res["counters"]
    data, acks = c["dev_rx_frames"], c["dev_tx_frames"]
    ratio = acks / data
    print(f"{acks} frames sent for {data} received: {ratio:.2f}")
    assert ratio < 0.4, f"{ratio:.2f} ACK frames per data frame ({acks} for {data})"
