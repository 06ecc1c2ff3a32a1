"""Every metric a training log (and its config) yields: name -> (unit, meaning).

Rules with ``scope = "log"`` may reference exactly these names, as trace rules reference
``tracedoc.analyses.registry.METRICS``; the engine validates each rule file against its scope's
table. ``None`` means not measurable on this log (e.g. no throughput field), never zero. Steps are
the log's own step numbers.
"""

from __future__ import annotations

# the formats ``tracedoc logs --format-hint`` names (``reader.FORMATS``, kept here so that the CLI can list
# them without importing the readers)
LOG_FORMATS = ("jsonl", "json", "megatron", "deepspeed", "torchtitan", "nanogpt", "llmc", "hf-console", "csv", "text")

LOG_METRICS: dict[str, tuple[str, str]] = {
    # the log
    "log_points": ("count", "logged steps (rows after merging rows of the same step)"),
    "log_first_step": ("step", "first logged step"),
    "log_last_step": ("step", "last logged step"),
    "step_time_p50_s": ("s", "median time per step, from the step-time field or 1/steps-per-second"),
    "log_series": ("name", "the series analysed when engines log side by side (RLHF: 'actor, critic'); None for one"),
    # loss and stability
    "loss_logged": ("bool", "the log has a training-loss field"),
    "loss_nonfinite_count": ("count", "logged steps whose loss is NaN or inf"),
    "loss_nonfinite_first_step": ("step", "first step with a NaN/inf loss"),
    "grad_norm_nonfinite_count": ("count", "logged steps whose gradient norm is NaN or inf"),
    "nan_iterations": ("count", "Megatron's 'number of nan iterations', summed over the log"),
    "skipped_iterations": ("count", "iterations skipped (Megatron counter, DeepSpeed 'skipped'), summed"),
    "skipped_iteration_fraction": ("fraction", "skipped iterations / steps the log spans"),
    "overflow_messages": ("count", "fp16 loss-scale overflow messages (DeepSpeed), the hysteresis form included"),
    "skip_pattern": ("name", "skipped steps: calibration or steady (the normal rhythm of dynamic loss scaling), burst, "
                             "rising, frequent or collapsing; None without skips"),
    "skip_burst_count": ("count", "groups of skipped steps at least 4 and 3x the typical group (or a scale falling 8x)"),
    "loss_scale_min": ("1", "lowest loss scale the log shows (logged, or named by overflow messages)"),
    "loss_scale_max": ("1", "highest loss scale the log shows"),
    "loss_scale_final": ("1", "the last loss scale the log shows"),
    "precision": ("name", "bf16, fp16 or fp32 as the log header or config states; None unknown"),
    "loss_spike_count": ("count", "loss-spike episodes (far above the trailing median in scaled-MAD units)"),
    "loss_spike_first_step": ("step", "first step of the first loss-spike episode"),
    "loss_spike_max_z": ("score", "largest modified z-score of a loss spike"),
    "loss_spike_persistent_count": ("count", "loss-spike episodes after which the loss stays above its old level"),
    "loss_bump_count": ("count", "sustained bumps: the loss well above the level before it for half a window or "
                                 "more, then back"),
    "loss_bump_first_step": ("step", "first step of the first loss bump"),
    "loss_bump_max_ratio": ("ratio", "highest smoothed loss in a bump / the level before it"),
    "grad_norm_spike_count": ("count", "gradient-norm spike episodes"),
    "grad_norm_spike_first_step": ("step", "first step of the first gradient-norm spike"),
    "divergence": ("bool", "the loss trends up to the end of the log (or ends in NaN); None without a loss"),
    "divergence_start_step": ("step", "step where the rise begins (the smoothed minimum)"),
    "divergence_rise_fraction": ("fraction", "(final smoothed loss - its minimum) / |minimum|"),
    "grad_clip_value": ("1", "gradient-clipping threshold from the config (clip_grad, max_grad_norm, gradient_clipping)"),
    "grad_clip_fraction": ("fraction", "share of logged steps whose gradient norm exceeds the clipping threshold"),
    "lr_schedule": ("name", "shape of the learning-rate schedule, e.g. 'warm-up to step 100, then cosine decay'"),
    "lr_jump_count": ("count", "upward jumps (> 10%) of the learning rate after its peak"),
    # throughput
    "throughput_logged": ("bool", "the log has a throughput or step-time field"),
    "throughput_unit": ("name", "tokens/s, samples/s or steps/s"),
    "throughput_p10": ("per s", "10th percentile of throughput after warm-up"),
    "throughput_p50": ("per s", "median throughput after warm-up"),
    "throughput_p90": ("per s", "90th percentile of throughput after warm-up"),
    "throughput_dip_count": ("count", "throughput-dip episodes that are not on a periodic stall"),
    "throughput_dip_first_step": ("step", "first step of the first throughput dip"),
    "throughput_dip_lost_fraction": ("fraction", "time lost in dips (vs the median step) / run time after warm-up"),
    "periodic_stall_period_steps": ("steps", "period of slow steps that recur every k steps; None when none"),
    "periodic_stall_count": ("count", "slow steps on the period"),
    "periodic_stall_first_step": ("step", "first slow step on the period"),
    "periodic_stall_lost_fraction": ("fraction", "time lost in the periodic slow steps / run time after warm-up"),
    "periodic_stall_cause": ("name", "what the log reports right before most periodic slow steps: evaluation, "
                                     "checkpoint save or garbage collection; None when it shows nothing"),
    "step_time_drift_fraction": ("fraction", "change of the median time per unit of work from the first to the last "
                                             "fifth of the steady steps (+0.19: 19% slower at the end)"),
    "throughput_drift_shape": ("name", "gradual, or step (one jump carries most of the change)"),
    "generation_time_fraction": ("fraction", "RLHF: median share of a step's end-to-end time spent generating"),
    "gpu_util_logged": ("bool", "the log has a GPU-utilisation field"),
    "gpu_util_mean_percent": ("percent", "mean logged GPU utilisation after warm-up"),
    "low_gpu_util_fraction": ("fraction", "share of logged steps after warm-up with GPU utilisation below the threshold"),
    "low_gpu_util_episode_count": ("count", "episodes of low GPU utilisation"),
    # configuration
    "config_source": ("name", "where the configuration came from (files, log header); None without one"),
    "config_world_size": ("count", "ranks in the job, from the config; None unknown"),
    "parallel_mismatch": ("bool", "TP x PP x CP (x DP) does not equal (or divide) the world size"),
    "parallel_text": ("name", "the parallel sizes and the world size, as arithmetic"),
    "parallel_fix": ("name", "the config line that makes the sizes consistent"),
    "batch_mismatch": ("bool", "global batch != micro batch x DP x gradient accumulation"),
    "batch_text": ("name", "the batch arithmetic"),
    "batch_fix": ("name", "the config line that makes the batch consistent"),
    "tp_divisibility_problem": ("bool", "sequence length or attention heads / query groups not divisible by TP "
                                        "(or 2 x CP), or layers not divisible by the pipeline stages"),
    "tp_divisibility_text": ("name", "which size does not divide, and by what"),
    "tp_divisibility_fix": ("name", "the config line to change"),
    "fp16_without_loss_scaling": ("bool", "fp16 training with a fixed loss scale of 1 (no loss scaling)"),
    "fp16_text": ("name", "where fp16 and the loss scale were seen"),
    "bf16_unsupported": ("bool", "bf16 on a GPU without native bf16 (compute capability < 8.0)"),
    "gpu_name": ("name", "the GPU named by the config or trace; None unknown"),
}


def describe(name: str) -> str:
    unit, meaning = LOG_METRICS[name]
    return f"{name} [{unit}]: {meaning}"
