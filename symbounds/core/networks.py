"""The one loader of every network a user names: a model file of either format, or an ONNX graph.

``symbounds-transformer/1`` files give a :class:`~symbounds.core.transformer.Transformer`,
``symbounds-graph/1`` files a layer :class:`~symbounds.core.graph.Graph`; an ``.onnx`` file is
imported on the fly (:func:`symbounds.core.onnx_graph.import_onnx_network`: a Transformer where
the graph is one, else a layer graph).
"""

from __future__ import annotations

from .files import read_json_file
from .graph_file import reject_float, network_from_json

__all__ = ["load_network"]


def load_network(path: str):
    """The network of a model file (either format) or of an ``.onnx`` graph; one-line
    :class:`~symbounds.core.modelfile.ModelFileError` or
    :class:`~symbounds.core.onnx_io.OnnxError` otherwise."""
    if path.endswith(".onnx"):
        from .onnx_graph import import_onnx_network

        return import_onnx_network(path)
    from .modelfile import ModelFileError

    return network_from_json(read_json_file(path, ModelFileError, reject_float, reject_float))
