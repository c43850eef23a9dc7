"""Investigation tools: the export report, the discrepancy finder."""

from ..report import ExportReport
from .discrepancies import (
    Comparison, DiscrepancyReport, ValueStats, compare_intermediates, find_bad_rewrite,
    find_discrepancies,
)

__all__ = [
    "Comparison", "DiscrepancyReport", "ExportReport", "ValueStats", "compare_intermediates",
    "find_bad_rewrite", "find_discrepancies",
]
