/* exec under the shim (the rules are in docs/compatibility.md).
 *
 * The new program cannot have the old stack, but it can have the old connections. At
 * exec, each connected TCP socket that stays open (no FD_CLOEXEC) is exported: libuls
 * packs its state into a memfd and ulsd holds its frames for whoever presents the nonce
 * (stack/handoff.c). The memfd goes across exec at a descriptor of its own, named in
 * ULS_INHERIT ("PID;FD:MEMFD:NONBLOCK,...": exec keeps the process ID, so a program that
 * the new one starts in turn cannot take the list for its own); the socket's own numbers
 * become closed sockets
 * (reads give end-of-file, writes EPIPE), never a raw view of the mirror. The new
 * program's shim, as it loads, takes each connection over and puts it back under its
 * numbers. A program that does not load the shim (static, setuid) reads end-of-file, and
 * ulsd resets the connection after 5 s. Other sockets (listeners, UDP, unconnected) become
 * closed sockets. If exec fails, everything is put back, but for a number another thread
 * changed meanwhile (exec_undo). The new program also gets libuls for sockets of its own:
 * LD_PRELOAD and ULS_CTL are put back if its environment lost them.
 */
#include "shim.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uls.h"

#define KEEP_MAX 256
#define INHERIT_VAR "ULS_INHERIT"
#define CLAIM_WAIT_MS 2000  /* an inherited connection whose parent has not let go by then stays behind */

static char *saved_preload, *saved_ctl;

/* ---- After exec: take the connections over ------------------------------------------ */

struct passed {
	int fd, memfd, flags;  /* PASSED_NONBLOCK | PASSED_INET6 */
};
#define PASSED_NONBLOCK 1
#define PASSED_INET6 2     /* an AF_INET6 socket: its IPv4 peers stay v4-mapped */
#define PASSED_V6ONLY 4    /* with IPV6_V6ONLY set (getsockopt says so after exec too) */

/* A decimal field of at most INT32_MAX, then the separator sep (or the end if sep is
 * ','). Returns the value, or -1. */
static long field(const char **v, char sep)
{
	char *end;

	if (**v < '0' || **v > '9')
		return -1;
	long x = strtol(*v, &end, 10);
	if (x > INT32_MAX || (*end != sep && !(sep == ',' && !*end)))
		return -1;
	*v = *end ? end + 1 : end;
	return x;
}

/* "PID;FD:MEMFD:NONBLOCK,..." for this process. Entries that do not parse end the list,
 * with a message. */
static int parse_inherit(const char *v, struct passed *out, int max)
{
	int n = 0;
	long pid = field(&v, ';');

	if (pid != (long)getpid()) {
		if (pid < 0)
			fprintf(stderr, "ulstack: %s: bad list, connections passed across exec "
				"are lost\n", INHERIT_VAR);
		return 0;  /* another process's list: not ours to take */
	}
	while (*v && n < max) {
		long a = field(&v, ':'), b = a < 0 ? -1 : field(&v, ':'),
		     c = b < 0 ? -1 : field(&v, ',');
		if (a < 0 || b < 0 || c < 0 || c > (PASSED_NONBLOCK | PASSED_INET6 | PASSED_V6ONLY)) {
			fprintf(stderr, "ulstack: %s: bad entry, connections passed across exec "
				"are lost\n", INHERIT_VAR);
			return n;
		}
		out[n++] = (struct passed){ (int)a, (int)b, (int)c };
	}
	return n;
}

/* Put a connection, once imported as sd, under every number that named it: one socket,
 * as before exec (closing one of the numbers must not close the connection). */
static void install(int sd, const struct passed *p, int n, int memfd)
{
	sigset_t old;
	struct shim_file *f = NULL;
	int nfd = -1, named = 0;

	struct sockaddr_storage name;
	socklen_t nlen = sizeof(name);
	bool native6;

	shim__enter(&old);
	nfd = uls_socket_fd(sd, SOCK_CLOEXEC);
	native6 = uls_getsockname_sa(sd, (struct sockaddr *)&name, &nlen) == 0 &&
		  name.ss_family == AF_INET6;
	shim__leave(&old);
	for (int i = 0; i < n && nfd >= 0; i++) {
		if (p[i].memfd != memfd)
			continue;
		if (!f && !(f = shim__file_new(sd, (p[i].flags & PASSED_INET6) ? AF_INET6 : AF_INET,
						      SOCK_STREAM, p[i].flags & PASSED_NONBLOCK)))
			break;
		f->bound = true;  /* a connection: its address is fixed */
		/* libuls made the socket of the family the giver's had (uls_import): an
		 * AF_INET6 one where the node has IPv6 (socket.c's native6), whose addresses
		 * then pass as they are, IPv6 peers included. */
		f->native6 = native6;
		if (p[i].flags & PASSED_V6ONLY) {
			f->v6val[0] = 1;
			f->v6set |= 1u;
		}
		if (shim__real.dup3(nfd, p[i].fd, 0) >= 0 && shim__install(p[i].fd, f) == 0)
			named++;
	}
	if (nfd >= 0)
		shim__real.close(nfd);
	if (!named) {
		/* Nowhere to put it: the connection ends here rather than linger unseen. */
		shim__enter(&old);
		uls_close(sd);
		shim__leave(&old);
		shim__file_discard(f);
	}
}

