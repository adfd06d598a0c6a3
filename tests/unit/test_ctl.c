/* netif/ctl/ctl.c: the decoder every control message from an untrusted peer goes through.
 * A message is accepted only whole, at its exact size, with our magic and version, a known
 * type and in-range fields for that type; anything else is refused with a reason and the
 * output is left untouched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <netinet/in.h>

#include "netif/conntab.h"
#include "netif/ctl/ctl.h"

static struct ctl_msg valid_bind(void)
{
	struct ctl_msg m;

	ctl_init(&m, CTL_BIND, 7);
	m.family = AF_INET;
	m.proto = IPPROTO_TCP;
	m.lport = 5001;
	return m;
}

static int check(const struct ctl_msg *m, struct ctl_msg *out)
{
	return ctl_check(m, sizeof(*m), out);
}

static void valid_bind_accepted_and_copied(void **state)
{
	struct ctl_msg m = valid_bind(), out;

	(void)state;
	assert_int_equal(check(&m, &out), 0);
	assert_memory_equal(&m, &out, sizeof(m));
}

static void truncated_message_refused_output_untouched(void **state)
{
	struct ctl_msg m = valid_bind(), out;

	(void)state;
	memset(&out, 0xa5, sizeof(out));
	struct ctl_msg before = out;
	for (ssize_t n = 0; n < (ssize_t)sizeof(m); n++)
		assert_int_equal(ctl_check(&m, n, &out), -CTL_BAD_SIZE);
	assert_memory_equal(&out, &before, sizeof(out));
}

static void oversized_message_refused(void **state)
{
	uint8_t buf[CTL_MSG_SIZE + 16];
	struct ctl_msg m = valid_bind(), out;

	(void)state;
	memcpy(buf, &m, sizeof(m));
	assert_int_equal(ctl_check(buf, sizeof(buf), &out), -CTL_BAD_SIZE);
	assert_int_equal(ctl_check(&m, -1, &out), -CTL_BAD_SIZE);
	assert_int_equal(ctl_check(NULL, sizeof(m), &out), -CTL_BAD_SIZE);
}

static void wrong_magic_refused(void **state)
{
	struct ctl_msg m = valid_bind(), out;

	(void)state;
	m.magic ^= 1;
	assert_int_equal(check(&m, &out), -CTL_BAD_MAGIC);
}

static void wrong_version_refused(void **state)
{
	struct ctl_msg m = valid_bind(), out;

	(void)state;
	m.version = CTL_VERSION + 1;
	assert_int_equal(check(&m, &out), -CTL_BAD_VERSION);
	m.version = 0;
	assert_int_equal(check(&m, &out), -CTL_BAD_VERSION);
}

static void unknown_type_refused(void **state)
{
	struct ctl_msg m = valid_bind(), out;

	(void)state;
	m.type = 0;
	assert_int_equal(check(&m, &out), -CTL_BAD_TYPE);
	m.type = CTL_TYPE_MAX;
	assert_int_equal(check(&m, &out), -CTL_BAD_TYPE);
	m.type = 0xffff;
	assert_int_equal(check(&m, &out), -CTL_BAD_TYPE);
}

static void bind_with_unknown_protocol_refused(void **state)
{
	struct ctl_msg m = valid_bind(), out;

	(void)state;
	m.proto = IPPROTO_ICMP;
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
}

static void listen_needs_tcp_and_a_port(void **state)
{
	struct ctl_msg m, out;

	(void)state;
	ctl_init(&m, CTL_LISTEN, 1);
	m.family = AF_INET6;
	m.proto = IPPROTO_TCP;
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);  /* port 0 */
	m.lport = 80;
	assert_int_equal(check(&m, &out), 0);
	m.proto = IPPROTO_UDP;
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
}

static void connect_needs_a_remote_address_and_port(void **state)
{
	struct ctl_msg m, out;

	(void)state;
	ctl_init(&m, CTL_CONNECT, 1);
	m.proto = IPPROTO_TCP;
	m.rport = 80;
	assert_int_equal(check(&m, &out), -CTL_BAD_FAMILY);  /* no family */
	m.family = AF_INET;
	assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);  /* rip 0 */
	ctl_set_rip4(&m, htonl(0xc6120064));
	assert_int_equal(check(&m, &out), 0);
	m.rport = 0;
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
}

static void release_needs_a_full_tuple(void **state)
{
	struct ctl_msg m, out;

	(void)state;
	ctl_init(&m, CTL_RELEASE, 1);
	m.proto = IPPROTO_TCP;
	ctl_set_rip4(&m, htonl(0xc6120064));
	m.rport = 80;
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);  /* lport 0 */
	m.lport = 40000;
	assert_int_equal(check(&m, &out), 0);
}

