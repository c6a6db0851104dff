"""What changed between two reports, in which layer, and whether it is more than noise.

Order of the answer: environment differences first (a different torch, CPU or thread setting
explains most differences), then how the machine itself moved (``drift``: the
probe timed in every run, instruction counts where the machine counts them), then metrics
matched by name and source, judged with a proper test where both sides have repeated samples,
then rows matched by key in every layer, sorted by the time they moved.

Two kinds of pairs of reports are judged differently:

- two reports of one ``perfstack ab`` session: their baseline runs were interleaved, so the
  i-th samples form a pair and a paired test sees through drift (``stats.compare_paired``);
- two separate sessions: each session's repeats agree more closely with each other than with
  another session's, so a two-sample test alone calls machine drift a change. A change counts
  only when the test says so, it exceeds the between-session noise, and it still does, in the
  same direction, once the machine's drift (the probes) is taken out.

Rows of a profiled run are single measurements (one run per backend): they are judged against
the run-to-run noise of the wall time, corrected by the probes of the two runs that measured
them, and the output says so. Rows that restate a metric (resources' medians of the baseline
runs) share that metric's verdict.
"""


from perfstack.analysis.diff.changes import EnvChange as EnvChange
from perfstack.analysis.diff.changes import MetricChange as MetricChange
from perfstack.analysis.diff.comparison import Diff as Diff
from perfstack.analysis.diff.comparison import comparable as comparable
from perfstack.analysis.diff.comparison import diff as diff
from perfstack.analysis.diff.comparison import is_paired as is_paired
from perfstack.analysis.diff.environment import ENV_FACTS as ENV_FACTS
from perfstack.analysis.diff.environment import environment_changes as environment_changes
from perfstack.analysis.diff.family import FAMILY_ALPHA as FAMILY_ALPHA
from perfstack.analysis.diff.family import FIGURE_WEIGHT as FIGURE_WEIGHT
from perfstack.analysis.diff.metrics import metric_changes as metric_changes
