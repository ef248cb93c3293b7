"""matplotlib pictures for the article's ideas; the module moved into this package, to be split by concept."""

from .attention import (
    ATTENTION_KINDS,
    DEFAULT_DPI,
    METRIC_LABELS,
    SUPPORTED_FORMATS,
    Figure,
    MissingCJKFontWarning,
    PlotResult,
    plot_attention,
    plot_attention_maps,
    plot_confusion_matrix,
    plot_decision_boundary,
    plot_descent_path,
    plot_loss_curves,
    plot_positional_encoding,
    plot_softmax_temperatures,
    read_metrics,
    softmax_with_temperature,
)

__all__ = [
    "ATTENTION_KINDS", "DEFAULT_DPI", "METRIC_LABELS", "SUPPORTED_FORMATS", "Figure", "MissingCJKFontWarning",
    "PlotResult", "plot_attention", "plot_attention_maps", "plot_confusion_matrix", "plot_decision_boundary",
    "plot_descent_path", "plot_loss_curves", "plot_positional_encoding", "plot_softmax_temperatures",
    "read_metrics", "softmax_with_temperature",
]
