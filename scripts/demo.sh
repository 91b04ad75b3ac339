#!/usr/bin/env bash
# The main job on the bundled sample data: a 4-element array run locally, the way SLURM
# would run it (four processes, each with SLURM_ARRAY_TASK_ID/COUNT set), then `status`.
set -euo pipefail

cd "$(dirname "$0")/.."
demo_dir="${DEMO_DIR:-demo_output}"
input_dir="sample_data/jsonl"
output_dir="${demo_dir}/output"
checkpoint="${demo_dir}/checkpoint"
logs="${demo_dir}/logs"
mkdir -p "$logs"

echo "curator-array demo: 4 logical shards over ${input_dir}, filters on, Parquet out"
pids=()
for shard in 0 1 2 3; do
    SLURM_ARRAY_TASK_ID="$shard" SLURM_ARRAY_TASK_COUNT=4 \
        curator-array run \
            --input-dir "$input_dir" --output-dir "$output_dir" --checkpoint-path "$checkpoint" \
            --output-file-type parquet --drop-empty --min-words 5 --dedup \
            --num-cpus 1 --object-store-memory $((200 * 1024 * 1024)) --no-progress \
            >"${logs}/shard_${shard}.log" 2>&1 &
    pids+=("$!")
done

failed=0
for shard in 0 1 2 3; do
    if wait "${pids[$shard]}"; then
        echo "  shard ${shard}: ok ($(grep -Eo 'shard [0-9]+ (complete|is already complete)[^;(]*' "${logs}/shard_${shard}.log" | tail -1))"
    else
        rc=$?
        failed=1
        echo "  shard ${shard}: exit ${rc}; last lines of ${logs}/shard_${shard}.log:"
        tail -n 5 "${logs}/shard_${shard}.log" | sed 's/^/      /'
    fi
done

echo
curator-array status --checkpoint-path "$checkpoint"
echo
echo "outputs:   ${output_dir}/ ($(find "$output_dir" -maxdepth 1 -name '*.parquet' | wc -l) Parquet files)"
echo "manifests: ${checkpoint}/.nemo_curator_metadata/.slurm_array_completion/"
echo "logs:      ${logs}/"
echo "retry:     curator-array retry --checkpoint-path ${checkpoint} --format fields   (empty = nothing to do)"
exit "$failed"
