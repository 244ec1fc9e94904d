#!/usr/bin/env bash
# Commit subjects read `area: what changed` in at most 72 characters
# (docs/conventions.md, "Commits"). Checks every commit after 403c157, the
# last one before the rule, merges left out (their subjects are git's).
#   scripts/check_commits.sh                  every commit after 403c157 up to HEAD
#   scripts/check_commits.sh --subject TEXT   one subject (scripts/hooks/commit-msg)
# Without git history (a tarball, a shallow clone missing 403c157) it says so
# and passes: there is nothing to check.
set -euo pipefail
cd "$(dirname "$0")/.."
FIRST=403c157
# An area is a folder or module name; a commit touching two may name both
# ("tests, bench: ..."). What changed follows after one space.
area='[A-Za-z0-9_.][A-Za-z0-9_./+-]*'
rule="^$area(, $area)*: [^ ]"

# Why `subject` breaks the rule, or nothing when it keeps it.
problem() {
  local subject=$1
  if [ ${#subject} -gt 72 ]; then
    echo "longer than 72 characters (${#subject})"
  elif ! [[ "$subject" =~ $rule ]]; then
    echo "does not start with \`area: \` (a folder or module, e.g. \`tensor: \`, \`docs: \`)"
  fi
}

if [ "${1:-}" = --subject ]; then
  why=$(problem "${2:-}")
  [ -z "$why" ] && exit 0
  echo "commit subject $why:" >&2
  echo "  ${2:-}" >&2
  exit 1
fi
if ! git rev-parse --verify --quiet "$FIRST^{commit}" > /dev/null 2>&1; then
  echo "check_commits: no git history with commit $FIRST here: nothing to check"
  exit 0
fi
bad=0 n=0
while IFS= read -r line; do
  n=$((n + 1))
  why=$(problem "${line#* }")
  if [ -n "$why" ]; then
    echo "check_commits: ${line%% *} $why: ${line#* }"
    bad=1
  fi
done < <(git log --no-merges --format='%h %s' "$FIRST..HEAD")
[ $bad = 0 ] && echo "check_commits: $n commit subjects after $FIRST read \`area: what changed\` in 72 characters"
exit $bad
