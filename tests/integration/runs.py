"""Run one shard in-process on the cluster this test process is connected to."""

from curator_array.checkpoint import AttemptId
from curator_array.jobenv import JobEnvironment
from curator_array.ray_data import RayDataExecutor, describe_cluster
from curator_array.runner import prepare_shard, run_prepared


def run_shard(pipeline, output_dir, checkpoint, shard=None, executor=None):
    executor = executor or RayDataExecutor(progress_bars=False)
    job = JobEnvironment.from_env({})
    prepared = prepare_shard(pipeline, checkpoint, shard)
    return run_prepared(prepared, executor.execute, job, AttemptId.from_job(job), describe_cluster, output_dir)
