/* A failed exec while another thread closes a socket's number and opens something else
 * there (run under ulsrun by test_shim.py).
 *
 *   execundo ROUNDS PORT [MIN_SEEN MIN_AT_X MAX_ROUNDS]
 *
 * With the last three, rounds go on past ROUNDS until MIN_SEEN of them saw the thread act
 * during exec and MIN_AT_X at X, up to MAX_ROUNDS and EXTEND_MS: how often the thread
 * lands inside exec's preparation is the scheduler's (on the relay at load 5, 2 of 40).
 *
 * Before exec the shim turns every socket that would survive it into a closed socket
 * under the same number and keeps a copy of the number's mirror; if exec fails it puts
 * the copy back (apps/preload/exec.c). POSIX leaves a process whose exec failed as it
 * was, so whatever its other threads did meanwhile stands: a number another thread
 * closed and reused must keep the new file, not get the old socket back over it.
 *
 * Each round puts a UDP socket bound to PORT+round at a low number X, below 120 other
 * UDP sockets (so that exec's preparation, which goes by number, is past X for a while),
 * and calls execve("/"), which passes the shim's access check and fails in the kernel
 * (EACCES). Meanwhile a thread waits until X is no longer the socket's mirror (the
 * preparation's closed socket is there), closes X and opens there, alternately,
 * /dev/null or a new UDP socket (the first after the close takes the closed socket's
 * memory, fdtab.c's pool). After the failed exec, X must be what the thread put there
 * (the same inode; for the socket, its port through getsockname), the other sockets
 * must be back (their ports), the first socket's port must be free again (its file was
 * finished), and no descriptor may be left over. Prints "ok rounds N seen S" (S: rounds
 * in which the thread acted while exec was in progress) and exits 0, else says what went
 * wrong and exits 1.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FILL 120
#define EXTEND_MS 150000   /* no round begins after this, past ROUNDS */

static int X;
static atomic_int go;           /* round number the thread is to act in, 0: none */
static atomic_bool done;        /* the thread acted (or gave up) in this round */
static atomic_bool quit;
static atomic_bool watching;   /* the thread is watching X (main execs then) */
static bool seen;
static int how;                 /* 0: close, open; 1: close, socket; 2: dup2 */
static ino_t put_ino, sock_ino;  /* what the thread put at X; the round's socket's */
static unsigned short put_port;
static int put_fd;               /* what the thread opened after closing X */

static int udp(unsigned short port)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

	if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(s);
		return -1;
	}
	return s;
}

static int port_of(int fd)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	if (getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		return -1;
	return ntohs(a.sin_port);
}

static ino_t ino_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) < 0 ? 0 : st.st_ino;
}

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* Put nfd at X. */
static void put_at_x(int nfd)
{
	if (nfd >= 0 && nfd != X) {
		dup2(nfd, X);
		close(nfd);
	}
}

