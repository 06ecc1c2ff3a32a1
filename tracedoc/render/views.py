"""The report's view model as typed values: everything a renderer shows, already formatted as text.

``tracedoc.render.viewmodel.build_report`` builds one ``ReportView`` per result; the terminal,
Markdown and HTML renderers all read it, so a number is chosen and formatted in one place. The
timeline is the exception: it is the page script's data (plain JSON), built in ``render.timeline``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Caps:
    """How much of each table a report shows; smaller caps make smaller reports."""

    table_rows: int = 50
    evidence_rows: int = 10
    steps: int = 200
    ranks: int = 256
    name_chars: int = 300
    curve_points: int = 600
    timeline: bool = True
    slowest_excerpt: bool = True
    full_names: bool = False  # kernel names whole in tables (no short forms)


@dataclass
class Column:
    """A column of a table view."""

    key: str
    label: str
    wide: bool  # free text that may wrap (names, stacks)
    num: bool  # right-aligned numbers


@dataclass
class TableView:
    """A table as shown: formatted cells, with how many rows were left out."""

    key: str
    title: str
    columns: list[Column]
    rows: list[list[str]]
    total: int
    left_out: int
    short: list[list[str]] = field(default_factory=list)  # per cell: a kernel name's short form ("" if none)

    def cells(self, key: str) -> list[str]:
        """One column's cells ("—" for every row when the table does not show that column)."""
        keys = [c.key for c in self.columns]
        if key not in keys:
            return ["—"] * len(self.rows)
        i = keys.index(key)
        return [row[i] for row in self.rows]


@dataclass
class Item:
    """A labelled value: a summary tile, an environment row."""

    label: str
    value: str
    key: str = ""
    detail: str = ""  # a tile's caption under its number ("of the H100 SXM dense bf16 peak, 989 TFLOP/s")


@dataclass
class IdleCause:
    """One cause of GPU idle time and its share."""

    cause: str
    label: str
    pct: str


@dataclass
class Segment:
    """A part of a stacked bar; ``width`` in percent of the bar's full length."""

    key: str
    label: str
    pct: str
    width: float
    ns: int = 0
    time: str = ""


@dataclass
class StepBar:
    """One step's bar in the steps chart."""

    step: str
    time: str
    width: float
    segments: list[Segment]
    cells: list[str]


@dataclass
class StepsView:
    """The steps chart: one bar per step, with the legend."""

    bars: list[StepBar]
    total: int
    left_out: int
    legend: list[dict[str, str]]
    columns: list[str]


@dataclass
class HealthView:
    """A health message about the trace."""

    code: str
    level: str
    message: str
    confidence: str


@dataclass
class FindingView:
    """A rule's finding as shown: message, impact, fixes, what-if and evidence."""

    rule_id: str
    name: str
    label: str
    severity: str
    title: str
    message: str
    confidence: str
    is_verdict: bool
    label_meaning: str
    impact_ms: str | None  # "5.2 ms/step", or a time "of the window" for traces without steps
    impact_of: str  # "the step" or "the window"
    impact_pct: str | None
    impact_width: float
    fixes: list[str]
    expect: str
    what_if: str | None  # "step 176 ms → ~121 ms, −31%": the step time predicted once fixed
    what_if_method: str | None  # how it was predicted (a replay, or an upper bound and why)
    evidence: list[TableView]
    minor: bool = False  # explains less than findingview.MIN_IMPACT_FRACTION of the step (or window)


@dataclass
class VerdictView:
    """The verdict line: its labels, confidence and headline."""

    status: str  # findings | advice | clean | withheld | none
    labels: list[str]
    confidence: str | None
    headline: str
    impact: str | None
    withheld: str | None
    label_meanings: list[dict[str, str]] = field(default_factory=list)


@dataclass
class TensorCoreView:
    """How much of the compute ran on Tensor Cores."""

    share: str
    unknown: str
    eligible_off_tc: str
    capable: str
    width: float
    unknown_width: float
    unknown_notable: bool  # more than 5% of compute in kernels whose Tensor Core use is unknown


