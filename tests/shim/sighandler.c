/* A signal handler that uses sockets while the thread it interrupted is inside socket
 * calls of its own (run under ulsrun by test_shim.py).
 *
 *   sighandler PEER_IP TCP_ECHO_PORT UDP_ECHO_PORT SECONDS
 *
 * The main thread streams to the TCP echo and reads it back; an interval timer fires
 * every millisecond, and its handler sends a datagram on a UDP socket. If a handler could
 * run while its thread held the stack's lock, it would deadlock on its first sendto. Exit
 * 0 and "handled N echoed M" when both went on, 1 otherwise.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int udp;
static struct sockaddr_in udp_peer;
static volatile sig_atomic_t handled;

static void on_alarm(int sig)
{
	int saved = errno;
	char c = 'u';

	(void)sig;
	if (sendto(udp, &c, 1, MSG_DONTWAIT, (struct sockaddr *)&udp_peer, sizeof(udp_peer)) == 1)
		handled++;
	errno = saved;
}

int main(int argc, char **argv)
{
	struct sockaddr_in tcp_peer = { .sin_family = AF_INET };
	char out[4096], in[4096];
	long echoed = 0;

	if (argc != 5)
		return 2;
	udp_peer.sin_family = AF_INET;
	if (inet_pton(AF_INET, argv[1], &tcp_peer.sin_addr) != 1)
		return 2;
	udp_peer.sin_addr = tcp_peer.sin_addr;
	tcp_peer.sin_port = htons((unsigned short)atoi(argv[2]));
	udp_peer.sin_port = htons((unsigned short)atoi(argv[3]));
	int seconds = atoi(argv[4]);

	int tcp = socket(AF_INET, SOCK_STREAM, 0);
	udp = socket(AF_INET, SOCK_DGRAM, 0);
	if (tcp < 0 || udp < 0 || connect(tcp, (struct sockaddr *)&tcp_peer, sizeof(tcp_peer)) < 0) {
		perror("sighandler: setup");
		return 1;
	}
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 1000 }, { 0, 1000 } };
	setitimer(ITIMER_REAL, &it, NULL);

	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(out, 'x', sizeof(out));
	do {
		if (send(tcp, out, sizeof(out), 0) != (ssize_t)sizeof(out)) {
			perror("sighandler: send");
			return 1;
		}
		size_t got = 0;
		while (got < sizeof(out)) {
			ssize_t n = recv(tcp, in + got, sizeof(in) - got, 0);
			if (n <= 0) {
				perror("sighandler: recv");
				return 1;
			}
			got += (size_t)n;
		}
		echoed++;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - t0.tv_sec < seconds);
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	printf("handled %d echoed %ld\n", (int)handled, echoed);
	return handled > 100 && echoed > 10 ? 0 : 1;
}