/* HANDOFF and CLAIM name one TCP connection; the nonce is ulsd's to check (replies do
 * not carry it). */
static void handoff_and_claim_need_a_full_tcp_tuple(void **state)
{
	struct ctl_msg m, out;
	enum ctl_type types[2] = { CTL_HANDOFF, CTL_CLAIM };

	(void)state;
	for (int i = 0; i < 2; i++) {
		ctl_init(&m, types[i], 1);
		m.proto = IPPROTO_TCP;
		m.lport = 40000;
		ctl_set_rip4(&m, htonl(0xc6120064));
		assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);  /* rport 0 */
		m.rport = 80;
		m.proto = IPPROTO_UDP;
		assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
		m.proto = IPPROTO_TCP;
		m.u.handoff.nonce = 42;
		assert_int_equal(check(&m, &out), 0);
		assert_true(out.u.handoff.nonce == 42);
	}
}

/* Version 3: a port's messages say the socket's family, and CTL_F_V6ONLY only for an
 * AF_INET6 socket; anything else is ctl_bad_family. */
static void port_messages_need_a_family(void **state)
{
	struct ctl_msg m = valid_bind(), out;
	enum ctl_type types[4] = { CTL_BIND, CTL_UNBIND, CTL_LISTEN, CTL_ACCEPTING };

	(void)state;
	for (int i = 0; i < 4; i++) {
		m.type = (uint16_t)types[i];
		m.family = AF_INET;
		m.flags = 0;
		assert_int_equal(check(&m, &out), 0);
		m.family = AF_INET6;
		assert_int_equal(check(&m, &out), 0);
		m.flags = CTL_F_V6ONLY;
		assert_int_equal(check(&m, &out), 0);
		m.family = AF_INET;
		assert_int_equal(check(&m, &out), -CTL_BAD_FAMILY);
		m.flags = 0;
		m.family = 0;
		assert_int_equal(check(&m, &out), -CTL_BAD_FAMILY);
		m.family = AF_UNIX;
		assert_int_equal(check(&m, &out), -CTL_BAD_FAMILY);
	}
}

/* A connection's remote fits its family: AF_INET with a v4-mapped address not 0.0.0.0;
 * AF_INET6 with a unicast one that is neither v4-mapped, nor ::, nor multicast (RFC 4291
 * §2.5.2, §2.5.5.2, §2.7). Every type that names a connection checks it. */
static void remote_address_must_fit_its_family(void **state)
{
	enum ctl_type types[6] = { CTL_CONNECT, CTL_ACCEPTED, CTL_RELEASE, CTL_HANDOFF,
				   CTL_CLAIM, CTL_STAT_CONN };
	const uint8_t v6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 0x64 };
	const uint8_t mcast[16] = { 0xff, 0x02, [15] = 1 };
	const uint8_t zero[16] = { 0 };
	struct ctl_msg m, out;

	(void)state;
	for (int i = 0; i < 6; i++) {
		ctl_init(&m, types[i], 1);
		m.proto = IPPROTO_TCP;
		m.lport = 40000;
		m.rport = 80;
		m.u.conn.datapath = CTL_DP_RELAY;
		m.u.conn.state = ULS_TCP_ESTABLISHED;
		ctl_set_rip6(&m, v6);
		memcpy(m.u.conn.lip, (const uint8_t[16]){ 0x20, 0x01, 0x0d, 0xb8, [15] = 1 }, 16);
		assert_int_equal(check(&m, &out), 0);
		assert_memory_equal(out.rip, v6, 16);
		ctl_set_rip6(&m, mcast);
		assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);
		ctl_set_rip6(&m, zero);
		assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);
		m.family = AF_INET6;
		ctl_addr_set4(m.rip, htonl(0xc6120064));  /* v4-mapped under AF_INET6 */
		assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);
		m.family = AF_INET;
		memcpy(m.rip, v6, 16);                    /* not mapped under AF_INET */
		assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);
		ctl_set_rip4(&m, 0);
		assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);
		m.family = 0;
		assert_int_equal(check(&m, &out), -CTL_BAD_FAMILY);
	}
}

static struct ctl_msg valid_conn(void);

/* STAT_CONN's local address is of the remote's family. */
static void stat_conn_local_address_matches_the_family(void **state)
{
	struct ctl_msg m = valid_conn(), out;

	(void)state;
	assert_int_equal(check(&m, &out), 0);
	memset(m.u.conn.lip, 0, 16);
	assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);
	memcpy(m.u.conn.lip, (const uint8_t[16]){ 0x20, 0x01, 0x0d, 0xb8, [15] = 1 }, 16);
	assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);  /* IPv6 local, IPv4 remote */
}

