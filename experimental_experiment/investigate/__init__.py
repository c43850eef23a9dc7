"""Investigation tools: the export report, the discrepancy finder, piece-by-piece export."""

from ..report import ExportReport
from .discrepancies import (
    Comparison,
    DiscrepancyReport,
    ValueStats,
    compare_intermediates,
    find_bad_rewrite,
    find_discrepancies,
)
from .piece_by_piece import PieceByPieceReport, PieceResult, export_piece_by_piece

__all__ = [
    "Comparison",
    "DiscrepancyReport",
    "ExportReport",
    "ValueStats",
    "compare_intermediates",
    "find_bad_rewrite",
    "find_discrepancies",
    "PieceByPieceReport",
    "PieceResult",
    "export_piece_by_piece",
]
