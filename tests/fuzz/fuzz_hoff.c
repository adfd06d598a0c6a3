/* libFuzzer target for the check of a connection's handed-over state (stack/hoffstate.c,
 * stk__hoff_parse): what a process takes from another one's sealed memfd when a socket
 * moves to it after fork (uls_claim) or across exec (uls_import), before any field reaches
 * a pcb.
 *
 * Oracles besides the sanitizers:
 *   - the verdict is 0 or a named reason; a refusal for the size leaves *h untouched;
 *   - the verdict agrees with a model of the rules written out here, in 64-bit arithmetic
 *     (a state the check lets through that the model refuses, or the other way, traps);
 *   - an accepted state's data (rx_len + tx_len octets) lies inside the input, and every
 *     octet of it is read (ASan sees any that is not);
 *   - the input's header made consistent (a state a giver could write) is accepted, with
 *     data of its own length after it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lwip/opt.h"
#include "lwip/tcpbase.h"
#include "hoffstate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink;  /* the data's octets are read into it */

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

/* An end of the family, octet by octet: IPv4 (2) is ::ffff:a.b.c.d with a.b.c.d not
 * 0.0.0.0, 224/4 or 255.255.255.255; IPv6 (10) none of ::ffff:0:0/96, ::, ff00::/8. */
static bool model_addr(uint8_t family, const uint8_t *a)
{
	bool mapped = true, zero = true;

	for (int i = 0; i < 16; i++) {
		if (i < 12)
			mapped &= a[i] == (i >= 10 ? 0xff : 0);
		zero &= a[i] == 0;
	}
	if (family == 2) {
		uint32_t v = (uint32_t)a[12] << 24 | (uint32_t)a[13] << 16 | (uint32_t)a[14] << 8 | a[15];
		return mapped && v != 0 && (v >> 28) != 0xe && v != 0xffffffffu;
	}
	return !mapped && !zero && a[0] != 0xff;
}

/* Socket and connection families: AF_INET (2) on AF_INET, AF_INET6 (10) on AF_INET6, and
 * AF_INET on an AF_INET6 socket without V6ONLY. */
static bool model_families(const struct stk_hoff_state *h)
{
	if (h->sock_family == 2)
		return h->family == 2 && h->v6only == 0;
	if (h->sock_family == 10)
		return (h->family == 10 && h->v6only <= 1) || (h->family == 2 && h->v6only == 0);
	return false;
}

/* The rules of stack/handoff.c's header comment and restore(), one by one. */
static bool model_accepts(const struct stk_hoff_state *h, size_t size)
{
	int64_t una = h->lastack, lbb = h->snd_lbb, nxt = h->snd_nxt;

	if (lbb < una)
		lbb += (int64_t)1 << 32;   /* the send queue may wrap the sequence space */
	if (nxt < una)
		nxt += (int64_t)1 << 32;
	return size >= sizeof(*h) && size <= STK_HOFF_MAX && h->magic == STK_HOFF_MAGIC &&
	       h->version == STK_HOFF_VERSION && h->nonce != 0 &&
	       (h->state == ESTABLISHED || h->state == CLOSE_WAIT) && h->local_port != 0 &&
	       h->remote_port != 0 && h->mss != 0 &&
	       (uint64_t)h->rx_len + h->tx_len + sizeof(*h) == size &&
	       h->tx_len <= TCP_SND_BUF && lbb - una == (int64_t)h->tx_len &&
	       nxt - una <= (int64_t)h->tx_len && h->snd_scale <= 14 && h->rcv_scale <= 14 &&
	       model_families(h) && model_addr(h->family, h->local_ip) &&
	       model_addr(h->family, h->remote_ip);
}

/* The input's header as a giver writes it: sequence numbers from the input, lengths cut
 * so that the state stays small. */
static void consistent(struct stk_hoff_state *h)
{
	h->magic = STK_HOFF_MAGIC;
	h->version = STK_HOFF_VERSION;
	h->nonce |= 1;
	h->state = (h->state & 1) ? ESTABLISHED : CLOSE_WAIT;
	h->local_port |= 1;
	h->remote_port |= 0x100;
	h->mss |= 0x200;
	h->snd_scale %= 15;
	h->rcv_scale %= 15;
	h->rx_len %= 4096;
	h->tx_len %= 4096;
	h->snd_lbb = h->lastack + h->tx_len;
	h->snd_nxt = h->lastack + h->snd_nxt % (h->tx_len + 1);
	/* Families from the input's low bits: IPv4 on AF_INET, IPv6, or v4-mapped. */
	switch (h->family % 3) {
	case 0: h->family = 2; h->sock_family = 2; h->v6only = 0; break;
	case 1: h->family = 10; h->sock_family = 10; h->v6only &= 1; break;
	default: h->family = 2; h->sock_family = 10; h->v6only = 0; break;
	}
	for (int e = 0; e < 2; e++) {
		uint8_t *a = e ? h->remote_ip : h->local_ip;
		if (h->family == 2) {
			memset(a, 0, 10);
			a[10] = a[11] = 0xff;
			a[12] = (uint8_t)(1 + a[12] % 223);  /* 1..223: neither 0/8 ... nor 224/4 */
		} else {
			a[0] = (uint8_t)(0x20 | (a[0] & 0x0f));  /* 2000::/4: unicast, not mapped */
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stk_hoff_state h, whole;

	memset(&h, 0xa5, sizeof(h));
	int rc = stk__hoff_parse(data, size, &h);
	CHECK(rc <= 0 && rc > -STK_HOFF_REASON_MAX);
	CHECK(stk__hoff_reason_name(rc)[0] != '?');
	if (size < sizeof(h)) {
		CHECK(rc == -STK_HOFF_DROP_SHORT);
		for (size_t i = 0; i < sizeof(h); i++)
			CHECK(((const uint8_t *)&h)[i] == 0xa5);
		return 0;
	}
	memcpy(&whole, data, sizeof(whole));
	CHECK(model_accepts(&whole, size) == (rc == 0));
	if (rc == 0) {
		CHECK(memcmp(&h, data, sizeof(h)) == 0);
		CHECK(sizeof(h) + (size_t)h.rx_len + h.tx_len == size);
		const uint8_t *d = data + sizeof(h);
		for (size_t i = 0; i < (size_t)h.rx_len + h.tx_len; i++)
			sink += d[i];
	}

	consistent(&whole);
	size_t n = sizeof(whole) + whole.rx_len + whole.tx_len;
	uint8_t *buf = malloc(n);
	CHECK(buf != NULL);
	memcpy(buf, &whole, sizeof(whole));
	memset(buf + sizeof(whole), 0x5a, n - sizeof(whole));
	CHECK(stk__hoff_parse(buf, n, &h) == 0);
	/* One octet more or less is a different size than the header claims. */
	CHECK(stk__hoff_parse(buf, n - 1, &h) == (n - 1 < sizeof(h) ? -STK_HOFF_DROP_SHORT :
						    -STK_HOFF_DROP_LENGTH));
	free(buf);
	return 0;
}
