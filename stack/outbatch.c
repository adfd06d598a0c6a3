/* One tcp_output() per connection per batch of received frames (lwIP patch 0088).
 *
 * lwIP answers every segment it takes in: tcp_input() ends with tcp_output(), so a receiver
 * acknowledged each super-segment with an ACK frame of its own (one ACK per 30-60 KB), and
 * a sender clocked out data once per ACK, in as many frames. Each frame costs a TAP write, a
 * steering lookup and a read on the other side. While the stack takes a batch of frames
 * from its device (stack/drive.c), tcp_input() leaves that call to us; we make it once per
 * connection when the batch ends, or every OUTBATCH_FRAMES frames, so the latest ACK covers
 * them all, as the kernel's GRO and NAPI batches do.
 *
 * Deviation: RFC 9293 section 3.8.6.3 and RFC 5681 section 4.2, "an ACK SHOULD be generated
 * for at least every second full-sized segment": within one batch of at most
 * OUTBATCH_FRAMES frames, all already received by the time the first is processed, one ACK
 * answers them all. Duplicate ACKs for out-of-order data (RFC 5681 section 4.2 "SHOULD
 * send an immediate duplicate ACK") still go out at once, from tcp_receive(), and so does
 * every ACK for a while after a loss (quick ACKs, patch 0091): a sender that has just lost
 * a segment runs a small window, and one ACK per batch would make it wait for each whole
 * flight, or for its probe timeout when that one ACK is lost too.
 *
 * All of it runs under the core lock: one batch at a time per process. */
#include "internal.h"
#include "hooks.h"

#include "lwip/priv/tcp_priv.h"
#include "lwip/tcp.h"

/* Frames after which the deferred outputs are made even though the batch goes on: bounds
 * the delay an ACK takes to the time of this many frames' input processing. */
#define OUTBATCH_FRAMES 16
/* Connections with a deferred output per batch; one more gets its output at once. */
#define OUTBATCH_PCBS 64

static struct {
	bool open;
	unsigned frames;
	unsigned n;
	struct tcp_pcb *pcb[OUTBATCH_PCBS];
} ob;

void stk__outbatch_begin(void)
{
	ob.open = true;
	ob.frames = 0;
	stk__synshed_round_begin();
}

/* The deferred outputs, now. tcp_output() does not take frames in, so no pcb is added
 * while the list is walked. */
static void flush(void)
{
	unsigned n = ob.n;

	ob.n = 0;
	for (unsigned i = 0; i < n; i++) {
		struct tcp_pcb *pcb = ob.pcb[i];
		pcb->output_deferred = 0;
		tcp_output(pcb);
	}
}

void stk__outbatch_frame(void)
{
	if (ob.open && ++ob.frames % OUTBATCH_FRAMES == 0)
		flush();
}

void stk__outbatch_end(void)
{
	ob.open = false;
	flush();
	stk__synshed_round_end();
}

int stk__outbatch_defer(struct tcp_pcb *pcb)
{
	if (!ob.open)
		return 0;
	if (pcb->output_deferred)
		return 1;
	if (ob.n == OUTBATCH_PCBS)
		return 0;
	pcb->output_deferred = 1;
	ob.pcb[ob.n++] = pcb;
	return 1;
}

/* A pcb freed in the middle of a batch (an RST, an abort) leaves the list. */
void stk__outbatch_forget(struct tcp_pcb *pcb)
{
	if (!pcb->output_deferred)
		return;
	for (unsigned i = 0; i < ob.n; i++) {
		if (ob.pcb[i] == pcb) {
			ob.pcb[i] = ob.pcb[--ob.n];
			break;
		}
	}
	pcb->output_deferred = 0;
}
