#!/usr/bin/env bash
# The main job on the bundled sample data: a 4-element array, then `curator-array status`.
#
# With SLURM available (or installable: root on Debian), the array runs on a throwaway
# SLURM cluster on this host (scripts/slurm_cluster.py) through the entrypoint, exactly as
# `sbatch --array=0-3` runs it on a real cluster. Otherwise (or with DEMO_MODE=local) four
# local processes play the four array elements, each with SLURM_ARRAY_TASK_ID/COUNT set.
set -euo pipefail

cd "$(dirname "$0")/.."
repo="$(pwd)"
demo_dir="$(mkdir -p "${DEMO_DIR:-demo_output}" && cd "${DEMO_DIR:-demo_output}" && pwd)"
input_dir="${repo}/sample_data/jsonl"
output_dir="${demo_dir}/output"
checkpoint="${demo_dir}/checkpoint"
logs="${demo_dir}/logs"
mkdir -p "$logs"
run_options=(--output-file-type parquet --drop-empty --min-words 5 --dedup
             --num-cpus 1 --object-store-memory $((200 * 1024 * 1024)) --no-progress)

can_use_slurm() {
    [[ "${DEMO_MODE:-auto}" != local ]] || return 1
    command -v slurmctld >/dev/null 2>&1 && return 0
    [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1
}

run_on_slurm() {
    local conf job
    conf="$(python3 scripts/slurm_cluster.py start --nodes 3 --max-array-size 5)" || return 1
    export "${conf#export }"
    cat >"${demo_dir}/demo.sbatch" <<SCRIPT
#!/bin/bash
#SBATCH --job-name=curator-array-demo
#SBATCH --cpus-per-task=1
#SBATCH --output=${logs}/slurm_%A_%a.out
cd "${repo}"
srun --ntasks-per-node=1 "${repo}/entrypoints/curator-array-entrypoint" ${run_options[*]}
SCRIPT
    echo "curator-array demo: sbatch --array=0-3 on a throwaway SLURM cluster (SLURM_CONF=${SLURM_CONF})"
    job="$(INPUT_DIR="$input_dir" OUTPUT_DIR="$output_dir" CHECKPOINT_PATH="$checkpoint" \
        sbatch --parsable --array=0-3 "${demo_dir}/demo.sbatch")"
    echo "  submitted array job ${job}; waiting"
    while [[ -n "$(squeue -h -j "$job" 2>/dev/null)" ]]; do sleep 1; done
    for shard in 0 1 2 3; do
        echo "  element ${shard}: $(grep -Eo 'shard [0-9]+ (complete|is already complete)[^;(]*|error: .*' "${logs}/slurm_${job}_${shard}.out" | tail -1)"
    done
}

run_locally() {
    echo "curator-array demo: 4 local processes standing in for sbatch --array=0-3"
    local pids=() shard
    for shard in 0 1 2 3; do
        SLURM_ARRAY_TASK_ID="$shard" SLURM_ARRAY_TASK_COUNT=4 \
            curator-array run --input-dir "$input_dir" --output-dir "$output_dir" \
                --checkpoint-path "$checkpoint" "${run_options[@]}" \
                >"${logs}/shard_${shard}.log" 2>&1 &
        pids+=("$!")
    done
    for shard in 0 1 2 3; do
        wait "${pids[$shard]}" || true
        echo "  element ${shard}: $(grep -Eo 'shard [0-9]+ (complete|is already complete)[^;(]*|error: .*' "${logs}/shard_${shard}.log" | tail -1)"
    done
}

if can_use_slurm && run_on_slurm; then :; else run_locally; fi

echo
curator-array status --checkpoint-path "$checkpoint"
echo
echo "outputs:   ${output_dir}/ ($(find "$output_dir" -maxdepth 1 -name '*.parquet' | wc -l) Parquet files)"
echo "manifests: ${checkpoint}/.nemo_curator_metadata/.slurm_array_completion/"
echo "logs:      ${logs}/"
echo "retry:     curator-array retry --checkpoint-path ${checkpoint} --format fields   (empty = nothing to do)"
[[ -z "$(curator-array retry --checkpoint-path "$checkpoint" 2>/dev/null)" ]]
