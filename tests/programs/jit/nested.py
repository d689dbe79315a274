# Python functions calling each other (issue 22 item 4, `python3.12 -X perf` and 3.13): fxprof_inner runs
# under fxprof_outer until the process has used MS milliseconds of CPU (argv[1], default 600); prints
# "cpu_ms N", the CPU time that loop took.
import sys
import time


def fxprof_inner(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def fxprof_outer(ms):
    start = time.process_time()
    while (time.process_time() - start) * 1000 < ms:
        fxprof_inner(20000)
    return (time.process_time() - start) * 1000


print(f"cpu_ms {fxprof_outer(float(sys.argv[1]) if len(sys.argv) > 1 else 600):.0f}")
