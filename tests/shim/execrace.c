/* exec while another thread closes a passed connection and reuses its memory (run under
 * ulsrun by test_shim.py).
 *
 *   execrace PEERIP PORT
 *
 * Before exec the shim exports every connection that stays open, descriptor by
 * descriptor (apps/preload/exec.c), and knows one it already exported by its file's
 * pointer; files are type-stable memory (fdtab.c), so a file another thread closed
 * meanwhile may come back as the next socket at the same address. Here:
 *
 *   - the parent connects c to PEERIP:PORT (an echo service) at descriptor 20 and forks;
 *     the child inherits it unclaimed, and the parent keeps its copy open, so the child's
 *     exec preparation waits at descriptor 20 for a claim that never comes (up to its 2 s);
 *   - the child connects f (a low descriptor A, the first the preparation exports) and
 *     names it 30 too (dup2), then execs itself ("after" mode) while a thread of it waits
 *     until A holds another file than before exec, the closed socket exec puts there
 *     (the preparation is past A and waiting at 20), closes A and 30 (f's last numbers), and connects a new
 *     socket g, which it names 30; g's local port goes to the new program through a pipe;
 *   - the new program must find g's connection at 30: its local port, and an echo.
 *
 * Without the preparation's holds on f (exec_prepare's and export_of's; either one keeps
 * it), f is finished by those closes, g takes its memory, and descriptor 30 is passed as
 * f's export (or the export of a closed socket): the new program finds another port
 * there, or no connection. Prints
 * "ok PORT" and exits 0 (the parent, with the child's status), else says what went
 * wrong and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define INHERITED_FD 20
#define SECOND_FD 30

static struct sockaddr_in peer;
static int fd_a, report_fd;
static struct stat a_before;  /* f's file at A, taken before exec begins */

static int connected(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);

	if (s < 0)
		return -1;
	if (connect(s, (struct sockaddr *)&peer, sizeof(peer)) < 0) {
		close(s);
		return -1;
	}
	return s;
}

static int local_port(int s)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	if (getsockname(s, (struct sockaddr *)&a, &len) < 0 || a.sin_family != AF_INET)
		return -1;
	return ntohs(a.sin_port);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The racing thread: once exec's preparation has put its closed socket at A (fstat sees
 * another file there than main saw before exec: the preparation is past A), f's numbers
 * are closed and g made. The file to compare with is main's, taken before the thread
 * exists: the preparation reaches A within microseconds of exec's call, often before a
 * new thread first runs, and a thread that took its own "before" then saw the closed
 * socket already, waited for a change that never came, and lost the round to exec (the
 * "no word from the racing thread" of stop 31, 10 of 15 runs on the relay path at load
 * 20-35). */
static void *racer(void *arg)
{
	struct stat now;
	char line[32];
	int port = -1;

	(void)arg;
	for (int i = 0; i < 3000; i++) {  /* bounded: 3000 sleeps of 1 ms or more */
		if (fstat(fd_a, &now) < 0 || now.st_ino != a_before.st_ino ||
		    now.st_dev != a_before.st_dev)
			break;
		sleep_ms(1);
	}
	close(fd_a);
	close(SECOND_FD);
	int g = connected();
	if (g < 0)
		goto out;
	port = local_port(g);
	if (dup2(g, SECOND_FD) < 0)
		port = -1;
	close(g);
out:
	snprintf(line, sizeof(line), "%d\n", port);
	ssize_t n = write(report_fd, line, strlen(line));
	(void)n;
	return NULL;
}

/* The new program: descriptor 30 must be g's connection. */
static int after(int rfd)
{
	char line[32] = { 0 };
	struct pollfd p = { .fd = rfd, .events = POLLIN };

	if (poll(&p, 1, 5000) != 1 || read(rfd, line, sizeof(line) - 1) <= 0) {
		fprintf(stderr, "execrace: no word from the racing thread\n");
		return 1;
	}
	int want = atoi(line);
	if (want <= 0) {
		fprintf(stderr, "execrace: the racing thread failed (%s)\n", line);
		return 1;
	}
	int got = local_port(SECOND_FD);
	if (got != want) {
		fprintf(stderr, "execrace: descriptor %d has local port %d (%s), g had %d\n",
			SECOND_FD, got, got < 0 ? strerror(errno) : "another connection", want);
		return 1;
	}
	char buf[8];
	if (send(SECOND_FD, "race", 4, 0) != 4 || recv(SECOND_FD, buf, 4, MSG_WAITALL) != 4 ||
	    memcmp(buf, "race", 4) != 0) {
		fprintf(stderr, "execrace: no echo on descriptor %d: %s\n", SECOND_FD,
			strerror(errno));
		return 1;
	}
	printf("ok %d\n", got);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "after"))
		return after(atoi(argv[2]));
	if (argc != 3)
		return 2;
	peer.sin_family = AF_INET;
	peer.sin_port = htons((unsigned short)atoi(argv[2]));
	if (inet_pton(AF_INET, argv[1], &peer.sin_addr) != 1)
		return 2;
	int c = connected();
	if (c < 0 || dup2(c, INHERITED_FD) != INHERITED_FD) {
		perror("execrace: connect");
		return 1;
	}
	close(c);
	pid_t pid = fork();
	if (pid < 0) {
		perror("execrace: fork");
		return 1;
	}
	if (pid > 0) {
		/* Keeps its copy of c until the child is done: the child's claim waits. */
		int st;
		for (int i = 0; i < 200 && waitpid(pid, &st, WNOHANG) == 0; i++)
			sleep_ms(50);
		if (waitpid(pid, &st, WNOHANG) == 0) {
			fprintf(stderr, "execrace: the child did not end in 10 s\n");
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return 1;
		}
		return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	}
	fd_a = connected();
	int pr[2];
	if (fd_a < 0 || fd_a >= INHERITED_FD || dup2(fd_a, SECOND_FD) != SECOND_FD ||
	    pipe(pr) < 0 || fstat(fd_a, &a_before) < 0) {
		fprintf(stderr, "execrace: child setup failed (A = %d)\n", fd_a);
		_exit(1);
	}
	report_fd = pr[1];
	char rfd[16];
	snprintf(rfd, sizeof(rfd), "%d", pr[0]);
	pthread_t t;
	pthread_create(&t, NULL, racer, NULL);
	execl("/proc/self/exe", "execrace", "after", rfd, (char *)NULL);
	perror("execrace: exec");
	_exit(1);
}