/* HELLO's reply says the node's IPv6 address (family AF_INET6, a unicast address and a
 * prefix of 1-128) or nothing (family 0, zeros); a request carries no address. */
static void hello_ipv6_address_checked(void **state)
{
	struct ctl_msg m, out;
	const uint8_t v6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, [15] = 1 };

	(void)state;
	ctl_init(&m, CTL_HELLO, 1);
	assert_int_equal(check(&m, &out), 0);
	ctl_set_rip6(&m, v6);
	assert_int_equal(check(&m, &out), -CTL_BAD_FAMILY);  /* a request with an address */
	ctl_init(&m, CTL_HELLO, 1);
	m.u.hello.mtu = 1500;
	m.u.hello.prefix_len = 24;
	m.u.hello.datapath = CTL_DP_RELAY;
	assert_int_equal(check(&m, &out), 0);               /* a node without IPv6 */
	ctl_set_rip6(&m, v6);
	assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);   /* no prefix */
	m.u.hello.prefix_len6 = 64;
	assert_int_equal(check(&m, &out), 0);
	assert_memory_equal(out.rip, v6, 16);
	assert_int_equal(out.u.hello.prefix_len6, 64);
	m.u.hello.prefix_len6 = 129;
	assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);
	m.u.hello.prefix_len6 = 64;
	m.family = AF_INET;
	assert_int_equal(check(&m, &out), -CTL_BAD_FAMILY);
	m.family = 0;
	assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);   /* an address without a family */
}

/* The header's layout (docs/control-protocol.md): the record stays 128 bytes. */
static void version_3_layout(void **state)
{
	(void)state;
	assert_int_equal(CTL_VERSION, 3);
	assert_int_equal(sizeof(struct ctl_msg), 128);
	assert_int_equal(offsetof(struct ctl_msg, rport), 20);
	assert_int_equal(offsetof(struct ctl_msg, family), 22);
	assert_int_equal(offsetof(struct ctl_msg, rip), 24);
	assert_int_equal(offsetof(struct ctl_msg, u), 40);
	assert_int_equal(offsetof(struct ctl_hello, prefix_len6), 50);
	assert_int_equal(offsetof(struct ctl_conn, lip), 56);
	assert_true(sizeof(struct ctl_hello) <= sizeof(((struct ctl_msg *)0)->u));
}

static void counter_name_without_terminator_refused(void **state)
{
	struct ctl_msg m, out;

	(void)state;
	ctl_init(&m, CTL_STAT_COUNTER, 1);
	memset(m.u.counter.name, 'x', sizeof(m.u.counter.name));
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
	m.u.counter.name[5] = '\0';
	assert_int_equal(check(&m, &out), 0);
}

static void hello_reply_with_bad_mtu_or_prefix_refused(void **state)
{
	struct ctl_msg m, out;

	(void)state;
	ctl_init(&m, CTL_HELLO, 1);
	assert_int_equal(check(&m, &out), 0);  /* a request carries no node facts */
	m.u.hello.mtu = 1500;
	m.u.hello.prefix_len = 24;
	m.u.hello.datapath = CTL_DP_RELAY;
	assert_int_equal(check(&m, &out), 0);
	m.u.hello.mtu = 67;
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
	m.u.hello.mtu = 1500;
	m.u.hello.prefix_len = 31;
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
}

static void hello_reply_without_a_data_path_refused(void **state)
{
	struct ctl_msg m, out;

	(void)state;
	ctl_init(&m, CTL_HELLO, 1);
	m.u.hello.mtu = 1500;
	m.u.hello.prefix_len = 24;
	m.u.hello.datapath = CTL_DP_DIRECT;
	assert_int_equal(check(&m, &out), 0);
	m.u.hello.datapath = 0;
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
	m.u.hello.datapath = 3;
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
}

static void hello_reply_with_unterminated_interface_name_refused(void **state)
{
	struct ctl_msg m, out;

	(void)state;
	ctl_init(&m, CTL_HELLO, 1);
	m.u.hello.mtu = 1500;
	m.u.hello.prefix_len = 24;
	m.u.hello.datapath = CTL_DP_RELAY;
	memset(m.u.hello.ifname, 'a', sizeof(m.u.hello.ifname));
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
	m.u.hello.ifname[15] = '\0';
	assert_int_equal(check(&m, &out), 0);
	assert_int_equal(offsetof(struct ctl_msg, u.hello.ifindex), 40 + 52);
	assert_int_equal(offsetof(struct ctl_msg, u.hello.ifname), 40 + 56);
}

