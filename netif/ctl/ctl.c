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

static bool zero16(const uint8_t a[16])
{
	static const uint8_t z[16];

	return memcmp(a, z, 16) == 0;
}

/* A port's messages (BIND, UNBIND, LISTEN, ACCEPTING): the socket's family, and
 * CTL_F_V6ONLY only with AF_INET6. 0, or -CTL_BAD_FAMILY. */
static int port_family(const struct ctl_msg *m)
{
	if (m->family != AF_INET && m->family != AF_INET6)
		return -CTL_BAD_FAMILY;
	if ((m->flags & CTL_F_V6ONLY) && m->family != AF_INET6)
		return -CTL_BAD_FAMILY;
	return 0;
}

/* A connection's remote: AF_INET with a v4-mapped address that is not 0.0.0.0, or
 * AF_INET6 with a unicast address that is not v4-mapped and not :: (RFC 4291 §2.5.2,
 * §2.7: neither the unspecified address nor a multicast one names a TCP peer). */
static int remote(const struct ctl_msg *m)
{
	if (m->family == AF_INET)
		return ctl_addr_is_v4mapped(m->rip) && ctl_addr_v4(m->rip) != 0 ? 0 : -CTL_BAD_ADDR;
	if (m->family == AF_INET6)
		return !ctl_addr_is_v4mapped(m->rip) && !zero16(m->rip) && m->rip[0] != 0xff ?
		       0 : -CTL_BAD_ADDR;
	return -CTL_BAD_FAMILY;
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
	int rc = 0;

	switch (m.type) {
	case CTL_BIND:
	case CTL_UNBIND:
		if (!proto_ok(m.proto) || (m.type == CTL_UNBIND && m.lport == 0))
			return -CTL_BAD_FIELD;
		rc = port_family(&m);
		break;
	case CTL_LISTEN:
	case CTL_ACCEPTING:
		if (m.proto != IPPROTO_TCP || m.lport == 0)
			return -CTL_BAD_FIELD;
		rc = port_family(&m);
		break;
	case CTL_CONNECT:
		if (m.proto != IPPROTO_TCP || m.rport == 0)
			return -CTL_BAD_FIELD;
		rc = remote(&m);
		break;
	case CTL_ACCEPTED:
	case CTL_RELEASE:
	case CTL_HANDOFF:
	case CTL_CLAIM:
		/* HANDOFF, CLAIM: the nonce is checked by ulsd (replies do not carry it). */
		if (m.proto != IPPROTO_TCP || m.lport == 0 || m.rport == 0)
			return -CTL_BAD_FIELD;
		rc = remote(&m);
		break;
	case CTL_STAT_ENDPOINT:
		/* A listening or bound endpoint has no remote; its family says which of the
		 * port's families it holds. */
		if (m.u.endpoint.kind == CTL_K_CONNECTED || m.u.endpoint.kind == CTL_K_TIMEWAIT)
			rc = remote(&m);
		else if (m.family != AF_INET && m.family != AF_INET6)
			rc = -CTL_BAD_FAMILY;
		break;
	case CTL_STAT_PROC:
		if ((m.u.proc.datapath != CTL_DP_DIRECT && m.u.proc.datapath != CTL_DP_RELAY) ||
		    m.u.proc.table >= CTL_TABLE_MAX || m.u.proc.listed > m.u.proc.connections)
			return -CTL_BAD_FIELD;
		break;
	case CTL_STAT_CONN:
		if ((rc = remote(&m)) < 0)
			return rc;
		/* The local address is of the remote's family. */
		if (ctl_addr_is_v4mapped(m.u.conn.lip) != (m.family == AF_INET) ||
		    zero16(m.u.conn.lip))
			return -CTL_BAD_ADDR;
		if (m.proto != IPPROTO_TCP || m.lport == 0 || m.rport == 0 ||
		    m.u.conn.state <= ULS_TCP_LISTEN || m.u.conn.state >= ULS_TCP_STATE_COUNT ||
		    (m.u.conn.datapath != CTL_DP_DIRECT && m.u.conn.datapath != CTL_DP_RELAY) ||
		    m.u.conn.snd_wscale > 14 || m.u.conn.rcv_wscale > 14)
			return -CTL_BAD_FIELD;
		break;
	case CTL_STAT_COUNTER:
		if (memchr(m.u.counter.name, '\0', sizeof(m.u.counter.name)) == NULL)
			return -CTL_BAD_FIELD;
		break;
	case CTL_ROUTER6:
		/* The request, and a refusal, name nothing; the answer names a unicast
		 * router (a link-local one too: RFC 4861 §8.3). */
		if (m.family == 0)
			rc = zero16(m.rip) ? 0 : -CTL_BAD_ADDR;
		else if (m.family != AF_INET6)
			rc = -CTL_BAD_FAMILY;
		else
			rc = remote(&m);
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
		/* So does the multishot read. */
		if (!m.u.hello.mtu && (m.u.hello.flags & CTL_HELLO_F_MSHOT) &&
		    !(m.u.hello.flags & CTL_HELLO_F_RINGS))
			return -CTL_BAD_FIELD;
		if (m.u.hello.mtu && m.u.hello.datapath != CTL_DP_DIRECT &&
		    m.u.hello.datapath != CTL_DP_RELAY)
			return -CTL_BAD_FIELD;
		if (m.u.hello.mtu && !memchr(m.u.hello.ifname, '\0', sizeof(m.u.hello.ifname)))
			return -CTL_BAD_FIELD;
		/* The node's IPv6 address (reply only): a unicast global or unique-local one
		 * with its prefix, or nothing at all. */
		if (!m.u.hello.mtu || m.family == 0) {
			if (m.family != 0)
				return -CTL_BAD_FAMILY;
			if (m.u.hello.prefix_len6 != 0 || !zero16(m.rip))
				return -CTL_BAD_ADDR;
		} else if (m.family != AF_INET6) {
			return -CTL_BAD_FAMILY;
		} else if ((rc = remote(&m)) < 0 || m.u.hello.prefix_len6 < 1 ||
			   m.u.hello.prefix_len6 > 128) {
			return -CTL_BAD_ADDR;
		}
		break;
	default:
		break;
	}
	if (rc < 0)
		return rc;
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
	case CTL_BAD_FAMILY:  return "ctl_bad_family";
	case CTL_BAD_ADDR:    return "ctl_bad_addr";
	default:                  return "ctl_unknown_error";
	}
}
