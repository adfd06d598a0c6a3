/* ulsrun: run an unmodified program with its IPv4 sockets on a ulstack node.
 *
 *   ulsrun [--ctl PATH] [--] PROGRAM [ARGS...]
 *
 * It sets LD_PRELOAD to libuls-preload.so and ULS_CTL to the node's control socket, and
 * executes PROGRAM. A program the preload cannot reach is refused with the reason instead
 * of silently running on the kernel's stack: a static binary, a setuid or setgid one (the
 * dynamic linker ignores LD_PRELOAD for it), and a Go binary (Go issues system calls
 * itself).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/instdirs.h"
#include "netif/opt/opt.h"

static void usage(FILE *to)
{
	fprintf(to, "usage: ulsrun [--ctl PATH] [--] PROGRAM [ARGS...]\n"
		    "Run PROGRAM with its IPv4 sockets on the ulstack node whose ulsd control\n"
		    "socket is PATH (default: $ULS_CTL).\n");
}

/* PROGRAM as execvp would find it. */
static int find(const char *prog, char *out, size_t len)
{
	if (strchr(prog, '/')) {
		if (snprintf(out, len, "%s", prog) >= (int)len)
			return -ENAMETOOLONG;
		return access(out, X_OK) == 0 ? 0 : -errno;
	}
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path; *p;) {
		const char *end = strchrnul(p, ':');
		if (snprintf(out, len, "%.*s/%s", (int)(end - p), p, prog) < (int)len &&
		    access(out, X_OK) == 0)
			return 0;
		p = *end ? end + 1 : end;
	}
	return -ENOENT;
}

/* Read the ELF headers: is there a dynamic linker (PT_INTERP), and is it Go (a
 * .go.buildinfo or .note.go.buildid section)? Scripts (#!) are fine: their interpreter
 * is checked when it runs. Returns 0 if the preload can work, else a reason. */
static const char *why_not(const char *file)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	Elf64_Ehdr eh;
	const char *why = NULL;

	if (fd < 0)
		return NULL;  /* exec will say what is wrong */
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    eh.e_phnum > 4096 || eh.e_shnum == 0)
		goto out;  /* not a 64-bit ELF file: a script, or not ours to judge */
	bool interp = false;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != sizeof(ph))
			goto out;
		interp |= ph.p_type == PT_INTERP;
	}
	if (!interp) {
		why = "it is statically linked, so LD_PRELOAD cannot reach its socket calls";
		goto out;
	}
	Elf64_Shdr strtab;
	if (eh.e_shstrndx >= eh.e_shnum ||
	    pread(fd, &strtab, sizeof(strtab),
		  (off_t)(eh.e_shoff + eh.e_shstrndx * sizeof(strtab))) != sizeof(strtab))
		goto out;
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		Elf64_Shdr sh;
		char name[32] = "";
		if (pread(fd, &sh, sizeof(sh), (off_t)(eh.e_shoff + i * sizeof(sh))) != sizeof(sh))
			goto out;
		if (sh.sh_name >= strtab.sh_size)
			continue;
		if (pread(fd, name, sizeof(name) - 1, (off_t)(strtab.sh_offset + sh.sh_name)) < 0)
			goto out;
		if (!strcmp(name, ".go.buildinfo") || !strcmp(name, ".note.go.buildid")) {
			why = "it is a Go program, which makes its system calls itself";
			goto out;
		}
	}
out:
	close(fd);
	return why;
}

/* The preload library: $ULS_PRELOAD, else the build tree's (next to this program, for
 * tests), else the installed one: pkglibdir under the root this program is installed
 * under (apps/instdirs.h), so a staged install uses its own. */
static int preload_path(char *out, size_t len)
{
	const char *env = getenv("ULS_PRELOAD");
	char self[PATH_MAX];
	ssize_t n;

	if (env && *env) {
		snprintf(out, len, "%s", env);
		return access(out, R_OK) == 0 ? 0 : -errno;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			if (snprintf(out, len, "%s/.libs/libuls-preload.so", self) < (int)len &&
			    access(out, R_OK) == 0)
				return 0;
		}
	}
	if (uls_installed_path(out, len, ULS_PKGLIBDIR, "libuls-preload.so") == 0)
		return access(out, R_OK) == 0 ? 0 : -errno;
	snprintf(out, len, "%s/libuls-preload.so", ULS_PKGLIBDIR);
	return access(out, R_OK) == 0 ? 0 : -errno;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ctl", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *ctl = getenv("ULS_CTL");
	char prog[PATH_MAX], lib[PATH_MAX];
	int c, rc;

	while ((c = getopt_long(argc, argv, "+c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			ctl = optarg;
			break;
		default:
			return opt__help_or_bad(c, usage);
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (!ctl || !*ctl) {
		fprintf(stderr, "ulsrun: no node: give --ctl PATH or set ULS_CTL\n");
		return 2;
	}
	struct stat st;
	if (stat(ctl, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		fprintf(stderr, "ulsrun: %s is not a ulsd control socket: %s\n", ctl,
			errno ? strerror(errno) : "not a socket");
		return 2;
	}
	rc = find(argv[optind], prog, sizeof(prog));
	if (rc < 0) {
		fprintf(stderr, "ulsrun: %s: %s\n", argv[optind], strerror(-rc));
		return 127;
	}
	if (stat(prog, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID))) {
		fprintf(stderr, "ulsrun: refusing %s: it is set-user-ID or set-group-ID, and the "
				"dynamic linker ignores LD_PRELOAD for it\n", prog);
		return 126;
	}
	const char *why = why_not(prog);
	if (why) {
		fprintf(stderr, "ulsrun: refusing %s: %s; it would run on the kernel's stack\n",
			prog, why);
		return 126;
	}
	rc = preload_path(lib, sizeof(lib));
	if (rc < 0) {
		fprintf(stderr, "ulsrun: libuls-preload.so not found (%s): set ULS_PRELOAD\n", lib);
		return 127;
	}
	/* Ours first; a preload the user already had stays after it. */
	const char *old = getenv("LD_PRELOAD");
	char *pre;
	if (old && *old ? asprintf(&pre, "%s:%s", lib, old) < 0 : asprintf(&pre, "%s", lib) < 0)
		return 1;
	if (setenv("LD_PRELOAD", pre, 1) < 0 || setenv("ULS_CTL", ctl, 1) < 0) {
		perror("ulsrun: setenv");
		return 1;
	}
	execv(prog, &argv[optind]);
	fprintf(stderr, "ulsrun: %s: %s\n", prog, strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
