"""A training log's metrics, and its config's: what ``tracedoc logs`` measures.

Steps are the log's own step numbers."""

from __future__ import annotations

import math

from .metric import Metric, topic

LOG_METRICS: tuple[Metric, ...] = (
    *topic(
        "log",
        "log",
        (
            Metric("log_points", "count", None, "logged steps (rows after merging rows of the same step)"),
            Metric("log_first_step", "step", None, "first logged step"),
            Metric("log_last_step", "step", None, "last logged step"),
            Metric(
                "step_time_p50_s", "s", None, "median time per step, from the step-time field or 1/steps-per-second"
            ),
            Metric(
                "log_series",
                "name",
                None,
                "the series analysed when engines log side by side (RLHF: 'actor, critic'); None for one",
            ),
        ),
    ),
    *topic(
        "log",
        "stability",
        (
            Metric("loss_logged", "bool", None, "the log has a training-loss field"),
            Metric("loss_nonfinite_count", "count", None, "logged steps whose loss is NaN or inf"),
            Metric("loss_nonfinite_first_step", "step", None, "first step with a NaN/inf loss"),
            Metric("grad_norm_nonfinite_count", "count", None, "logged steps whose gradient norm is NaN or inf"),
            Metric("nan_iterations", "count", None, "Megatron's 'number of nan iterations', summed over the log"),
            Metric(
                "skipped_iterations",
                "count",
                None,
                "iterations skipped (Megatron counter, DeepSpeed 'skipped'), summed",
            ),
            Metric("skipped_iteration_fraction", "fraction", None, "skipped iterations / steps the log spans"),
            Metric(
                "overflow_messages",
                "count",
                None,
                "fp16 loss-scale overflow messages (DeepSpeed), the hysteresis form included",
            ),
            Metric(
                "skip_pattern",
                "name",
                None,
                "skipped steps: calibration or steady (the normal rhythm of dynamic "
                "loss scaling), burst, rising, frequent or collapsing; None without skips",
            ),
            Metric(
                "skip_burst_count",
                "count",
                None,
                "groups of skipped steps at least 4 and 3x the typical group (or a scale falling 8x)",
            ),
            Metric(
                "loss_scale_min", "1", None, "lowest loss scale the log shows (logged, or named by overflow messages)"
            ),
            Metric("loss_scale_max", "1", None, "highest loss scale the log shows"),
            Metric("loss_scale_final", "1", None, "the last loss scale the log shows"),
            Metric("precision", "name", None, "bf16, fp16 or fp32 as the log header or config states; None unknown"),
            Metric(
                "loss_spike_count",
                "count",
                None,
                "loss-spike episodes (far above the trailing median in scaled-MAD units)",
            ),
            Metric("loss_spike_first_step", "step", None, "first step of the first loss-spike episode"),
            Metric("loss_spike_max_z", "score", None, "largest modified z-score of a loss spike"),
            Metric(
                "loss_spike_persistent_count",
                "count",
                None,
                "loss-spike episodes after which the loss stays above its old level",
            ),
            Metric(
                "loss_bump_count",
                "count",
                None,
                "sustained bumps: the loss well above the level before it for half a window or more, then back",
            ),
            Metric("loss_bump_first_step", "step", None, "first step of the first loss bump"),
            Metric("loss_bump_max_ratio", "ratio", None, "highest smoothed loss in a bump / the level before it"),
            Metric("grad_norm_spike_count", "count", None, "gradient-norm spike episodes"),
            Metric("grad_norm_spike_first_step", "step", None, "first step of the first gradient-norm spike"),
            Metric(
                "divergence",
                "bool",
                None,
                "the loss trends up to the end of the log (or ends in NaN); None without a loss",
            ),
            Metric("divergence_start_step", "step", None, "step where the rise begins (the smoothed minimum)"),
            Metric("divergence_rise_fraction", "fraction", None, "(final smoothed loss - its minimum) / |minimum|"),
            Metric(
                "loss_regression",
                "bool",
                None,
                "the loss rises window after window (epochs, or blocks of points) to "
                "the end of the log, from its lowest level so far; None without a loss",
            ),
            Metric("loss_regression_start_step", "step", None, "first step of the window the rise starts from"),
            Metric(
                "loss_regression_rise_fraction",
                "fraction",
                None,
                "last window's level / the level the rise starts from - 1",
            ),
            Metric(
                "loss_regression_after_resume_step",
                "step",
                None,
                "the resume the rise follows (the first step logged after it); None when it follows none",
            ),
            Metric(
                "grad_clip_value",
                "1",
                None,
                "gradient-clipping threshold from the config (clip_grad, max_grad_norm, gradient_clipping)",
            ),
            Metric(
                "grad_clip_fraction",
                "fraction",
                None,
                "share of logged steps whose gradient norm exceeds the clipping threshold",
            ),
            Metric(
                "lr_schedule",
                "name",
                None,
                "shape of the learning-rate schedule, e.g. 'warm-up to step 100, then cosine decay'",
            ),
            Metric("lr_jump_count", "count", None, "upward jumps (> 10%) of the learning rate after its peak"),
        ),
    ),
    *topic(
        "log",
        "throughput",
        (
            Metric("throughput_logged", "bool", None, "the log has a throughput or step-time field"),
            Metric("throughput_unit", "name", None, "tokens/s, samples/s or steps/s"),
            Metric("throughput_p10", "per s", None, "10th percentile of throughput after warm-up"),
            Metric("throughput_p50", "per s", None, "median throughput after warm-up"),
            Metric("throughput_p90", "per s", None, "90th percentile of throughput after warm-up"),
            Metric("throughput_dip_count", "count", None, "throughput-dip episodes that are not on a periodic stall"),
            Metric("throughput_dip_first_step", "step", None, "first step of the first throughput dip"),
            Metric(
                "throughput_dip_lost_fraction",
                "fraction",
                None,
                "time lost in dips (vs the median step) / run time after warm-up",
            ),
            Metric(
                "periodic_stall_period_steps",
                "steps",
                None,
                "period of slow steps that recur every k steps; None when none",
            ),
            Metric("periodic_stall_count", "count", None, "slow steps on the period"),
            Metric("periodic_stall_first_step", "step", None, "first slow step on the period"),
            Metric(
                "periodic_stall_lost_fraction",
                "fraction",
                None,
                "time lost in the periodic slow steps / run time after warm-up",
            ),
            Metric(
                "periodic_stall_period_text",
                "name",
                None,
                "the period as logged: '190', or '189-190' where the spacing varies by a step or two",
            ),
            Metric("periodic_stall_slowdown", "ratio", None, "median time of a periodic slow step / the median step"),
            Metric(
                "periodic_pattern_count",
                "count",
                None,
                "periodic patterns worth reporting (each costs at least "
                "0.2% of the run time); the metrics above describe the costliest",
            ),
            Metric(
                "periodic_stall_cause",
                "name",
                None,
                "what the log reports right before most periodic slow steps: "
                "evaluation, checkpoint save or garbage collection; None when it shows nothing",
            ),
            Metric(
                "step_time_drift_fraction",
                "fraction",
                None,
                "change of the median time per unit of work from the "
                "first to the last fifth of the steady steps (+0.19: 19% slower at the end)",
                bounds=(-1.0, math.inf),
            ),
            Metric("throughput_drift_shape", "name", None, "gradual, or step (one jump carries most of the change)"),
            Metric(
                "generation_time_fraction",
                "fraction",
                None,
                "RLHF: median share of a step's end-to-end time spent generating",
            ),
            Metric("gpu_util_logged", "bool", None, "the log has a GPU-utilisation field"),
            Metric("gpu_util_mean_percent", "percent", None, "mean logged GPU utilisation after warm-up"),
            Metric(
                "low_gpu_util_fraction",
                "fraction",
                None,
                "share of logged steps after warm-up with GPU utilisation below the threshold",
            ),
            Metric("low_gpu_util_episode_count", "count", None, "episodes of low GPU utilisation"),
        ),
    ),
    *topic(
        "log",
        "config",
        (
            Metric(
                "config_source", "name", None, "where the configuration came from (files, log header); None without one"
            ),
            Metric("config_world_size", "count", None, "ranks in the job, from the config; None unknown"),
            Metric("parallel_mismatch", "bool", None, "TP x PP x CP (x DP) does not equal (or divide) the world size"),
            Metric("parallel_text", "name", None, "the parallel sizes and the world size, as arithmetic"),
            Metric("parallel_fix", "name", None, "the config line that makes the sizes consistent"),
            Metric("batch_mismatch", "bool", None, "global batch != micro batch x DP x gradient accumulation"),
            Metric("batch_text", "name", None, "the batch arithmetic"),
            Metric("batch_fix", "name", None, "the config line that makes the batch consistent"),
            Metric(
                "tp_divisibility_problem",
                "bool",
                None,
                "sequence length or attention heads / query groups not "
                "divisible by TP (or 2 x CP), or layers not divisible by the pipeline stages",
            ),
            Metric("tp_divisibility_text", "name", None, "which size does not divide, and by what"),
            Metric("tp_divisibility_fix", "name", None, "the config line to change"),
            Metric(
                "fp16_without_loss_scaling",
                "bool",
                None,
                "fp16 training with a fixed loss scale of 1 (no loss scaling)",
            ),
            Metric("fp16_text", "name", None, "where fp16 and the loss scale were seen"),
            Metric("bf16_unsupported", "bool", None, "bf16 on a GPU without native bf16 (compute capability < 8.0)"),
            Metric("gpu_name", "name", None, "the GPU named by the config or trace; None unknown"),
        ),
    ),
)
