/* fork and exec under the shim (the rules are in docs/compatibility.md).
 *
 * fork: libuls empties the child's stack (stack/fork.c); here every socket the child
 * inherited is adopted on its first use (a call on it, or being watched by poll, select
 * or epoll): libuls builds the child's own socket and its mirror is put under the same
 * descriptor numbers, so the child's readiness is no longer the parent's. A connection
 * is claimed: it moves to the child once the parent has closed its copy
 * (stack/handoff.c).
 *
 * exec: the new program cannot have the old stack. Sockets that stay open across exec
 * (no FD_CLOEXEC) keep their numbers but become closed sockets (reads give end-of-file,
 * writes EPIPE), never a raw view of the mirror; and the new program gets libuls again
 * for its own sockets (LD_PRELOAD and ULS_CTL are put back if its environment lost them).
 */
#include "shim.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uls.h"

static unsigned generation;
static char *saved_preload, *saved_ctl;

static void prepare(void)
{
	shim__table_lock();
}

static void parent(void)
{
	shim__table_unlock();
}

static void child(void)
{
	generation++;
	shim__table_reset();
}

static void register_handlers(void)
{
	pthread_atfork(prepare, parent, child);
}

__attribute__((constructor)) static void shim_init(void)
{
	const char *p = getenv("LD_PRELOAD"), *c = getenv("ULS_CTL");

	shim__real_init();
	saved_preload = p ? strdup(p) : NULL;
	saved_ctl = c ? strdup(c) : NULL;
	shim__set_ctl(c);
}

/* Called once the process has a node: registered after libuls's own handlers, so that
 * fork takes the table lock first and libuls's core lock second (prepare handlers run
 * in reverse order), the order every other path takes them in. */
void shim__fork_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, register_handlers);
}

/* Closed sockets still owe their peers the last data and FIN: let the stack finish,
 * briefly, before the process is gone (uls_node_stop lingers at most 3 s). */
__attribute__((destructor)) static void shim_fini(void)
{
	if (shim__maxfd() >= 0)
		uls_node_stop();
}

/* Give the child its own socket behind every number naming f. */
int shim__adopt(int fd, struct shim_file *f)
{
	sigset_t old;
	int rc, nfd = -1;

	shim__table_lock();
	if (f->gen == generation) {
		shim__table_unlock();
		return 0;
	}
	shim__enter(&old);
	rc = uls_adopt(f->sd);
	if (rc == ULS_ADOPT_CLAIM) {
		/* A connection: it moves here once the parent has closed its copy. The wait
		 * is open to signals, like any blocking socket call. */
		shim__leave(&old);
		/* On a number of its own: fd itself is in the table, and libuls's calls on
		 * it would come back here. */
		int dfd = shim__real.fcntl(fd, F_DUPFD_CLOEXEC, 0);
		int state = dfd < 0 ? -ENOTCONN : uls_claim_wait(dfd);
		if (dfd >= 0)
			shim__real.close(dfd);
		shim__enter(&old);
		if (f->gen == generation) {
			/* A signal handler's call adopted it meanwhile. */
			if (state >= 0)
				shim__real.close(state);
			shim__leave(&old);
			shim__table_unlock();
			return 0;
		}
		rc = uls_claim(f->sd, state);
		if (rc == -EINTR) {
			shim__leave(&old);
			shim__table_unlock();
			return rc;  /* this call reports EINTR; the next one claims again */
		}
		/* A claim that failed leaves the socket not connected (ENOTCONN): the child
		 * still gets a mirror of its own, which shows it closed, instead of the
		 * parent's readiness. */
		if (rc < 0)
			rc = -ENOTCONN;
	}
	if (rc == 0 || rc == -ENOTCONN)
		nfd = uls_socket_fd(f->sd, SOCK_CLOEXEC);
	if (rc == 0 && f->active)
		uls_accepting(f->sd);
	shim__leave(&old);
	if (nfd >= 0) {
		int hi = shim__maxfd();
		for (int n = 0; n <= hi; n++) {
			if (!shim__table_at(n, f))
				continue;
			int cloexec = shim__real.fcntl(n, F_GETFD);
			shim__real.dup3(nfd, n, cloexec >= 0 && (cloexec & FD_CLOEXEC) ? O_CLOEXEC : 0);
		}
		shim__real.close(nfd);
		f->gen = generation;
	}
	shim__table_unlock();
	return rc == -ENOTCONN ? 0 : rc;
}

/* Before a call on fds, or before the kernel watches them. A listener watched counts as
 * one this process accepts on. */
void shim__adopt_set(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct shim_file *f = shim__get(fds[i]);
		if (!f)
			continue;
		if (f->gen != generation)
			shim__adopt(fds[i], f);
		if (f->listening && !f->active) {
			sigset_t old;
			f->active = true;
			shim__enter(&old);
			uls_accepting(f->sd);
			shim__leave(&old);
		}
		shim__put(f);
	}
}

unsigned shim__generation(void)
{
	return generation;
}

#define KEEP_MAX 256

struct exec_undo {
	int fd[KEEP_MAX], saved[KEEP_MAX];
	int n;
};

/* Turn every socket that would survive exec into a closed socket, keeping what is needed
 * to undo it if exec fails. Only kernel calls: after vfork this runs in the parent's
 * memory. */