static void import_passed(void)
{
	const char *v = getenv(INHERIT_VAR);
	struct passed p[KEEP_MAX];

	if (!v)
		return;
	int n = parse_inherit(v, p, KEEP_MAX);
	unsetenv(INHERIT_VAR);  /* for this program only, not for what it runs */
	if (!shim__enabled()) {
		for (int i = 0; i < n; i++)
			if (shim__real.fcntl(p[i].memfd, F_GET_SEALS) >= 0)
				shim__real.close(p[i].memfd);
		return;
	}
	sigset_t old;
	shim__enter(&old);
	int rc = uls_attach(shim__ctl());
	shim__leave(&old);
	for (int i = 0; i < n; i++) {
		bool first = true;
		for (int k = 0; k < i; k++)
			first &= p[k].memfd != p[i].memfd;
		if (!first)
			continue;
		/* Only a sealed memfd can be ours: anything else named here is left alone. */
		int seals = shim__real.fcntl(p[i].memfd, F_GET_SEALS);
		if (seals < 0 || !(seals & F_SEAL_WRITE)) {
			fprintf(stderr, "ulstack: %s: descriptor %d holds no connection\n",
				INHERIT_VAR, p[i].memfd);
			continue;
		}
		shim__enter(&old);
		int sd = rc == 0 || rc == -EALREADY ? uls_import(p[i].memfd) : rc;
		shim__leave(&old);
		if (sd >= 0)
			install(sd, p, n, p[i].memfd);
		else
			shim__real.close(p[i].memfd);
	}
}

__attribute__((constructor)) static void shim_init(void)
{
	const char *p = getenv("LD_PRELOAD"), *c = getenv("ULS_CTL");

	shim__real_init();
	shim__signals_init();
	shim__fork_note_self();
	shim__fork_init();
	saved_preload = p ? strdup(p) : NULL;
	saved_ctl = c ? strdup(c) : NULL;
	shim__set_ctl(c);
	import_passed();
}

/* ---- Before exec -------------------------------------------------------------------- */

struct exec_undo {
	int fd[KEEP_MAX], saved[KEEP_MAX];
	struct shim_file *file[KEEP_MAX];  /* what fd named, held (NULL after vfork) */
	ino_t closed[KEEP_MAX];            /* the closed socket put at fd */
	int n;
	bool own;                          /* not a vfork child */
	struct {
		struct shim_file *f;
		uint64_t nonce;
		int memfd;
	} exp[KEEP_MAX];
	int nexp;
	char inherit[KEEP_MAX * 36];  /* INHERIT_VAR=..., or empty */
};

/* The memfd exporting f's connection, exported now if it is not yet. -1: not exported.
 * The caller holds a call in f. An entry keeps a call of its own in its file until
 * exec_undo (or for good, once exec has succeeded): files are type-stable memory
 * (fdtab.c), so an entry whose file another thread closed meanwhile, and whose memory the
 * next socket took, would match that socket here by its pointer, and exec_undo would undo
 * the export on that socket's sd. Held, the file cannot be finished, so the pointer is
 * this file's alone, and closing its numbers meanwhile ends it after the undo. */
