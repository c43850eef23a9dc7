"""Second stage of the exporter: the FX graph to ONNX nodes.

The interpreter walks the captured graph one node kind at a time and calls the converter
its registry (``registry.py``) gives for each node: the built-in converters of the aten
operators (``aten/``, one module per family, the complex variants included) under the
user's ``Dispatcher`` when one is given.

It may import the bottom modules of :mod:`experimental_experiment.torch_interpreter`
(errors, options, helpers); never ``capture`` nor ``result``.
"""