static void exec_prepare(struct exec_undo *u)
{
	int hi = shim__maxfd();

	u->n = 0;
	for (int fd = 0; fd <= hi && u->n < KEEP_MAX; fd++) {
		if (!shim__is_ours(fd))
			continue;
		int fl = shim__real.fcntl(fd, F_GETFD);
		if (fl < 0 || (fl & FD_CLOEXEC))
			continue;
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
			continue;
		shim__real.close(sv[1]);
		int saved = shim__real.fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (saved >= 0 && shim__real.dup2(sv[0], fd) >= 0) {
			u->fd[u->n] = fd;
			u->saved[u->n++] = saved;
		} else if (saved >= 0) {
			shim__real.close(saved);
		}
		shim__real.close(sv[0]);
	}
}

static void exec_undo(struct exec_undo *u)
{
	int e = errno;

	for (int i = 0; i < u->n; i++) {
		shim__real.dup2(u->saved[i], u->fd[i]);
		shim__real.close(u->saved[i]);
	}
	errno = e;
}

/* The environment the new program gets: the caller's, plus LD_PRELOAD and ULS_CTL as
 * this program had them if the caller's lacks them. Returns envp itself when nothing is
 * missing, NULL if memory ran out. */
static char **with_shim_env(char *const envp[], char *extra[2])
{
	bool has_pre = false, has_ctl = false;
	size_t n = 0;

	extra[0] = extra[1] = NULL;
	for (; envp && envp[n]; n++) {
		has_pre |= strncmp(envp[n], "LD_PRELOAD=", 11) == 0;
		has_ctl |= strncmp(envp[n], "ULS_CTL=", 8) == 0;
	}
	if ((has_pre || !saved_preload) && (has_ctl || !saved_ctl))
		return (char **)envp;
	char **e = calloc(n + 3, sizeof(*e));
	if (!e)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		e[k++] = envp[i];
	if (!has_pre && saved_preload && asprintf(&extra[0], "LD_PRELOAD=%s", saved_preload) > 0)
		e[k++] = extra[0];
	if (!has_ctl && saved_ctl && asprintf(&extra[1], "ULS_CTL=%s", saved_ctl) > 0)
		e[k++] = extra[1];
	return e;
}

SHIM_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	struct exec_undo u;
	char *extra[2];

	shim__real_init();
	char **env = with_shim_env(envp, extra);
	if (!env)
		return shim__ret(-ENOMEM);
	exec_prepare(&u);
	int rc = shim__real.execve(path, argv, env);
	exec_undo(&u);
	if (env != envp)
		free(env);
	free(extra[0]);
	free(extra[1]);
	return rc;
}

extern char **environ;

SHIM_EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

/* execvp(3)'s search, so that the exec itself comes back here. */
SHIM_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	if (!*file)
		return shim__ret(-ENOENT);
	if (strchr(file, '/'))
		return execve(file, argv, envp);
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/bin:/usr/bin";
	size_t fl = strlen(file);
	int err = ENOENT;
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		size_t dl = (size_t)(end - p);
		char *full = malloc(dl + fl + 2);
		if (!full)
			return shim__ret(-ENOMEM);
		memcpy(full, p, dl);
		if (dl)
			full[dl++] = '/';
		memcpy(full + dl, file, fl + 1);
		execve(full, argv, envp);
		free(full);
		if (errno == EACCES)
			err = EACCES;
		else if (errno != ENOENT && errno != ENOTDIR)
			return -1;
		if (!*end)
			break;
		p = end;
	}
	return shim__ret(-err);
}

SHIM_EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* execl(3) and friends: gather the arguments and go through the calls above. */
static char **gather(const char *arg0, va_list ap, char ***envp)
{
	size_t n = 1, cap = 16;
	char **v = malloc(cap * sizeof(*v));

	if (!v)
		return NULL;
	v[0] = (char *)arg0;
	for (;;) {
		char *a = arg0 ? va_arg(ap, char *) : NULL;
		if (n + 1 >= cap) {
			char **nv = realloc(v, (cap *= 2) * sizeof(*v));
			if (!nv) {
				free(v);
				return NULL;
			}
			v = nv;
		}
		v[n++] = a;
		if (!a)
			break;
	}
	if (envp)
		*envp = va_arg(ap, char **);
	return v;
}

enum exec_kind { EXEC_PATH, EXEC_SEARCH, EXEC_ENV };

static int exec_args(enum exec_kind k, const char *file, const char *arg, va_list ap)
{
	char **envp = NULL;
	char **v = gather(arg, ap, k == EXEC_ENV ? &envp : NULL);

	if (!v)
		return shim__ret(-ENOMEM);
	int rc = k == EXEC_SEARCH ? execvpe(file, v, environ) :
				    execve(file, v, k == EXEC_ENV ? envp : environ);
	free(v);
	return rc;
}

SHIM_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	int rc = exec_args(EXEC_PATH, path, arg, ap);
	va_end(ap);
	return rc;
}

SHIM_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	int rc = exec_args(EXEC_SEARCH, file, arg, ap);
	va_end(ap);
	return rc;
}

SHIM_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	int rc = exec_args(EXEC_ENV, path, arg, ap);
	va_end(ap);
	return rc;
}
