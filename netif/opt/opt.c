/* netif/opt/opt.c: command-line values (opt.h). Every range is checked explicitly, and strtoul
 * and strtod alone are never trusted: they accept blanks, a sign and, for strtod, "inf" and
 * "nan". */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netif/opt/opt.h"

int opt__parse_size(const char *s, unsigned long long *out)
{
	char *end;
	unsigned long long v, mul = 1;

	if (!s || !isdigit((unsigned char)*s))  /* no blanks, no sign */
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	switch (*end) {
	case 'K': case 'k': mul = 1ull << 10; end++; break;
	case 'M': case 'm': mul = 1ull << 20; end++; break;
	case 'G': case 'g': mul = 1ull << 30; end++; break;
	default: break;
	}
	if (*end)
		return -EINVAL;
	if (v && mul > ~0ull / v)
		return -ERANGE;
	*out = v * mul;
	return 0;
}

int opt__parse_cidr(const char *s, struct in_addr *addr, unsigned *prefix_len)
{
	char buf[INET_ADDRSTRLEN];
	const char *slash;
	char *end;
	unsigned long plen;
	struct in_addr a;

	if (!s || !addr || !prefix_len)
		return -EINVAL;
	slash = strchr(s, '/');
	if (!slash || (size_t)(slash - s) >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, (size_t)(slash - s));
	buf[slash - s] = '\0';
	if (inet_pton(AF_INET, buf, &a) != 1)
		return -EINVAL;
	if (!isdigit((unsigned char)slash[1]))
		return -EINVAL;
	errno = 0;
	plen = strtoul(slash + 1, &end, 10);
	/* /31 and /32 leave no room for a gateway and a peer on the link. */
	if (*end || errno || plen < 1 || plen > 30)
		return -EINVAL;
	*addr = a;
	*prefix_len = (unsigned)plen;
	return 0;
}

int opt__bad(const char *prog, const char *name, const char *arg, const char *want)
{
	fprintf(stderr, "%s: bad --%s '%s'%s%s\n", prog, name, arg, want && *want ? ": " : "",
		want ? want : "");
	return -EINVAL;
}

int opt__no_operands(const char *prog, int argc, char **argv, int optind)
{
	if (optind >= argc)
		return 0;
	fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
	return -EINVAL;
}

int opt__help_or_bad(int c, void (*usage)(FILE *))
{
	usage(c == 'h' ? stdout : stderr);
	return c == 'h' ? 0 : 2;
}

static int bad_range(const char *prog, const char *name, const char *arg,
		     unsigned long long lo, unsigned long long hi)
{
	char want[64];

	snprintf(want, sizeof(want), "%llu..%llu", lo, hi);
	return opt__bad(prog, name, arg, want);
}

int opt__num(const char *prog, const char *name, const char *arg, unsigned long long lo,
	     unsigned long long hi, unsigned long long *out)
{
	unsigned long long v;

	if (opt__parse_size(arg, &v) < 0 || v < lo || v > hi)
		return bad_range(prog, name, arg, lo, hi);
	*out = v;
	return 0;
}

int opt__uint(const char *prog, const char *name, const char *arg, unsigned lo, unsigned hi,
	      unsigned *out)
{
	unsigned long long v;
	int rc = opt__num(prog, name, arg, lo, hi, &v);

	if (rc == 0)
		*out = (unsigned)v;
	return rc;
}

int opt__parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	/* A digit or a point first: no blanks, no sign, no "inf" or "nan". */
	if (!s || !(isdigit((unsigned char)*s) || *s == '.'))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (*end || errno || !isfinite(v))
		return -EINVAL;
	*out = v;
	return 0;
}

int opt__seconds(const char *prog, const char *name, const char *arg, double lo, double hi,
		 double *out)
{
	char want[80];
	double v;

	if (opt__parse_seconds(arg, &v) == 0 && v >= lo && v <= hi) {
		*out = v;
		return 0;
	}
	snprintf(want, sizeof(want), "%g..%g seconds", lo, hi);
	return opt__bad(prog, name, arg ? arg : "", want);
}

/* "A, B or C" of words[0..n) into buf. */
static const char *one_of(const char *const *words, size_t n, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s",
				       i == 0 ? "" : i + 1 == n ? " or " : ", ", words[i]);
	return buf;
}

int opt__word(const char *prog, const char *name, const char *arg, const char *const *words,
	      size_t n)
{
	char want[160];

	for (size_t i = 0; arg && i < n; i++)
		if (strcmp(arg, words[i]) == 0)
			return (int)i;
	return opt__bad(prog, name, arg ? arg : "", one_of(words, n, want, sizeof(want)));
}

/* Calls each(entry, ctx) for each comma-separated entry of arg, stopping at a negative
 * return; an empty list or an empty entry is -EINVAL without a call. */
static int for_each_entry(const char *arg, int (*each)(const char *entry, void *ctx), void *ctx)
{
	char entry[64];

	if (!arg || !*arg)
		return -EINVAL;
	for (const char *p = arg;;) {
		size_t len = strcspn(p, ",");
		if (len == 0 || len >= sizeof(entry))
			return -EINVAL;
		memcpy(entry, p, len);
		entry[len] = '\0';
		int rc = each(entry, ctx);
		if (rc < 0)
			return rc;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

struct num_list {
	unsigned long long lo, hi, *out;
	size_t n, max;
};

static int num_entry(const char *entry, void *ctx)
{
	struct num_list *l = ctx;
	unsigned long long v;

	if (l->n == l->max || opt__parse_size(entry, &v) < 0 || v < l->lo || v > l->hi)
		return -EINVAL;
	l->out[l->n++] = v;
	return 0;
}

int opt__num_list(const char *prog, const char *name, const char *arg, unsigned long long lo,
		  unsigned long long hi, unsigned long long *out, size_t max)
{
	struct num_list l = { lo, hi, out, 0, max };
	char want[96];

	if (for_each_entry(arg, num_entry, &l) == 0)
		return (int)l.n;
	snprintf(want, sizeof(want), "%llu..%llu each, at most %zu, comma-separated", lo, hi,
		 max);
	return opt__bad(prog, name, arg ? arg : "", want);
}

struct word_list {
	const char *const *words;
	size_t n, count;
	unsigned *out;
};

static int word_entry(const char *entry, void *ctx)
{
	struct word_list *l = ctx;

	for (size_t i = 0; i < l->n; i++) {
		if (strcmp(entry, l->words[i]) != 0)
			continue;
		for (size_t k = 0; k < l->count; k++)
			if (l->out[k] == i)
				return -EINVAL;   /* a repeat */
		l->out[l->count++] = (unsigned)i;
		return 0;
	}
	return -EINVAL;
}

int opt__word_list(const char *prog, const char *name, const char *arg,
		   const char *const *words, size_t n, unsigned *out)
{
	struct word_list l = { words, n, 0, out };
	char want[192];
	size_t at;

	if (for_each_entry(arg, word_entry, &l) == 0)
		return (int)l.count;
	one_of(words, n, want, sizeof(want));
	at = strlen(want);
	snprintf(want + at, sizeof(want) - at, ", once each, comma-separated");
	return opt__bad(prog, name, arg ? arg : "", want);
}