static void hello_request_offering_rings_needs_two_descriptors(void **state)
{
	struct ctl_msg m, out;

	(void)state;
	ctl_init(&m, CTL_HELLO, 1);
	m.u.hello.flags = CTL_HELLO_F_RINGS;
	m.u.hello.ring_fd[0] = 900;
	m.u.hello.ring_fd[1] = 901;
	assert_int_equal(check(&m, &out), 0);
	assert_int_equal(out.u.hello.ring_fd[1], 901);
	m.u.hello.ring_fd[1] = -1;
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
}

/* The multishot read is asked for the rings a request offers: not without them. */
static void hello_request_asking_the_multishot_read_needs_rings(void **state)
{
	struct ctl_msg m, out;

	(void)state;
	ctl_init(&m, CTL_HELLO, 1);
	m.u.hello.flags = CTL_HELLO_F_RINGS | CTL_HELLO_F_MSHOT;
	m.u.hello.ring_fd[0] = 900;
	m.u.hello.ring_fd[1] = 901;
	assert_int_equal(check(&m, &out), 0);
	assert_int_equal(out.u.hello.flags, CTL_HELLO_F_RINGS | CTL_HELLO_F_MSHOT);
	m.u.hello.flags = CTL_HELLO_F_MSHOT;
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
}

static struct ctl_msg valid_conn(void)
{
	struct ctl_msg m;

	ctl_init(&m, CTL_STAT_CONN, 1);
	m.proto = IPPROTO_TCP;
	m.lport = 5001;
	ctl_set_rip4(&m, 0x020012c6);
	ctl_addr_set4(m.u.conn.lip, 0x010012c6);
	m.rport = 40000;
	m.u.conn.pid = 1234;
	m.u.conn.datapath = CTL_DP_DIRECT;
	m.u.conn.state = ULS_TCP_ESTABLISHED;
	m.u.conn.snd_wscale = m.u.conn.rcv_wscale = 7;
	return m;
}

/* ulsstat decodes ulsd's answer with the same checker: a connection record names a whole
 * TCP tuple, a state a connection can be in (not CLOSED or LISTEN), a data path and window
 * shifts of at most 14 (RFC 7323 §2.3). */
