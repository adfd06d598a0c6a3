# common/: a leaf every program may link (it includes only libc): command-line values.
noinst_LTLIBRARIES += common/libcommon.la
common_libcommon_la_SOURCES = common/opt.c common/opt.h
