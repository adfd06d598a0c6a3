dist_man_MANS += man/ulsnode.1 man/ulsbench.1 man/uls.3
