/* apps/instdirs.h: where an installed program finds the rest of ulstack.
 *
 * The installation directories are configure's (bindir, sbindir, pkglibdir, pkglibexecdir:
 * apps/local.mk passes them as ULS_BINDIR etc.). A program run from a build tree finds its
 * companions there instead (each tool decides that first); one run from the prefix finds
 * them at the configured paths, under the root it was itself installed under: "" for an
 * ordinary install, DESTDIR for a staged one (`make install DESTDIR=D`, a package being
 * built), so that a staged tree never borrows an older install's files. The root is the
 * program's own directory (/proc/self/exe) with the configured bindir or sbindir taken off
 * its end.
 */
#ifndef ULS_APPS_INSTDIRS_H
#define ULS_APPS_INSTDIRS_H

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef ULS_BINDIR
#define ULS_BINDIR "/usr/local/bin"
#endif
#ifndef ULS_SBINDIR
#define ULS_SBINDIR "/usr/local/sbin"
#endif
#ifndef ULS_PKGLIBDIR
#define ULS_PKGLIBDIR "/usr/local/lib/ulstack"
#endif
#ifndef ULS_PKGLIBEXECDIR
#define ULS_PKGLIBEXECDIR "/usr/local/libexec/ulstack"
#endif

/* The root this program is installed under, into root[len]: 0, or -ENOENT when it does not
 * run from the configured bindir or sbindir (a build tree, or a copy elsewhere). */
static inline int uls_install_root(char *root, size_t len)
{
	static const char *const dirs[] = { ULS_BINDIR, ULS_SBINDIR };
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		return -ENOENT;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';   /* the program's directory */
	size_t have = strlen(self);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		size_t dl = strlen(dirs[i]);
		while (dl > 1 && dirs[i][dl - 1] == '/')
			dl--;
		if (dl <= have && memcmp(self + have - dl, dirs[i], dl) == 0 && have - dl < len) {
			memcpy(root, self, have - dl);
			root[have - dl] = '\0';
			return 0;
		}
	}
	return -ENOENT;
}

/* DIR/NAME under the install root, into out[len]: 0, or -ENOENT as uls_install_root, or
 * -ENAMETOOLONG. */
static inline int uls_installed_path(char *out, size_t len, const char *dir, const char *name)
{
	char root[PATH_MAX];
	int err = uls_install_root(root, sizeof(root));

	if (err < 0)
		return err;
	int w = snprintf(out, len, "%s%s/%s", root, dir, name);
	return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

#endif
