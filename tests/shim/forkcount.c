/* fork while another thread is blocked in recv() on a socket (run under ulsrun by
 * test_shim.py).
 *
 *   forkcount PORT
 *
 * The shim counts a call in its socket's file while it runs (apps/preload/fdtab.c), and
 * fork's prepare handler does not wait for calls to end: the blocked recv's count is
 * copied into the child, where no thread will ever drop it. The child uses the socket
 * (getsockname: it becomes the child's own) and closes it; the parent closes its copy
 * once its recv has timed out, and tells the child (a pipe), which binds the port again:
 * that bind fails if the child's file was never finished (its socket never closed; as
 * on Linux, the port is free only when both processes have closed it). Prints
 * "ok" and exits 0, else says what went wrong and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int s;

static int bound(unsigned short port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Blocked in recv() until the receive timeout (nothing is sent). */
static void *receiver(void *arg)
{
	char buf[16];

	(void)arg;
	recv(s, buf, sizeof(buf), 0);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	unsigned short port = (unsigned short)atoi(argv[1]);
	s = bound(port);
	struct timeval tv = { .tv_sec = 2 };
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		perror("forkcount: socket");
		return 1;
	}
	int go[2];
	if (pipe(go) < 0) {
		perror("forkcount: pipe");
		return 1;
	}
	pthread_t t;
	pthread_create(&t, NULL, receiver, NULL);
	struct timespec ts = { .tv_nsec = 300 * 1000 * 1000 };
	nanosleep(&ts, NULL);  /* the receiver is inside recv() by now */
	pid_t pid = fork();
	if (pid < 0) {
		perror("forkcount: fork");
		return 1;
	}
	if (pid == 0) {
		struct sockaddr_in a;
		socklen_t len = sizeof(a);
		if (getsockname(s, (struct sockaddr *)&a, &len) < 0 || ntohs(a.sin_port) != port) {
			fprintf(stderr, "forkcount: child: getsockname: %s\n", strerror(errno));
			_exit(1);
		}
		close(s);
		char c;
		if (read(go[0], &c, 1) != 1) {
			fprintf(stderr, "forkcount: child: no word from the parent\n");
			_exit(1);
		}
		int again = bound(port);
		if (again < 0) {
			fprintf(stderr, "forkcount: child: port %u still bound after close (%s)\n",
				port, strerror(errno));
			_exit(1);
		}
		close(again);
		_exit(0);
	}
	pthread_join(t, NULL);
	close(s);
	if (write(go[1], "x", 1) != 1) {
		perror("forkcount: write");
		return 1;
	}
	int status;
	if (waitpid(pid, &status, 0) != pid) {
		perror("forkcount: waitpid");
		return 1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "forkcount: child failed (status %#x)\n", status);
		return 1;
	}
	printf("ok\n");
	return 0;
}