@dataclass
class MemoryView:
    """Device memory peaks and curve."""

    peak_allocated: str
    peak_reserved: str
    device_memory: str
    peak_fraction: str
    has_data: bool
    curve: dict[str, Any] | None = None  # SVG polylines of allocated and reserved memory


@dataclass
class KernelsView:
    """Kernel counts, durations and launch delay."""

    count: str
    median: str
    under_10us: str
    launch_delay_p50: str
    launch_delay_p50_ns: float | None = None


@dataclass
class DataLoaderView:
    """Time in the DataLoader and the GPU idle meanwhile."""

    share: str  # of the window the main thread spends in DataLoader.__next__
    stall: str  # of the window the GPU idles meanwhile


@dataclass
class QueueStreamView:
    """One stream's launch queue: ops launched and not finished over the span the queue view covers."""

    device: int
    stream: int
    launches: str
    depth_max: str
    depth_mean: str
    blocked: str  # host time blocked on this stream's full queue
    blocked_calls: str
    spark: str  # the depth over time as block characters (text, Markdown)
    points: str  # the depth over time as SVG polyline points (HTML)
    full: bool  # the queue reached its capacity
    capacity_y: float  # y of the capacity line in the chart (off the chart when no queue was full)
    stretch: str  # the time each point of the series covers


@dataclass
class LaunchQueueView:
    """The launch queues of the busiest streams."""

    streams: list[QueueStreamView]
    streams_left_out: int
    deepest: str
    capacity: str
    full: bool
    blocked: str
    note: str  # what the queue says: back-pressure, or no queue filled
    chart_w: float
    chart_h: float


@dataclass
class WindowView:
    """The analysed window of the trace."""

    length: str
    description: str
    kind: str
    steps: int
    step_p50: str | None
    # the steps in words: "4 steps, step p50 45.8 ms", or for iterations detected without step spans
    # "26 intervals between detected iterations, step p50 29.3 ms"
    steps_text: str = ""


@dataclass
class RankView:
    """Everything shown for one rank."""

    rank: int | None
    source_name: str
    header: list[str]
    verdict: VerdictView
    findings: list[FindingView]
    health: list[HealthView]
    warnings: list[str]
    warnings_left_out: int
    window: WindowView
    summary: list[Item]
    window_bar: list[Segment]
    has_gpu_ops: bool
    idle_causes: list[IdleCause]
    steps: StepsView
    timeline: dict[str, Any] | None
    tables: dict[str, TableView]
    tensor_cores: TensorCoreView
    memory: MemoryView
    kernels: KernelsView
    dataloader: DataLoaderView | None
    contents: list[str]  # what a trace without GPU ops holds ("1,024 cpu ops", ...)
    events: str
    environment: list[Item]
    metrics: list[dict[str, str]]
    efficiency: str | None = None  # one line on model FLOPs, TFLOP/s and MFU (None: nothing to say)
    minor_findings: list[FindingView] = field(default_factory=list)  # listed apart, under their impact
    minor_threshold: str = ""  # "2% of the step"
    gpu_figures: list[Item] = field(default_factory=list)  # GPU utilisation, SM efficiency, occupancy
    kernel_classes: list[Segment] = field(default_factory=list)  # GPU op time by class, one stacked bar
    roofline: Any = None  # render.roofline.RooflineView: the per-op roofline (None without GPU kernels)
    launch_queue: LaunchQueueView | None = None  # per stream: ops launched and not finished, blocked host time


@dataclass
class RankTableView:
    """The per-rank table of a job."""

    columns: list[str]
    rows: list[list[str]]
    total: int
    left_out: int


@dataclass
class InputView:
    """An input file and its digest."""

    name: str
    path: str
    sha256: str


