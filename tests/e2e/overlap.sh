#!/usr/bin/env bash
# overlap.sh: train.bucket_mb, the gradient's all-reduce in buckets beside the
# backward pass (issue 46). On 2 ranks a sum of two gradients has the same
# bits in either order, so the overlapped run must end with the one-all-
# reduce run's parameters, for the GPT and the MLP; the step report names the
# buckets and the exposed communication; the timeline holds each bucket's
# all-reduce on the overlapped lane, started while the backward pass runs.
# Deterministic mode keeps its tree (the setting leaves its bits alone), and
# one rank has nothing to overlap.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || skip "python3 not found (apt-get install python3)"

# crc_of NAME NP ARGS...: runs vgpu_train, sets $crc (empty on failure).
crc_of() {
  local name=$1 np=$2
  shift 2
  crc=""
  run "$name" 180 "$MPIRUN" -np "$np" "$TRAIN" "$@"
  [ "$rc" = 0 ] || { bad "$name: exit $rc"; return; }
  crc=$(tail -n 1 <<<"$out" | grep -oE 'params_crc=[0-9a-f]+' | cut -d= -f2)
}
same_crc() {
  if [ -n "$crc" ] && [ "$crc" = "$2" ]; then ok "$1: params_crc $crc"; else bad "$1: params_crc '$crc', expected '$2'"; fi
}

STEPS=30
gpt=("$CONFIGS/gpt_tiny.ini" --set train.max_steps=$STEPS --set sample.bytes=0)
crc_of "gpt np=2, one all-reduce" 2 "${gpt[@]}" --set train.bucket_mb=0; ref=$crc
expect_no_out 'buckets'
crc_of "gpt np=2, buckets of 0.05 MiB" 2 "${gpt[@]}" --set train.bucket_mb=0.05 --trace "$WORK/t.json"
same_crc "gpt overlapped = one all-reduce" "$ref"
# 438,016 parameters (256 x 128 + 64 x 128 + 2 x (12 x 128^2 + 13 x 128) + 2 x 128)
# in buckets of 0.05 MiB = 13,107 floats, rounded up to 64: 13,120 -> 34 buckets.
expect_out '^vgpu_train: exposed communication [0-9.]+ ms a step \(rank [01]\), [0-9.]+ \(rank [01]\); 34 buckets$'
expect_out ' exposed_ms=[0-9.]+,[0-9.]+ '
# The timeline: each step's 34 all-reduces on lane 1 of each rank, and the
# first of them inside the step's backward span in most steps (the pass
# tells the top bucket before its last blocks; a loaded machine may be late
# now and then).
python3 - "$WORK/t.json" "$STEPS" 34 <<'EOF'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
steps, buckets = int(sys.argv[2]), int(sys.argv[3])
bad = 0
for pid in (0, 1):
    lane = [e for e in events if e.get("ph") == "X" and e["pid"] == pid and e["tid"] == 1
            and e["name"] == "all-reduce"]
    back = [e for e in events if e.get("ph") == "X" and e["pid"] == pid and e["tid"] == 0
            and e["name"] == "backward"]
    spans = [e for e in events if e.get("ph") == "X" and e["pid"] == pid
             and e["name"] == "gradient bucket"]
    # The warm-up's backward is the first, its all-reduce whole on lane 0.
    inside = sum(any(b["ts"] <= c["ts"] < b["ts"] + b["dur"] for c in lane) for b in back[1:])
    # Each all-reduce inside its bucket's span, final (ready_us) before it began.
    held = sum(any(s["tid"] == 1 and s["ts"] <= c["ts"] and c["ts"] + c["dur"] <= s["ts"] + s["dur"]
                   for s in spans) for c in lane)
    ready = all(s["args"]["ready_us"] >= 0 and s["args"]["count"] > 0 for s in spans)
    print(f"rank {pid}: {len(lane)} all-reduces on lane 1 ({held} inside a gradient bucket span "
          f"of {len(spans)}), {len(back) - 1} steps' backward, {inside} of them with a bucket "
          f"started inside")
    if len(lane) != steps * buckets or len(back) != steps + 1 or inside < 0.8 * steps:
        bad = 1
    if len(spans) != steps * buckets or held != len(lane) or not ready:
        bad = 1
sys.exit(bad)
EOF
if [ $? = 0 ]; then ok "timeline: $((STEPS * 34)) all-reduces a rank on the overlapped lane, begun during the backward pass"; else bad "timeline"; fi

syn=("$CONFIGS/synthetic_small.ini" --set train.max_steps=50)
crc_of "mlp np=2, sharded all-reduce" 2 "${syn[@]}"; ref=$crc
crc_of "mlp np=2, buckets of 0.02 MiB" 2 "${syn[@]}" --set train.bucket_mb=0.02
same_crc "mlp overlapped = sharded" "$ref"
expect_out 'communication .*; [0-9]+ buckets$'

crc_of "mlp np=3 deterministic" 3 "${syn[@]}" --set train.deterministic=true; ref=$crc
crc_of "mlp np=3 deterministic, bucket_mb set" 3 "${syn[@]}" --set train.deterministic=true --set train.bucket_mb=0.02
same_crc "deterministic mode keeps its tree" "$ref"
expect_no_out 'buckets'

crc_of "mlp np=1, bucket_mb set" 1 "${syn[@]}" --set train.bucket_mb=0.02
expect_no_out 'buckets'
expect_out 'status=ok'

run "bucket_mb below 1/64 MiB refused" 30 "$TRAIN" "$CONFIGS/gpt_tiny.ini" --set train.bucket_mb=0.01
expect_rc 2
expect_out 'train.bucket_mb = 0.01: 0 \(one all-reduce after the pass\) or at least 0.015625'

expect_no_shm
finish