static void *reuser(void *arg)
{
	(void)arg;
	for (;;) {
		while (!atomic_load(&go)) {
			if (atomic_load(&quit))
				return NULL;
			sched_yield();
		}
		ino_t was = sock_ino;
		long deadline = now_ms() + 2000;
		seen = false;
		atomic_store(&watching, true);
		while (now_ms() < deadline && !(seen = ino_of(X) != was))
			;
		if (seen && how == 2) {
			/* dup2 onto X: X itself, replaced at once. */
			int n = open("/dev/null", O_WRONLY);
			put_fd = n < 0 || dup2(n, X) < 0 ? -1 : X;
			close(n);
			put_port = 0;
			put_ino = ino_of(put_fd);
		} else if (seen) {
			/* close, then the lowest free number: X, unless exec's preparation took it
			 * meanwhile for a copy it keeps (then the thread's file is elsewhere). */
			close(X);
			put_fd = how == 1 ? udp(0) : open("/dev/null", O_WRONLY);
			put_port = how == 1 ? (unsigned short)port_of(put_fd) : 0;
			put_ino = ino_of(put_fd);
		}
		atomic_store(&go, 0);
		atomic_store(&done, true);
	}
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	if (argc != 3 && argc != 6)
		return 2;
	int rounds = atoi(argv[1]);
	unsigned short port = (unsigned short)atoi(argv[2]);
	int min_seen = argc == 6 ? atoi(argv[3]) : 0, min_at_x = argc == 6 ? atoi(argv[4]) : 0;
	int max_rounds = argc == 6 ? atoi(argv[5]) : rounds;
	long t0 = now_ms();
	if (rounds < 1 || max_rounds < rounds || port + max_rounds > 65535)
		return 2;
	int fill[FILL], fport[FILL];
	ino_t fino[FILL];

	X = open("/dev/null", O_WRONLY);  /* the lowest number, held until the rounds */
	for (int i = 0; i < FILL; i++) {
		fill[i] = udp(0);
		fport[i] = fill[i] < 0 ? -1 : port_of(fill[i]);
		fino[i] = ino_of(fill[i]);
		if (fill[i] < 0 || fport[i] <= 0 || fill[i] < X) {
			fprintf(stderr, "execundo: socket %d: %s\n", i, strerror(errno));
			return 1;
		}
	}
	pthread_t t;
	pthread_create(&t, NULL, reuser, NULL);
	int base = count_fds(), nseen = 0, at_x = 0, bad = 0;
	char *args[] = { "/", NULL };
	extern char **environ;

	int r;
	for (r = 1; !bad; r++) {
		if (r > rounds && (r > max_rounds || now_ms() - t0 > EXTEND_MS ||
				   (nseen >= min_seen && at_x >= min_at_x)))
			break;
		int u = udp((unsigned short)(port + r));
		if (u < 0) {
			fprintf(stderr, "execundo: round %d: socket at %d: %s\n", r, port + r,
				strerror(errno));
			return 1;
		}
		put_at_x(u);  /* X: the round's socket, named there alone */
		how = r % 3;
		sock_ino = ino_of(X);
		atomic_store(&done, false);
		atomic_store(&watching, false);
		atomic_store(&go, r);
		while (!atomic_load(&watching))
			sched_yield();
		int rc = execve("/", args, environ);
		int e = errno;
		while (!atomic_load(&done))
			sched_yield();
		if (rc != -1 || e != EACCES) {
			fprintf(stderr, "execundo: round %d: execve: %d %s\n", r, rc, strerror(e));
			bad = 1;
			break;
		}
		nseen += seen;
		if (!seen)
			continue;
		if (put_fd < 0) {
			fprintf(stderr, "execundo: round %d: the thread's open: %s\n", r,
				strerror(errno));
			bad = 1;
		} else if (how == 1 ? ino_of(put_fd) == sock_ino : ino_of(put_fd) != put_ino) {
			/* The thread's socket may have been met by exec's preparation itself (a
			 * socket that would survive exec): its mirror's inode is not known here,
			 * but it must not be the round's socket's. */
			fprintf(stderr, "execundo: round %d: %d is not the %s the thread put there "
				"(getsockname says port %d)\n", r, put_fd,
				how == 1 ? "socket" : "/dev/null", port_of(put_fd));
			bad = 1;
		} else if (how == 1 && port_of(put_fd) != put_port) {
			fprintf(stderr, "execundo: round %d: %d: port %d, the thread's socket has "
				"%d\n", r, put_fd, port_of(put_fd), put_port);
			bad = 1;
		} else if (how != 1 && (port_of(put_fd) >= 0 || errno != ENOTSOCK ||
					  write(put_fd, "x", 1) != 1)) {
			fprintf(stderr, "execundo: round %d: %d: not /dev/null to the program\n",
				r, put_fd);
			bad = 1;
		}
		at_x += put_fd == X;
		if (put_fd >= 0 && put_fd != X)
			close(put_fd);
		/* The other sockets are back, each under its own number (the kernel's file,
		 * not only the shim's table). */
		for (int i = 0; i < FILL && !bad; i++)
			if (ino_of(fill[i]) != fino[i] || port_of(fill[i]) != fport[i]) {
				fprintf(stderr, "execundo: round %d: socket %d at %d: inode %lu port "
					"%d, was %lu %d\n", r, i, fill[i],
					(unsigned long)ino_of(fill[i]), port_of(fill[i]),
					(unsigned long)fino[i], fport[i]);
				bad = 1;
			}
		/* The round's socket was closed by the thread: its port is free. */
		int again = udp((unsigned short)(port + r));
		if (again < 0) {
			fprintf(stderr, "execundo: round %d: port %d still taken: %s\n", r,
				port + r, strerror(errno));
			bad = 1;
		}
		close(again);
	}
	if (fcntl(X, F_GETFD) < 0)
		put_at_x(open("/dev/null", O_WRONLY));  /* as before the rounds */
	for (int i = 0; i < FILL && !bad; i++)
		if (port_of(fill[i]) != fport[i]) {
			fprintf(stderr, "execundo: socket %d at %d: port %d, was %d\n", i, fill[i],
				port_of(fill[i]), fport[i]);
			bad = 1;
		}
	int end = count_fds();
	if (!bad && end != base) {
		fprintf(stderr, "execundo: %d descriptors open, %d before the rounds\n", end, base);
		bad = 1;
	}
	atomic_store(&quit, true);
	pthread_join(t, NULL);
	if (bad)
		return 1;
	printf("ok rounds %d seen %d at_x %d\n", r - 1, nseen, at_x);
	return 0;
}
