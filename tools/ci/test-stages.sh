#!/usr/bin/env bash
# test-stages.sh LOG_DIR STAGE...: what `make test` runs after the venv.
#
# Each stage runs in its own `make --keep-going STAGE`, so one failing check does not hide
# the others; its output goes to the terminal and to LOG_DIR/STAGE.log. The end of the run
# is a summary (each stage, ok or FAILED, and how long it took) and, for every failed stage,
# why: pytest's "FAILED ..."/"ERROR ..." lines when the stage printed any, else the last
# lines it printed. CI keeps only the tail of a long run: the reason has to be in it.
set -uo pipefail

log_dir=$1
shift
mkdir -p "$log_dir"
make=${MAKE:-make}
tail_lines=${TEST_FAILURE_LINES:-30}

# VENV_SECONDS: how long `make venv` took before this script (the first line of the summary)
venv_seconds=${VENV_SECONDS:-}
summary=()
failed=()
total_start=$((SECONDS - ${venv_seconds:-0}))
if [[ -n $venv_seconds ]]; then summary+=("$(printf '  %-16s %-7s %4ss' venv ok "$venv_seconds")"); fi
for stage in "$@"; do
    start=$SECONDS
    log="$log_dir/$stage.log"
    "$make" --keep-going "$stage" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    if ((rc == 0)); then result=ok; else result=FAILED; failed+=("$stage"); fi
    summary+=("$(printf '  %-16s %-7s %4ss' "$stage" "$result" "$((SECONDS - start))")")
done

for stage in "${failed[@]}"; do
    log="$log_dir/$stage.log"
    printf '\n==> why %s failed (%s)\n' "$stage" "$log"
    # pytest -ra ends with "FAILED path::test - reason" and "ERROR path::test - reason" lines
    reasons=$(grep -E '^(FAILED|ERROR) ' "$log" | head -n 40)
    if [[ -n $reasons ]]; then
        printf '%s\n' "$reasons"
    else
        tail -n "$tail_lines" "$log"
    fi
done

printf '\n==> test summary\n'
printf '%s\n' "${summary[@]}"
printf '  %-16s %-7s %4ss\n' total "" "$((SECONDS - total_start))"
if ((${#failed[@]})); then
    echo "make test: FAILED stages: ${failed[*]}" >&2
    exit 1
fi
