#!/bin/bash
# Stop 44's end: the same two commands as stop 43's end (issue 12's sweep with --repeat 5,
# issue 13's loss points with --repeat 3), run by that script into this stop's directory.
exec "$(dirname "$0")/../../s43/final/run.sh" "${1:-/work/main/build}" "${2:-/tmp/quiet44}"
