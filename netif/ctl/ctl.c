/* Control messages: construction and the one validator both sides use. */
#include "netif/ctl/ctl.h"

#include <netinet/in.h>
#include <string.h>

void ctl_init(struct ctl_msg *m, enum ctl_type type, uint32_t seq)
{
	memset(m, 0, sizeof(*m));
	m->magic = CTL_MAGIC;
	m->version = CTL_VERSION;
	m->type = (uint16_t)type;
	m->seq = seq;
}

static bool proto_ok(uint8_t p)
{
	return p == IPPROTO_TCP || p == IPPROTO_UDP;
}

int ctl_check(const void *buf, ssize_t n, struct ctl_msg *out)
{
	struct ctl_msg m;

	if (!buf || n != (ssize_t)sizeof(m))
		return -CTL_BAD_SIZE;
	memcpy(&m, buf, sizeof(m));
	if (m.magic != CTL_MAGIC)
		return -CTL_BAD_MAGIC;
	if (m.version != CTL_VERSION)
		return -CTL_BAD_VERSION;
	if (m.type < CTL_HELLO || m.type >= CTL_TYPE_MAX)
		return -CTL_BAD_TYPE;
	switch (m.type) {
	case CTL_BIND:
	case CTL_UNBIND:
		if (!proto_ok(m.proto) || (m.type == CTL_UNBIND && m.lport == 0))
			return -CTL_BAD_FIELD;
		break;
	case CTL_LISTEN:
	case CTL_ACCEPTING:
		if (m.proto != IPPROTO_TCP || m.lport == 0)
			return -CTL_BAD_FIELD;
		break;
	case CTL_CONNECT:
		if (m.proto != IPPROTO_TCP || m.rport == 0 || m.rip == 0)
			return -CTL_BAD_FIELD;
		break;
	case CTL_ACCEPTED:
	case CTL_RELEASE:
		if (m.proto != IPPROTO_TCP || m.lport == 0 || m.rport == 0 || m.rip == 0)
			return -CTL_BAD_FIELD;
		break;
	case CTL_HANDOFF:
	case CTL_CLAIM:
		/* The nonce is checked by ulsd: replies do not carry it. */
		if (m.proto != IPPROTO_TCP || m.lport == 0 || m.rport == 0 || m.rip == 0)
			return -CTL_BAD_FIELD;
		break;
	case CTL_STAT_PROC:
		if ((m.u.proc.datapath != CTL_DP_DIRECT && m.u.proc.datapath != CTL_DP_RELAY) ||
		    m.u.proc.table >= CTL_TABLE_MAX || m.u.proc.listed > m.u.proc.connections)
			return -CTL_BAD_FIELD;
		break;
	case CTL_STAT_CONN:
		if (m.proto != IPPROTO_TCP || m.lport == 0 || m.rport == 0 || m.rip == 0 ||
		    m.u.conn.state <= ULS_TCP_LISTEN || m.u.conn.state >= ULS_TCP_STATE_COUNT ||
		    (m.u.conn.datapath != CTL_DP_DIRECT && m.u.conn.datapath != CTL_DP_RELAY) ||
		    m.u.conn.snd_wscale > 14 || m.u.conn.rcv_wscale > 14)
			return -CTL_BAD_FIELD;
		break;
	case CTL_STAT_COUNTER:
		if (memchr(m.u.counter.name, '\0', sizeof(m.u.counter.name)) == NULL)
			return -CTL_BAD_FIELD;
		break;
	case CTL_HELLO:
		if (m.u.hello.mtu && (m.u.hello.prefix_len < 1 || m.u.hello.prefix_len > 30 ||
				      m.u.hello.mtu < 68 || m.u.hello.mtu > 65535))
			return -CTL_BAD_FIELD;
		if (!m.u.hello.mtu && (m.u.hello.flags & CTL_HELLO_F_RINGS) &&
		    (m.u.hello.ring_fd[0] < 0 || m.u.hello.ring_fd[1] < 0))
			return -CTL_BAD_FIELD;
		/* A wake-up descriptor only comes with the rings it is for. */
		if (!m.u.hello.mtu && (m.u.hello.flags & CTL_HELLO_F_WAKE) &&
		    (!(m.u.hello.flags & CTL_HELLO_F_RINGS) || m.u.hello.wake_fd < 0))
			return -CTL_BAD_FIELD;
		if (m.u.hello.mtu && m.u.hello.datapath != CTL_DP_DIRECT &&
		    m.u.hello.datapath != CTL_DP_RELAY)
			return -CTL_BAD_FIELD;
		if (m.u.hello.mtu && !memchr(m.u.hello.ifname, '\0', sizeof(m.u.hello.ifname)))
			return -CTL_BAD_FIELD;
		break;
	default:
		break;
	}
	*out = m;
	return 0;
}

const char *ctl_error_name(int err)
{
	switch (err < 0 ? -err : err) {
	case CTL_BAD_SIZE:    return "ctl_bad_size";
	case CTL_BAD_MAGIC:   return "ctl_bad_magic";
	case CTL_BAD_VERSION: return "ctl_bad_version";
	case CTL_BAD_TYPE:    return "ctl_bad_type";
	case CTL_BAD_FIELD:   return "ctl_bad_field";
	default:                  return "ctl_unknown_error";
	}
}
