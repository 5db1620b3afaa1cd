# Shared by the wrk benchmarks (sourced): one wrk run's figures, and a median.

# wrk_run ARGS...: runs wrk with $THREADS, $CONNS and $DURATION and ARGS; prints
# "requests/s p50_ms p99_ms" (a non-2xx count goes to stderr).
wrk_run() {
  wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --latency "$@" 2>&1 | awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /^Requests\/sec/ { rps = $2 }
    /^ +50%/ { p50 = ms($2) }
    /^ +99%/ { p99 = ms($2) }
    /Non-2xx/ { bad = $NF }
    END { if (bad) print "NON-2XX:" bad > "/dev/stderr"; printf "%.0f %.3f %.3f\n", rps, p50, p99 }'
}

# The median of the numbers on stdin, one a line.
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
