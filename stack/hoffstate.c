/* The check of a connection's state handed over by another process (hoffstate.h). Pure:
 * no system call, no lwIP state; the memfd it arrives in is handoff.c's business. */
#include "hoffstate.h"

#include <string.h>

#include "lwip/opt.h"
#include "lwip/tcpbase.h"

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
	return 0;
}

const char *stk__hoff_reason_name(int reason)
{
	static const char *const names[] = {
		[STK_HOFF_OK] = "ok", [STK_HOFF_DROP_SHORT] = "short", [STK_HOFF_DROP_LONG] = "long",
		[STK_HOFF_DROP_MAGIC] = "magic", [STK_HOFF_DROP_NONCE] = "nonce", [STK_HOFF_DROP_STATE] = "state",
		[STK_HOFF_DROP_TUPLE] = "tuple", [STK_HOFF_DROP_LENGTH] = "length",
		[STK_HOFF_DROP_SEND_QUEUE] = "send_queue", [STK_HOFF_DROP_SCALE] = "scale",
	};
	if (reason < 0)
		reason = -reason;
	return reason < STK_HOFF_REASON_MAX ? names[reason] : "?";
}
