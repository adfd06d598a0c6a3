# tests/shim/: the shim's semantics (pytest under ulsrun), and a C program for the one case
# Python cannot reach: a signal handler using sockets inside the C library's calls.
check_PROGRAMS += tests/shim/sighandler
tests_shim_sighandler_SOURCES = tests/shim/sighandler.c
