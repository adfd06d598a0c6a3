"""RFC 826: An Ethernet Address Resolution Protocol."""

from scapy.layers.l2 import ARP, Ether

from conftest import curated_pcap, requirement


@requirement(fix='ulsd: server/reply.c; own: lwIP 2.1.3',
             mutate="sed -i 's/if (p->arp.op != WIRE_ARP_OP_REQUEST || p->arp.tpa != s->ip) {/if (1) {/' server/reply.c && tests/conformance/lwip-mutate core/ipv4/etharp.c 's/      if (for_us) {/      if (0) {/'")
def test_rfc826_request_for_our_address_gets_reply(node, link):
    """RFC 826, "Packet Reception": "?Is the opcode ares_op$REQUEST? (NOW look at the
    opcode!!) Yes: Swap hardware and protocol fields, putting the local hardware and
    protocol addresses in the sender fields. Set the ar$op field to ares_op$REPLY Send the
    packet to the (new) target hardware address on the same hardware on which the request
    was received." """
    link.send(Ether(src=node.my_mac, dst="ff:ff:ff:ff:ff:ff") /
              ARP(op=1, hwsrc=node.my_mac, psrc=node.my_ip, pdst=node.ip))
    r = link.recv(lambda p: ARP in p and p[ARP].op == 2 and p[ARP].psrc == node.ip, 3)
    assert r is not None, "no ARP reply"
    assert r[Ether].dst == node.my_mac, "reply not sent to the requester's hardware address"
    assert r[Ether].src == node.mac
    assert r[ARP].hwsrc == node.mac and r[ARP].psrc == node.ip
    assert r[ARP].hwdst == node.my_mac and r[ARP].pdst == node.my_ip
    curated_pcap(link, "test_rfc826_request_for_our_address_gets_reply.pcap")


@requirement(fix='ulsd: server/reply.c; own: lwIP 2.1.3',
             mutate="sed -i 's/if (p->arp.op != WIRE_ARP_OP_REQUEST || p->arp.tpa != s->ip) {/if (p->arp.op != WIRE_ARP_OP_REQUEST) {/' server/reply.c && tests/conformance/lwip-mutate core/ipv4/etharp.c 's/for_us = (u8_t)ip4_addr_cmp(&dipaddr, netif_ip4_addr(netif));/for_us = 1;/'")
def test_rfc826_request_for_other_address_not_answered(node, link):
    """RFC 826, "Packet Reception": "Negative conditionals indicate an end of processing
    and a discarding of the packet." and "?Am I the target protocol address?": a request
    for an address that is not ours gets no reply. Positive control: the same request for
    the node's address gets one."""
    link.send(Ether(src=node.my_mac, dst="ff:ff:ff:ff:ff:ff") /
              ARP(op=1, hwsrc=node.my_mac, psrc=node.my_ip, pdst="198.18.0.77"))
    r = link.recv(lambda p: ARP in p and p[ARP].op == 2, 1.0)
    assert r is None, f"node answered for an address it does not own: {r.summary()}"
    link.send(Ether(src=node.my_mac, dst="ff:ff:ff:ff:ff:ff") /
              ARP(op=1, hwsrc=node.my_mac, psrc=node.my_ip, pdst=node.ip))
    assert link.recv(lambda p: ARP in p and p[ARP].op == 2 and p[ARP].psrc == node.ip, 3) \
        is not None, "control: the request for the node's address was not answered"
