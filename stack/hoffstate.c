/* The check of a connection's state handed over by another process (hoffstate.h). Pure:
 * no system call, no lwIP state; the memfd it arrives in is handoff.c's business. */
#include "hoffstate.h"

#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "lwip/opt.h"
#include "lwip/tcpbase.h"

/* The families: the connection's is the socket's, or IPv4 on a dual-stack AF_INET6
 * socket (ipv6(7): an IPV6_V6ONLY socket has no IPv4 peers). */
static bool families_ok(const struct stk_hoff_state *h)
{
	if (h->v6only > 1 || (h->sock_family != AF_INET && h->sock_family != AF_INET6))
		return false;
	if (h->sock_family == AF_INET)
		return h->family == AF_INET && !h->v6only;
	return h->family == AF_INET6 || (h->family == AF_INET && !h->v6only);
}

/* One end of a TCP connection of the family: IPv4 as ::ffff:a.b.c.d with a.b.c.d neither
 * 0.0.0.0 nor multicast (224.0.0.0/4) nor the limited broadcast; IPv6 neither v4-mapped,
 * nor :: (RFC 4291 §2.5.2), nor multicast (ff00::/8, §2.7). RFC 9293 §3.9.1.1: no TCP
 * connection has a broadcast or multicast end. */
static bool addr_ok(uint8_t family, const uint8_t a[16])
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t zero[16];
	bool is_mapped = memcmp(a, mapped, 12) == 0;

	if (family == AF_INET) {
		static const uint8_t bcast[4] = { 0xff, 0xff, 0xff, 0xff };
		return is_mapped && memcmp(a + 12, zero, 4) != 0 && (a[12] & 0xf0) != 0xe0 &&
		       memcmp(a + 12, bcast, 4) != 0;
	}
	return !is_mapped && memcmp(a, zero, 16) != 0 && a[0] != 0xff;
}

int stk__hoff_parse(const void *buf, size_t size, struct stk_hoff_state *h)
{
	if (size < sizeof(*h))
		return -STK_HOFF_DROP_SHORT;
	if (size > STK_HOFF_MAX)
		return -STK_HOFF_DROP_LONG;
	memcpy(h, buf, sizeof(*h));
	if (h->magic != STK_HOFF_MAGIC || h->version != STK_HOFF_VERSION)
		return -STK_HOFF_DROP_MAGIC;
	if (!h->nonce)
		return -STK_HOFF_DROP_NONCE;
	if (h->state != ESTABLISHED && h->state != CLOSE_WAIT)
		return -STK_HOFF_DROP_STATE;
	if (!h->local_port || !h->remote_port || !h->mss)
		return -STK_HOFF_DROP_TUPLE;
	if ((uint64_t)sizeof(*h) + h->rx_len + h->tx_len != (uint64_t)size)
		return -STK_HOFF_DROP_LENGTH;
	/* The taker queues tx_len octets again from SND.UNA (handoff.c, queue_tx) and puts
	 * SND.NXT back where the giver had got: inside what it queued. */
	if (h->tx_len > TCP_SND_BUF || h->tx_len != h->snd_lbb - h->lastack ||
	    h->snd_nxt - h->lastack > h->tx_len)
		return -STK_HOFF_DROP_SEND_QUEUE;
	if (h->snd_scale > 14 || h->rcv_scale > 14)
		return -STK_HOFF_DROP_SCALE;
	if (!families_ok(h))
		return -STK_HOFF_DROP_FAMILY;
	if (!addr_ok(h->family, h->local_ip) || !addr_ok(h->family, h->remote_ip))
		return -STK_HOFF_DROP_ADDRESS;
	return 0;
}

const char *stk__hoff_reason_name(int reason)
{
	static const char *const names[] = {
		[STK_HOFF_OK] = "ok", [STK_HOFF_DROP_SHORT] = "short", [STK_HOFF_DROP_LONG] = "long",
		[STK_HOFF_DROP_MAGIC] = "magic", [STK_HOFF_DROP_NONCE] = "nonce", [STK_HOFF_DROP_STATE] = "state",
		[STK_HOFF_DROP_TUPLE] = "tuple", [STK_HOFF_DROP_LENGTH] = "length",
		[STK_HOFF_DROP_SEND_QUEUE] = "send_queue", [STK_HOFF_DROP_SCALE] = "scale",
		[STK_HOFF_DROP_FAMILY] = "family", [STK_HOFF_DROP_ADDRESS] = "address",
	};
	if (reason < 0)
		reason = -reason;
	return reason < STK_HOFF_REASON_MAX ? names[reason] : "?";
}
