dist_man_MANS += man/ulsnode.1 man/ulsbench.1 man/ulsstat.1 man/ulsrun.1 man/ulsd.8 man/uls.3 \
	man/ulsping.1 man/ulsraw.1 man/ulsrelay.1