@dataclass
class ReportView:
    """The whole report, as every renderer reads it."""

    title: str
    input_name: str
    tracedoc_version: str
    rules_version: str
    command: str
    inputs: list[InputView]
    rank_count: int
    multi_rank: bool
    rank_table: RankTableView | None
    focus_rank: int | None
    focus_source_name: str | None
    ranks: list[RankView]  # the rank shown in detail (the focus rank), when there is one
    job: "JobSectionView | None" = None  # a directory's job view (tracedoc/render/jobview.py), shown first
    job_rank_rows: int = 64
    focus_reason: str = ""
    focus_asked: bool = False  # the focus rank was asked for (--rank N)
    overlay_href: str | None = None  # the Perfetto overlay written beside an HTML report
    not_a_job: str | None = None  # a directory of files that are not one job: why (each is analysed alone)
    not_analysed: list[str] = field(default_factory=list)  # then: the files that could not be read
    config_files: list[str] = field(default_factory=list)  # the pyproject.toml files whose settings were used


# -- the job section (render/jobview.py) -----------------------------------------------------------


@dataclass
class GridView:
    """A table of formatted cells: column headings, rows, and how many rows were left out."""

    columns: list[str]
    rows: list[list[str]]
    left_out: int = 0


@dataclass
class JobFindingView:
    """A job rule's finding as shown."""

    rule_id: str
    label: str
    title: str
    message: str
    fixes: list[str]
    expect: str
    what_if: str | None  # "step 176 ms → ~121 ms, −31%"
    what_if_method: str | None
    impact: str | None  # "9.8 ms per step (9.7% of the step)"


@dataclass
class StragglerView:
    """A straggler rank: how late it is and why."""

    rank: int
    line: str  # how late it arrives, what it costs the others, and why
    breakdown: list[list[str]]  # category, its ms per step, the median rank's, the excess


@dataclass
class HeatCell:
    """A cell of the heatmap: its text and shade."""

    text: str
    shade: float  # 0..1 of the grid's range


@dataclass
class HeatRow:
    """A rank's row of the heatmap."""

    rank: int
    cells: list[HeatCell]


@dataclass
class HeatmapView:
    """The ranks-by-steps heatmap."""

    title: str
    steps: list[int]
    rows: list[HeatRow]
    left_out_ranks: int
    left_out_steps: int


@dataclass
class BarPart:
    """A part of a horizontal bar."""

    key: str
    ms: str  # ms per step, formatted
    width: float  # percent of the longest bar


@dataclass
class CompareView:
    """One rank's step split into lead-in categories and wait (ms per step), as a stacked bar."""

    rank: int
    label: str  # "straggler" or "median rank"
    values: dict[str, float]
    segments: list[BarPart] = field(default_factory=list)


@dataclass
class JobSectionView:
    """The job part of a directory's report: verdict, findings, stragglers, the rank and collective
    tables, rank x step heatmaps and the straggler beside the median rank."""

    labels: list[str]
    confidence: str | None
    findings: list[JobFindingView]
    summary: list[str]
    stragglers: list[StragglerView]
    issues: list[str]
    late_among_present: list[int]
    rank_table: GridView
    collectives: GridView
    heatmaps: list[HeatmapView]
    compare: list[CompareView]
    median_rank: int | None
    # many ranks (render/manyranks.py): the ranks that matter and a summary of the rest (text, Markdown);
    # SVG heatmaps of lateness and wait (HTML); raw values to sort the rank table by (HTML)
    digest: DigestView | None = None
    heat_svgs: list[HeatmapSvgView] = field(default_factory=list)
    rank_sort: list[list[Any]] = field(default_factory=list)


@dataclass
class DigestRow:
    """A rank shown in full in a many-rank report: its cells (``DigestView.columns``)."""

    rank: int
    cells: list[str]


@dataclass
class DigestView:
    """The stragglers, the median rank and the ranks that wait most; one line per measure for the rest."""

    columns: list[str]
    rows: list[DigestRow]
    rest: list[str]
    total: int


@dataclass
class HeatmapSvgView:
    """A rank x step heatmap drawn as inline SVG (markup built by tracedoc from numbers only)."""

    title: str
    svg: str
    note: str
