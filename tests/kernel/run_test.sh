# SPDX-License-Identifier: MIT
# Sourced by the kernel leg's plan (busybox sh, inside the VM): run_test
# runs one test with a time limit, its output to $RESULTS/NAME.log, and
# writes $RESULTS/NAME.verdict ("pass", "fail REASON" or "skip REASON"),
# which the host's ctest test of that name reads (kernel_leg.py verdict).
#
#   run_test NAME gtest|script SECONDS COMMAND...
#     gtest: exit 0 is a pass unless gtest said SKIPPED (then a skip, with
#     gtest's reason); script: exit 0 pass, 77 skip (its "SKIP: ..." line).

uptime_centis() {
  read -r up _ < /proc/uptime
  echo "${up%.*}${up#*.}"
}

run_test() {
  name=$1 kind=$2 limit=$3
  shift 3
  log=$RESULTS/$name.log
  echo "KERNEL-LEG: start $name"
  begin=$(uptime_centis)
  timeout -s KILL "$limit" "$@" > "$log" 2>&1 < /dev/null
  rc=$?
  end=$(uptime_centis)
  took=$(((end - begin) / 100)).$(((end - begin) % 100 / 10))
  if [ $rc -eq 137 ] && [ "${took%.*}" -ge "$limit" ]; then
    verdict="fail no end within $limit s (killed)"
  elif [ $rc -eq 0 ] && [ "$kind" = gtest ] && grep -q '^\[  SKIPPED \]' "$log"; then
    verdict="skip $(grep -A1 ': Skipped$' "$log" | tail -1)"
  elif [ $rc -eq 0 ]; then
    verdict=pass
  elif [ $rc -eq 77 ] && [ "$kind" = script ]; then
    verdict="skip $(grep '^SKIP' "$log" | tail -1)"
  else
    verdict="fail exit status $rc"
  fi
  echo "$verdict" > "$RESULTS/$name.verdict"
  echo "KERNEL-LEG: ${verdict%% *} $name in $took s"
}