static int export_of(struct exec_undo *u, struct shim_file *f)
{
	sigset_t old;
	uint64_t nonce;

	for (int i = 0; i < u->nexp; i++)
		if (u->exp[i].f == f)
			return u->exp[i].memfd;
	if (f->type != SOCK_STREAM || u->nexp == KEEP_MAX)
		return -1;
	shim__enter(&old);
	int m = uls_export(f->sd, &nonce);
	shim__leave(&old);
	if (m < 0)
		return -1;
	/* A number without FD_CLOEXEC, away from the low ones the new program may expect. */
	int keep = shim__real.fcntl(m, F_DUPFD, 64);
	shim__real.close(m);
	if (keep < 0) {
		shim__enter(&old);
		uls_export_undo(f->sd, nonce);
		shim__leave(&old);
		return -1;
	}
	shim__hold(f);
	u->exp[u->nexp].f = f;
	u->exp[u->nexp].nonce = nonce;
	u->exp[u->nexp++].memfd = keep;
	return keep;
}

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* Export the connection behind fd, if it is one and this is a process of its own. A
 * connection inherited across fork is claimed first (inetd: the parent lets go right
 * after fork), all of them within one CLAIM_WAIT_MS; other inherited sockets are left
 * alone (a listener would join its port's group just before this program goes). */
static void pass(struct exec_undo *u, int fd, struct shim_file *f, long deadline)
{
	sigset_t old;

	if (!shim__file_current(f) && f->type == SOCK_STREAM) {
		shim__enter(&old);
		int inh = uls_inherited(f->sd);
		shim__leave(&old);
		long left = deadline - now_ms();
		if (inh == 2 && left > 0)
			shim__adopt(fd, f, (int)left);
	}
	int m = shim__file_current(f) ? export_of(u, f) : -1;
	if (m >= 0) {
		size_t len = strlen(u->inherit);
		if (!len)
			len = (size_t)snprintf(u->inherit, sizeof(u->inherit), "%s=%d;", INHERIT_VAR,
					       (int)getpid());
		snprintf(u->inherit + len, sizeof(u->inherit) - len, "%s%d:%d:%d",
			 u->inherit[len - 1] == ';' ? "" : ",", fd, m,
			 (f->nonblock ? PASSED_NONBLOCK : 0) | (f->family == AF_INET6 ? PASSED_INET6 : 0) |
			 (f->family == AF_INET6 && f->v6val[0] ? PASSED_V6ONLY : 0));
	}
}

/* Turn every socket that would survive exec into a closed socket, keeping what is needed
 * to undo it if exec fails; export the connections first. After vfork this runs in the
 * parent's memory: then only kernel calls, and nothing is exported. */
static void exec_prepare(struct exec_undo *u)
{
	int hi = shim__maxfd();
	bool own = shim__own_memory();
	long deadline = own ? now_ms() + CLAIM_WAIT_MS : 0;

	u->n = 0;
	u->nexp = 0;
	u->own = own;
	u->inherit[0] = '\0';
	for (int fd = 0; fd <= hi && u->n < KEEP_MAX; fd++) {
		if (!shim__is_ours(fd))
			continue;
		int fl = shim__real.fcntl(fd, F_GETFD);
		if (fl < 0 || (fl & FD_CLOEXEC))
			continue;
		/* Held until exec_undo, so that the file fd names now is known there by its
		 * pointer alone (see export_of: closed meanwhile, it is not finished, so no
		 * new socket takes its memory). */
		struct shim_file *f = own ? shim__get_raw(fd) : NULL;
		if (own && !f)
			continue;  /* closed since shim__is_ours */
		if (own)
			pass(u, fd, f, deadline);
		int sv[2];
		struct stat st;
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
		    fstat(sv[0], &st) < 0) {
			if (f)
				shim__put(f);
			continue;
		}
		shim__real.close(sv[1]);
		int saved = shim__real.fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (saved >= 0 && shim__real.dup2(sv[0], fd) >= 0) {
			u->fd[u->n] = fd;
			u->file[u->n] = f;
			u->closed[u->n] = st.st_ino;
			u->saved[u->n++] = saved;
		} else {
			if (saved >= 0)
				shim__real.close(saved);
			if (f)
				shim__put(f);
		}
		shim__real.close(sv[0]);
	}
}

static bool still_closed_socket(int fd, ino_t closed)
{
	struct stat st;

	return fstat(fd, &st) == 0 && st.st_ino == closed;
}

