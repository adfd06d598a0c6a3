# tests/shim/: the shim's semantics (pytest under ulsrun), and a C program for the one case
# Python cannot reach: a signal handler using sockets inside the C library's calls.
check_PROGRAMS += tests/shim/sighandler
tests_shim_sighandler_SOURCES = tests/shim/sighandler.c
# Signals held off inside the stack and delivered after it, with their details.
check_PROGRAMS += tests/shim/sigdefer
tests_shim_sigdefer_SOURCES = tests/shim/sigdefer.c
tests_shim_sigdefer_LDADD = -lpthread -ldl
# A signal while a thread is blocked in recv(): EINTR or restart, as the kernel decides.
check_PROGRAMS += tests/shim/sigwait
tests_shim_sigwait_SOURCES = tests/shim/sigwait.c tests/shim/rtccounters.h
tests_shim_sigwait_LDADD = -lpthread -ldl
# Blocking calls that drive the stack: threads racing, fork and exec while one waits.
check_PROGRAMS += tests/shim/rtcwait
tests_shim_rtcwait_SOURCES = tests/shim/rtcwait.c tests/shim/rtccounters.h
tests_shim_rtcwait_LDADD = -lpthread -ldl
# The interfaces a C program finds (getifaddrs, if_nameindex, SIOCGIF*), and one that
# serves on the address it found by walking them (test_interfaces.py).
check_PROGRAMS += tests/shim/ifaddrs
tests_shim_ifaddrs_SOURCES = tests/shim/ifaddrs.c
# libuls never calls back into the shim: no interposed name in the stack's objects
# (netif/sys.h). No testbed: it reads the built objects.
TESTS += tests/shim/test_no_reentry.sh
EXTRA_DIST += tests/shim/test_no_reentry.sh
# Programs of one C file (named as the program, Automake's default source) and threads:
#   closerace: socket calls racing close() and the reuse of the numbers (the shim's
#     lock-free lookups);
#   forkcount: fork while a thread is blocked in recv(): the child closes the socket, its
#     port is free;
#   execrace: exec while another thread closes a passed connection and a new socket takes
#     its memory;
#   uepfork: fork while other threads are inside user-level epoll's locks: the child's
#     epoll works;
#   execundo: a failed exec while another thread closes a socket's number and opens
#     something there.
SHIM_THREAD_LIBS = -lpthread
check_PROGRAMS += tests/shim/closerace tests/shim/forkcount tests/shim/execrace tests/shim/uepfork \
	tests/shim/execundo
tests_shim_closerace_LDADD = $(SHIM_THREAD_LIBS)
tests_shim_forkcount_LDADD = $(SHIM_THREAD_LIBS)
tests_shim_execrace_LDADD = $(SHIM_THREAD_LIBS)
tests_shim_uepfork_LDADD = $(SHIM_THREAD_LIBS)
tests_shim_execundo_LDADD = $(SHIM_THREAD_LIBS)
# fork handlers of the program (or of a library loaded before the shim) that use sockets.
check_PROGRAMS += tests/shim/atfork
tests_shim_atfork_SOURCES = tests/shim/atfork.c tests/shim/atfork.h
tests_shim_atfork_LDADD = $(SHIM_THREAD_LIBS) -ldl
check_LTLIBRARIES += tests/shim/atforkhook.la
tests_shim_atforkhook_la_SOURCES = tests/shim/atforkhook.c tests/shim/atfork.h
tests_shim_atforkhook_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
