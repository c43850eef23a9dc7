"""Last stage of the exporter: from the converted graph to what the user receives.

``export_program`` runs the stages in order (capture, conversion, optimization), then
builds the :class:`ExportResult`, keeps large weights outside the graph, and compares
the ONNX model with the eager model on request (``verify``).

It may import ``capture``, ``convert`` and the bottom modules.
"""
