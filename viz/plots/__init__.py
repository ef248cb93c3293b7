"""matplotlib pictures for the article's ideas: attention maps, positional encodings, softmax
temperature, loss curves, gradient descent on a loss surface, decision boundaries.

Every function takes plain NumPy arrays, Python lists or file paths (never the engine), builds
its own `Figure` on the Agg canvas (no pyplot, so nothing leaks between calls), writes `out`
atomically in the format its extension names, and returns a `PlotResult`. With `out=None`
nothing is written: in Jupyter the returned PlotResult shows itself inline as a PNG.
"""

from .attention import ATTENTION_KINDS, plot_attention, plot_attention_maps
from .classification import plot_confusion_matrix, plot_decision_boundary
from .descent import plot_descent_path
from .figure import DEFAULT_DPI, SUPPORTED_FORMATS, Figure, MissingCJKFontWarning, PlotResult
from .loss_curves import METRIC_LABELS, plot_loss_curves, read_metrics
from .positional_encoding import plot_positional_encoding
from .softmax import plot_softmax_temperatures, softmax_with_temperature

__all__ = [
    "ATTENTION_KINDS", "DEFAULT_DPI", "METRIC_LABELS", "SUPPORTED_FORMATS", "Figure", "MissingCJKFontWarning",
    "PlotResult", "plot_attention", "plot_attention_maps", "plot_confusion_matrix", "plot_decision_boundary",
    "plot_descent_path", "plot_loss_curves", "plot_positional_encoding", "plot_softmax_temperatures",
    "read_metrics", "softmax_with_temperature",
]