static void connection_record_needs_a_tuple_a_state_and_a_data_path(void **state)
{
	struct ctl_msg m = valid_conn(), out;

	(void)state;
	assert_int_equal(check(&m, &out), 0);
	m.u.conn.state = ULS_TCP_TIME_WAIT;
	assert_int_equal(check(&m, &out), 0);
	static const struct { size_t off, len; unsigned v; } bad[] = {
		{ offsetof(struct ctl_msg, proto), 1, IPPROTO_UDP },
		{ offsetof(struct ctl_msg, lport), 2, 0 },
		{ offsetof(struct ctl_msg, rport), 2, 0 },
		{ offsetof(struct ctl_msg, u.conn.state), 1, ULS_TCP_LISTEN },
		{ offsetof(struct ctl_msg, u.conn.state), 1, ULS_TCP_STATE_COUNT },
		{ offsetof(struct ctl_msg, u.conn.datapath), 1, 0 },
		{ offsetof(struct ctl_msg, u.conn.snd_wscale), 1, 15 },
		{ offsetof(struct ctl_msg, u.conn.rcv_wscale), 1, 255 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ctl_msg b = valid_conn();
		uint32_t v = bad[i].v;
		memcpy((uint8_t *)&b + bad[i].off, &v, bad[i].len);  /* little-endian host */
		assert_int_equal(check(&b, &out), -CTL_BAD_FIELD);
	}
	/* A zero remote address is refused as not fitting its family (version 3). */
	struct ctl_msg b = valid_conn();
	memset(b.rip + 12, 0, 4);
	assert_int_equal(check(&b, &out), -CTL_BAD_ADDR);
}

static void process_record_needs_a_data_path_and_consistent_counts(void **state)
{
	struct ctl_msg m, out;

	(void)state;
	ctl_init(&m, CTL_STAT_PROC, 1);
	m.u.proc.datapath = CTL_DP_RELAY;
	m.u.proc.table = CTL_TABLE_OK;
	m.u.proc.connections = 3;
	m.u.proc.listed = 3;
	assert_int_equal(check(&m, &out), 0);
	m.u.proc.listed = 4;
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
	m.u.proc.listed = 3;
	m.u.proc.table = CTL_TABLE_MAX;
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
	m.u.proc.table = CTL_TABLE_TORN;
	m.u.proc.datapath = 9;
	assert_int_equal(check(&m, &out), -CTL_BAD_FIELD);
}

static void error_names_unique_and_named(void **state)
{
	(void)state;
	for (int i = CTL_BAD_SIZE; i < CTL_ERROR_END; i++) {
		assert_true(strncmp(ctl_error_name(i), "ctl_", 4) == 0);
		assert_string_equal(ctl_error_name(-i), ctl_error_name(i));
		for (int j = CTL_BAD_SIZE; j < i; j++)
			assert_string_not_equal(ctl_error_name(i), ctl_error_name(j));
	}
	assert_string_equal(ctl_error_name(999), "ctl_unknown_error");
}

/* A refusal is never read as an errno: every reason lies above Linux's MAX_ERRNO (4095). */
static void refusal_reasons_do_not_overlap_errno(void **state)
{
	struct ctl_msg out;
	(void)state;

	assert_true(CTL_BAD_SIZE > 4095);
	assert_true(ctl_check(NULL, 0, &out) < -4095);
}

/* ROUTER6: the request names nothing; the answer names a unicast router, link-local
 * ones included (RFC 4861 §8.3), never multicast, unspecified or v4-mapped. */
static void router6_request_names_nothing_answer_names_a_unicast_router(void **state)
{
	static const uint8_t ll[16] = { 0xfe, 0x80, [15] = 1 };
	static const uint8_t global[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 0xfe };
	static const uint8_t mcast[16] = { 0xff, 0x02, [15] = 2 };
	static const uint8_t mapped[16] = { [10] = 0xff, [11] = 0xff, [12] = 198, [15] = 1 };
	struct ctl_msg m, out;

	(void)state;
	ctl_init(&m, CTL_ROUTER6, 3);
	assert_int_equal(check(&m, &out), 0);
	m.rip[15] = 1;
	assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);  /* a request with an address */
	ctl_init(&m, CTL_ROUTER6, 3);
	ctl_set_rip6(&m, ll);
	assert_int_equal(check(&m, &out), 0);
	ctl_set_rip6(&m, global);
	assert_int_equal(check(&m, &out), 0);
	ctl_set_rip6(&m, mcast);
	assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);
	ctl_set_rip6(&m, mapped);
	assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);
	memset(m.rip, 0, 16);
	assert_int_equal(check(&m, &out), -CTL_BAD_ADDR);
	ctl_set_rip6(&m, ll);
	m.family = AF_INET;  /* a router of IPv6 only */
	assert_int_equal(check(&m, &out), -CTL_BAD_FAMILY);
	m.family = 7;
	assert_int_equal(check(&m, &out), -CTL_BAD_FAMILY);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(valid_bind_accepted_and_copied),
		cmocka_unit_test(truncated_message_refused_output_untouched),
		cmocka_unit_test(oversized_message_refused),
		cmocka_unit_test(wrong_magic_refused),
		cmocka_unit_test(wrong_version_refused),
		cmocka_unit_test(unknown_type_refused),
		cmocka_unit_test(bind_with_unknown_protocol_refused),
		cmocka_unit_test(listen_needs_tcp_and_a_port),
		cmocka_unit_test(connect_needs_a_remote_address_and_port),
		cmocka_unit_test(release_needs_a_full_tuple),
		cmocka_unit_test(handoff_and_claim_need_a_full_tcp_tuple),
		cmocka_unit_test(counter_name_without_terminator_refused),
		cmocka_unit_test(port_messages_need_a_family),
		cmocka_unit_test(remote_address_must_fit_its_family),
		cmocka_unit_test(stat_conn_local_address_matches_the_family),
		cmocka_unit_test(hello_ipv6_address_checked),
		cmocka_unit_test(router6_request_names_nothing_answer_names_a_unicast_router),
		cmocka_unit_test(version_3_layout),
		cmocka_unit_test(connection_record_needs_a_tuple_a_state_and_a_data_path),
		cmocka_unit_test(process_record_needs_a_data_path_and_consistent_counts),
		cmocka_unit_test(hello_reply_with_bad_mtu_or_prefix_refused),
		cmocka_unit_test(hello_reply_without_a_data_path_refused),
		cmocka_unit_test(hello_reply_with_unterminated_interface_name_refused),
		cmocka_unit_test(hello_request_offering_rings_needs_two_descriptors),
		cmocka_unit_test(hello_request_asking_the_multishot_read_needs_rings),
		cmocka_unit_test(error_names_unique_and_named),
		cmocka_unit_test(refusal_reasons_do_not_overlap_errno),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
