#!/bin/sh
# Refits the stack profiles' parameters on both calibration files and writes
# them into src/plan/stack_profile.cpp (between BEGIN FITTED / END FITTED);
# rebuild tera afterwards. Usage: bench/refit_profiles.sh [build/tera]
set -e
TERA=${1:-build/tera}
C=configs/calibration
"$TERA" plan validate $C/published_runs.csv $C/published_runs_more.csv --fit > /tmp/tera-refit.$$
python3 - /tmp/tera-refit.$$ src/plan/stack_profile.cpp <<'PY'
import sys
lines = open(sys.argv[1]).read().split('\n')
i = [k for k, l in enumerate(lines) if l.startswith('stack profile')][-1]
rows = []
for l in lines[i + 1:]:
    if not l.strip():
        break
    n, g, o, ol, ls, rw, f8 = l.split()
    ol = '-1' if ol == 'preset' else ol
    rows.append(f'      {{"{n}", {{{g}, {o}, {ol}, {ls}, {rw}, {f8}}}}},')
src = open(sys.argv[2]).read()
a = src.index('      // BEGIN FITTED\n') + len('      // BEGIN FITTED\n')
b = src.index('      // END FITTED')
open(sys.argv[2], 'w').write(src[:a] + '\n'.join(rows) + '\n' + src[b:])
PY
rm -f /tmp/tera-refit.$$
