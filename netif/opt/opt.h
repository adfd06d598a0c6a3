/* netif/opt/opt.h: command-line values for every program of the tree (ulsd, ulsbench, ulsping,
 * ulsraw, ulsrun, ulsstat, ulsnode, ulsrelay). A leaf: it includes only libc, so server/
 * (which may include filter/ and netif/ but not apps/) and apps/ both use it.
 *
 * The opt__ functions that take `prog` and `name` check one option's value and, when it is
 * wrong, print one line to stderr:
 *     PROG: bad --NAME 'VALUE': WHAT IS EXPECTED
 * and return -EINVAL; on success they write *out and return 0 (or a count). The caller
 * exits 2. The bare parsers (opt__parse_*) print nothing. */
#ifndef ULS_COMMON_OPT_H
#define ULS_COMMON_OPT_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A decimal integer with an optional K, M or G (x1024, x1024^2, x1024^3); no blanks, no
 * sign. 0 or -EINVAL (-ERANGE when it does not fit). */
int opt__parse_size(const char *s, unsigned long long *out);
/* Seconds: a decimal number, fractions allowed, finite, not negative. 0 or -EINVAL. */
int opt__parse_seconds(const char *s, double *out);
/* A.B.C.D/NN with NN in 1..30: 0 or -EINVAL. */
int opt__parse_cidr(const char *s, struct in_addr *addr, unsigned *prefix_len);

/* Print "PROG: bad --NAME 'ARG': WANT" (WANT NULL or "": no ": WANT"); returns -EINVAL. */
int opt__bad(const char *prog, const char *name, const char *arg, const char *want);

/* After getopt: argv[optind..argc) must be empty, else "PROG: unexpected argument 'X'" and
 * -EINVAL. */
int opt__no_operands(const char *prog, int argc, char **argv, int optind);

/* getopt's 'h' and any option it did not know (its '?' or ':'), as every program answers
 * them: usage(stdout) and 0 for 'h', usage(stderr) and 2 otherwise. Returns that exit
 * status for the caller to return: `default: return opt__help_or_bad(c, usage);`. */
int opt__help_or_bad(int c, void (*usage)(FILE *));

/* A number (opt__parse_size: K, M, G allowed) in lo..hi. */
int opt__num(const char *prog, const char *name, const char *arg, unsigned long long lo,
	     unsigned long long hi, unsigned long long *out);
/* The same for an unsigned int (hi <= UINT_MAX). */
int opt__uint(const char *prog, const char *name, const char *arg, unsigned lo, unsigned hi,
	      unsigned *out);
/* A duration in seconds (decimal, fractions allowed, finite) in lo..hi. */
int opt__seconds(const char *prog, const char *name, const char *arg, double lo, double hi,
		 double *out);
/* One of words[0..n): returns its index, or prints "expected W1, W2 or W3" and -EINVAL. */
int opt__word(const char *prog, const char *name, const char *arg, const char *const *words,
	      size_t n);
/* A comma list of numbers (K, M, G allowed) in lo..hi, at most max of them, no empty
 * entries ("1,8,64"): returns the count (>= 1) or -EINVAL. */
int opt__num_list(const char *prog, const char *name, const char *arg, unsigned long long lo,
		  unsigned long long hi, unsigned long long *out, size_t max);
/* A comma list of words from words[0..n), each at most once: writes their indexes to out
 * (room for n) and returns the count (>= 1), or -EINVAL. */
int opt__word_list(const char *prog, const char *name, const char *arg,
		   const char *const *words, size_t n, unsigned *out);

#endif
