#!/bin/bash
# ns per run of the data path's BPF programs during one offload-off stream (bpf_stats), as
# stop 39 measured it: now docs/bench/s40/bpf/bpflive.sh, which takes the build and the
# output directory and also prints the summary.
exec "$(dirname "$0")/../../s40/bpf/bpflive.sh" /work/main/build /tmp/bpfst
