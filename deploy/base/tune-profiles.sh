#!/bin/sh
# Init step of the hone pod: make sure a tuned profile (`hone tune`) exists for
# every model in $TUNE_MODELS on this node's hardware, then exit so `hone serve`
# starts and applies it.
#
# Profiles are named <hardware fingerprint>-<model hash>.toml (src/tune/profile.h)
# and live on a volume shared by the pods, so a fleet of identical nodes tunes a
# model once, and a node of another kind tunes it once more under its own
# fingerprint. A model already tuned on this hardware is skipped; one whose
# file is newer than its profile is tuned again.
#
# Environment (the Deployment sets them; the defaults are for running it by hand):
#   HONE_PROFILE_DIR   where profiles go (required; hone tune and hone serve read it)
#   TUNE_MODELS        folder of .gguf models (default /models)
#   TUNE_BUDGET        measuring time per model (default 60s)
#   TUNE_WORKLOAD      chat, batch or server (default server)
#   TUNE_CONCURRENCY   sequences at once while measuring (default 4, hone serve's
#                      default slots; the profile's slots become the server's)
#   TUNE_HONE          the hone binary (default: hone on PATH)
# (TUNE_*, not HONE_*: hone reads HONE_<FLAG> variables as its own flags.)
#
# A failed tune is reported and skipped, not fatal: hone serve runs without a
# profile (its defaults), and a pod that cannot start over an optimisation
# would be worse. A hone that cannot even report the fingerprint is fatal: the
# server would not run either.
set -eu

hone=${TUNE_HONE:-hone}
models=${TUNE_MODELS:-/models}
dir=${HONE_PROFILE_DIR:?HONE_PROFILE_DIR must name the profile folder}
budget=${TUNE_BUDGET:-60s}
workload=${TUNE_WORKLOAD:-server}
concurrency=${TUNE_CONCURRENCY:-4}

log() { echo "[tune-profiles] $*" >&2; }

mkdir -p "$dir"
# `hone info --json` prints one "fingerprint": "<16 hex>" member; no JSON tool is
# needed for that, and the image has none.
fp=$("$hone" info --json --no-bandwidth | sed -n 's/.*"fingerprint": *"\([0-9a-f]\{16\}\)".*/\1/p')
if [ -z "$fp" ]; then
  log "could not read the hardware fingerprint from '$hone info --json'"
  exit 1
fi
log "hardware fingerprint $fp; profiles in $dir"

# Pods starting together on identical nodes would tune the same models at the
# same time and race on the same profile file: one tunes, the others wait and
# then find its profile. flock(1) is in util-linux, part of every Debian image.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir/.lock-$fp"
  flock 9
fi

# The profile of this hardware that names this model file, if any.
profile_for() {
  for p in "$dir/$fp"-*.toml; do
    [ -f "$p" ] || continue
    if grep -q -F "model_path = '$1'" "$p"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

found=0 tuned=0 skipped=0 failed=0
for m in "$models"/*.gguf; do
  [ -e "$m" ] || continue
  found=$((found + 1))
  if p=$(profile_for "$m") && ! [ "$m" -nt "$p" ]; then
    log "skip $(basename "$m"): tuned on this hardware ($p)"
    skipped=$((skipped + 1))
    continue
  fi
  log "tuning $(basename "$m") (workload $workload, budget $budget)"
  if "$hone" tune "$m" --workload "$workload" --concurrency "$concurrency" --budget "$budget" --quiet >&2; then
    tuned=$((tuned + 1))
  else
    log "tuning $(basename "$m") failed; hone serve will use its defaults for it"
    failed=$((failed + 1))
  fi
done
[ "$found" -gt 0 ] || log "no .gguf models in $models"
log "done: $found model(s), $tuned tuned, $skipped already tuned, $failed failed"
