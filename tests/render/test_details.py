"""What a viewer shows about a node (analysis.render.details) and its label in the graph
(analysis.render.module_graphs.kernel_label), for a library call that absorbed ops into its
epilogue: the recorded H200 compile of mlp with Triton GEMMs off (real XLA:GPU output), whose
dense1 is one cuBLASLt call with the BIAS_RELU epilogue."""

from __future__ import annotations

import os

import pytest

from analysis.bundle.core import Bundle, analyze
from analysis.render.details import EPILOGUE_HINT, HOW_WORDS, node_details
from analysis.render.module_graphs import kernel_label, post_graph
from tests.paths import ROOT


@pytest.fixture(scope="module")
def mlp_cublas() -> Bundle:
    path = os.path.join(ROOT, "sample_models", "recorded", "h200", "mlp.triton-gemm-off.bundle.json")
    return analyze(Bundle.load(path))


def test_the_library_calls_node_names_its_epilogue(mlp_cublas):
    k = mlp_cublas.kernel("cublas-lt-matmul.3")
    assert kernel_label(k).splitlines() == ["cublas-lt-matmul.3", "cuBLAS · __cublas$lt$matmul",
                                            "+ bias + ReLU epilogue"]
    assert kernel_label(mlp_cublas.kernel("cublas-lt-matmul.4")).splitlines()[-1] == "+ bias epilogue"
    g = post_graph(mlp_cublas.module("hlo_after"), mlp_cublas.kernels)
    assert "+ bias + ReLU epilogue" in g.nodes["k:cublas-lt-matmul.3"].label


def test_details_name_the_epilogue_and_list_the_absorbed_ops_as_fused(mlp_cublas):
    d = node_details(mlp_cublas)
    k = d["k:cublas-lt-matmul.3"]
    assert k["facts"][0] == "cuBLASLt matmul + bias + ReLU epilogue"
    hints = {row[0]: row[3] for row in k["ops"]}
    # the dot by its own metadata; the bias add and the ReLU are fused in the call, not "read"
    assert hints["dot_general.2"] == ""
    assert hints["add.11"] == EPILOGUE_HINT and hints["max.3"] == EPILOGUE_HINT
    assert HOW_WORDS["operand"] not in hints.values() and HOW_WORDS["user"] not in hints.values()
    assert d["op:max.3"]["how"] == HOW_WORDS["epilogue"] and d["op:max.3"]["kernels"] == ["cublas-lt-matmul.3"]