static void exec_undo(struct exec_undo *u)
{
	int e = errno;
	sigset_t old;

	for (int i = 0; i < u->n; i++) {
		/* A failed exec leaves the process as it was (POSIX execve: "the calling
		 * process image is unchanged"), which includes what its other threads did
		 * meanwhile: a number one of them closed, or closed and opened again (a file,
		 * a new socket, a dup2 onto it), keeps what it has now, and the socket's copy
		 * just goes. Only a number that still holds the closed socket exec_prepare put
		 * there, and that the table still gives to the same file, gets the socket
		 * back. Under the table lock: close and dup2 change the table before (close)
		 * or after (dup2, dup3, F_DUPFD) the kernel's table, so one of the two tests
		 * sees any of them that has begun; a thread's close that comes after the test
		 * closes the socket put back, as it would have without the exec.
		 * Deviation: a dup2 onto the number by another thread that reaches the kernel
		 * between the test and the dup2 here is undone (no system call replaces a
		 * descriptor only if it is still a given file); its table entry then names
		 * the new file over the socket's mirror.
		 * After vfork this is the only thread of its own descriptor table, and the
		 * shim's table is the parent's: the socket goes back unconditionally. */
		if (u->own) {
			shim__table_lock();
			if (shim__table_at(u->fd[i], u->file[i]) &&
			    still_closed_socket(u->fd[i], u->closed[i]))
				shim__real.dup2(u->saved[i], u->fd[i]);
			shim__table_unlock();
		} else {
			shim__real.dup2(u->saved[i], u->fd[i]);
		}
		shim__real.close(u->saved[i]);
		if (u->file[i])
			shim__put(u->file[i]);  /* exec_prepare's hold */
	}
	for (int i = 0; i < u->nexp; i++) {
		shim__enter(&old);
		uls_export_undo(u->exp[i].f->sd, u->exp[i].nonce);
		shim__leave(&old);
		shim__real.close(u->exp[i].memfd);
		shim__put(u->exp[i].f);  /* export_of's hold */
	}
	errno = e;
}

/* The environment the new program gets: the caller's, plus LD_PRELOAD and ULS_CTL as
 * this program had them if the caller's lacks them, plus the connections passed (and no
 * stale list of them). Returns envp itself when nothing changes, NULL if memory ran out. */
static char **with_shim_env(char *const envp[], char *extra[2], const char *inherit)
{
	bool has_pre = false, has_ctl = false, stale = false;
	size_t n = 0;

	extra[0] = extra[1] = NULL;
	for (; envp && envp[n]; n++) {
		has_pre |= strncmp(envp[n], "LD_PRELOAD=", 11) == 0;
		has_ctl |= strncmp(envp[n], "ULS_CTL=", 8) == 0;
		stale |= strncmp(envp[n], INHERIT_VAR "=", sizeof(INHERIT_VAR)) == 0;
	}
	if ((has_pre || !saved_preload) && (has_ctl || !saved_ctl) && !*inherit && !stale)
		return (char **)envp;
	char **e = calloc(n + 4, sizeof(*e));
	if (!e)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(envp[i], INHERIT_VAR "=", sizeof(INHERIT_VAR)) != 0)
			e[k++] = envp[i];
	if (!has_pre && saved_preload && asprintf(&extra[0], "LD_PRELOAD=%s", saved_preload) > 0)
		e[k++] = extra[0];
	if (!has_ctl && saved_ctl && asprintf(&extra[1], "ULS_CTL=%s", saved_ctl) > 0)
		e[k++] = extra[1];
	if (*inherit)
		e[k++] = (char *)inherit;
	return e;
}

SHIM_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	struct exec_undo *u = NULL;
	char *extra[2];

	shim__real_init();
	/* A program that cannot be run fails here, before any connection is exported and
	 * taken back (a shell tries every PATH entry with execve). */
	if (faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) < 0)
		return -1;
	/* After vfork the stack is the parent's: no allocation there, kernel calls only. */
	if (shim__own_memory()) {
		u = malloc(sizeof(*u));
		/* The new program's shim knows nothing of user-level epoll instances: their
		 * sockets go into the kernel's (uepoll.c). */
		shim__uep_exec();
		/* The rings go with this image: frames queued for a later flush
		 * (uls_tx_batch) leave now, as at _exit (fork.c). */
		shim__flush_at_exit();
	}
	struct exec_undo local;
	if (!u) {
		u = &local;
		local.inherit[0] = '\0';
	}
	exec_prepare(u);
	char **env = with_shim_env(envp, extra, u->inherit);
	int rc;
	if (!env) {
		rc = shim__ret(-ENOMEM);
	} else {
		rc = shim__real.execve(path, argv, env);
		if (env != envp)
			free(env);
	}
	exec_undo(u);
	free(extra[0]);
	free(extra[1]);
	if (u != &local)
		free(u);
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

/* execl, execlp and execle differ in their kind alone. A macro, because a variadic
 * function cannot hand its own `...` on to another. */
#define EXEC_VARIADIC(name, kind)                                        \
	SHIM_EXPORT int name(const char *file, const char *arg, ...)     \
	{                                                                \
		va_list ap;                                              \
		va_start(ap, arg);                                       \
		int rc = exec_args(kind, file, arg, ap);                 \
		va_end(ap);                                              \
		return rc;                                               \
	}

EXEC_VARIADIC(execl, EXEC_PATH)
EXEC_VARIADIC(execlp, EXEC_SEARCH)
EXEC_VARIADIC(execle, EXEC_ENV)
