#!/usr/bin/env bash
# compute-sanitizer over the CUDA test cases, one process a case, several at once.
#   scripts/sanitize_cases.sh TESTS_BINARY LOG_DIR TOOL [GTEST_FILTER]
# Cases: those of GTEST_FILTER (default: every CUDA case, '*cuda*:*Cuda*:*CUDA*'), less the suites
# matching IGNIS_SANITIZER_SKIP (default SmolLM2: the real model through the engine is minutes under
# a sanitizer) and the CPU instances of parameterized suites (…/cpu_f32: a case named Cuda… there
# skips without touching CUDA, and compute-sanitizer fails a process that never does). The
# sanitizers spend most of their time on the host, so IGNIS_SANITIZER_JOBS (default: the CPU count
# less two) cases share the GPU at once, each under its own time limit, IGNIS_SANITIZER_CASE_SECONDS
# (default 300): a slow case no longer cuts short the rest of its suite.
# Prints one line: cases run, clean, without CUDA calls, with findings, over the limit, failed
# otherwise; the sanitizer summaries that are not clean; the names of the cases that were not
# clean. Exits 1 unless every case was clean or made no CUDA call. In LOG_DIR/sanitizer-TOOL: the
# logs of the cases that were not clean, the clean ones' in clean-logs.tar.xz, and status.txt ("rc name
# number" a case; a log is <number>.log).
set -uo pipefail
tests="$1" logs="$2" tool="$3" filter="${4:-*cuda*:*Cuda*:*CUDA*}"
jobs="${IGNIS_SANITIZER_JOBS:-$(( $(nproc) > 3 ? $(nproc) - 2 : 1 ))}"
limit="${IGNIS_SANITIZER_CASE_SECONDS:-300}"
skip="${IGNIS_SANITIZER_SKIP:-SmolLM2}"
dir="$logs/sanitizer-$tool"
rm -rf "$dir" && mkdir -p "$dir"

# gtest lists "Suite." lines followed by indented "Case  # GetParam() = ..." lines.
"$tests" --gtest_list_tests --gtest_filter="$filter" | awk -v skip="$skip" '
  /^Running/ { next }
  /^[^ ]/ { suite = $1; next }
  { if (suite !~ skip && $1 !~ /\/cpu_/) print suite $1 }' > "$dir/cases.txt"

run_case() {  # $1: the full case name, $2: its number; writes <n>.log and appends "rc name n" to status.txt
  local name="$1" n="$2"
  IGNIS_TEST_LIGHT=1 timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 3 "$tests" \
      --gtest_filter="$name" --gtest_brief=1 > "$dir/$n.log" 2>&1
  local rc=$?
  # A case that never calls CUDA (a CPU-only check picked by a wider filter) has nothing to check:
  # the sanitizer says so and exits 255. Counted apart, not as a failure.
  [ $rc -eq 255 ] && grep -q "terminated before first instrumented API call" "$dir/$n.log" && rc=nocuda
  echo "$rc $name $n" >> "$dir/status.txt"
}
export -f run_case
export tests tool limit dir
start=$(date +%s)
awk '{ print $0, NR }' "$dir/cases.txt" | xargs -P "$jobs" -n 2 bash -c 'run_case "$0" "$1"'

total=$(wc -l < "$dir/cases.txt")
count() { awk -v want="$1" '$1 == want' "$dir/status.txt" | wc -l; }
clean=$(count 0) found=$(count 3) cut=$(count 124) nocuda=$(count nocuda)
other=$(( $(wc -l < "$dir/status.txt") - clean - found - cut - nocuda ))
summaries=$(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$dir"/*.log | grep -vE 'SUMMARY: 0 (errors|hazards)' |
            sort | uniq -c | tr -s ' ' | tr '\n' ';')
echo "$total cases, $jobs at once: $clean clean, $nocuda without CUDA calls, $found with findings," \
     "$cut over ${limit}s, $other failed (rc other than 0/3/124)${summaries:+; $summaries}" \
     "($(( $(date +%s) - start )) s)"
awk '$1 != 0 && $1 != "nocuda" { print "  not clean (rc " $1 "): " $2 }' "$dir/status.txt" | sort
# The logs of the clean cases go into one archive, so the folder keeps a few files rather than one a case (the
# device tool brings back a limited number of files, and hundreds of clean logs crowded out the rest of a run's).
# The logs of the cases that were not clean stay beside it as they are.
awk '$1 == 0 || $1 == "nocuda" { print $3 ".log" }' "$dir/status.txt" > "$dir/clean-logs.txt"
if [ -s "$dir/clean-logs.txt" ] && tar -C "$dir" -cJf "$dir/clean-logs.tar.xz" -T "$dir/clean-logs.txt"; then
  (cd "$dir" && xargs rm -f < clean-logs.txt)
fi
rm -f "$dir/clean-logs.txt" "$dir/cases.txt"  # status.txt names every case
[ $(( clean + nocuda )) -eq "$total" ]
