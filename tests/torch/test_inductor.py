"""XLA beside Inductor: the same torch.nn module compiled by XLA (through torchax) and by
torch.compile's Inductor (CPU) in one job; what each fused, layer by layer; a model Inductor
cannot compile, or one that is not PyTorch's, is one line. The facts asserted come from the
module written here (its layers, the ops they call), checked against what Inductor 2.13 and XLA
really do on the CPU: Inductor leaves a Linear's bias in its library call (addmm) and the GELU
after it a C++ kernel of its own, XLA fuses that bias add into the GELU's kernel; both fuse the
residual add with the LayerNorm after it. Skipped where the [torch] extra is not installed."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torchax", reason="the [torch] extra (torch, torchax) is not installed here")

from analysis.bundle.core import Bundle  # noqa: E402
from analysis.compile import inductor, recipe  # noqa: E402
from analysis.compile.load import load_source  # noqa: E402
from analysis.errors import ExplorerError  # noqa: E402
from analysis.studies.inductor import ROOT, beside_inductor, call_verdict, differences  # noqa: E402

# up -> act -> down, then the residual add in the model's own forward and norm after it
MLP = '''import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.up = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.down = nn.Linear(4 * d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.down(self.act(self.up(x))))


torch.manual_seed(0)
model = MLP().eval()


def example_inputs():
    return (torch.randn(8, 32),)
'''

# an op of the user's own: torchax is told how to run it, Dynamo has no fake kernel for it
NO_FAKE = '''import torch
import torchax
from torch import nn


@torch.library.custom_op("xe_test::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


torchax.default_env().override_op_definition(torch.ops.xe_test.twice.default, lambda x: x * 2)


class M(nn.Module):
    def forward(self, x):
        return twice(x) + 1


model = M()


def example_inputs():
    return (torch.randn(4, 4),)
'''


@pytest.fixture(scope="module")
def mlp():
    """The MLP through XLA, measured, and through Inductor, measured beside it (one compile of
    each for every test here)."""
    c = recipe.compile(load_source(MLP, "mlp_torch.py", "mlp_torch"), "cpu")
    recipe.measured(c, measure_it=True, compare=False)
    recipe.beside_inductor(c, measure_it=True)
    return c.bundle


def _one(kernels, **match):
    found = [k for k in kernels if all(k.get(key) == v for key, v in match.items())]
    assert len(found) == 1, (match, [(k["name"], k["module"]) for k in kernels])
    return found[0]


def test_inductor_keeps_each_linear_in_a_library_call_and_the_gelu_a_kernel_of_its_own(mlp):
    ks = mlp.inductor["kernels"]
    for layer in ("up", "down"):  # the Linear's matmul and its bias: one addmm, a library routine
        k = _one(ks, module=layer)
        assert k["kind"] == "extern" and k["name"] == "extern_kernels.addmm"
        assert k["aten"] == ["aten::addmm"] and "BLAS" in k["library"]
    gelu = _one(ks, module="act")
    assert gelu["kind"] == "cpp" and gelu["aten"] == ["aten::gelu"] and gelu["modules"] == ["act"]
    assert "gelu" in gelu["name"]
    # nn.GELU() is the exact GELU: its C++ kernel computes erf
    assert "erf" in mlp.inductor["code"][inductor.code_key(0, gelu["name"])]
    assert [k["module"] for k in ks] == ["up", "act", "down", "norm"]  # in the order the module runs them


def test_inductor_fuses_the_residual_add_into_the_layer_norm(mlp):
    norm = _one(mlp.inductor["kernels"], module="norm")
    assert norm["kind"] == "cpp"
    assert set(norm["modules"]) == {"", "norm"}  # the add is the model's own forward's
    assert ["", "aten::add"] in norm["parts"] and ["norm", "aten::native_layer_norm"] in norm["parts"]


def test_xla_fuses_the_bias_add_into_the_gelu_where_inductor_does_not(mlp):
    r = beside_inductor(mlp)
    act = next(row for row in r.rows if row.layer == "act")
    (x,) = act.xla
    assert "aten::gelu" in x.ops and x.also == ("up",)  # up's bias add is in XLA's GELU kernel
    (i,) = act.inductor
    assert i.ops == ("aten::gelu",) and i.also == ()
    up = next(row for row in r.rows if row.layer == "up")
    assert any(k.name == x.name and not k.home for k in up.xla)  # listed under up too, timed under act
    assert len(up.inductor) == 1 and "BLAS" in up.inductor[0].what
    assert {row.layer for row in r.rows} == {"up", "act", "down", "norm", ROOT}
    assert r.inductor_kernels == 4 and r.inductor_cpp == 2 and r.inductor_library == 2


def test_the_differences_name_the_kernel_that_crossed_a_border_and_the_layers_split_unalike(mlp):
    said = differences(beside_inductor(mlp))
    act = next(row for row in beside_inductor(mlp).rows if row.layer == "act")
    (x,) = act.xla
    # XLA's GELU kernel holds up's bias add: it fused across the border of up and act; Inductor did not
    crossed = [d for d in said if d.startswith(f"XLA's `{x.name}`")]
    assert len(crossed) == 1 and "`aten::gelu` of `act`" in crossed[0] and "of `up`" in crossed[0]
    assert crossed[0].endswith("Inductor keeps them in separate kernels.")
    # Inductor fused the model's own residual add into norm's kernel, XLA too (one kernel holds both)
    ind = [d for d in said if d.startswith("Inductor's ")]
    assert all("`norm`" in d for d in ind)
    # a layer is said to split unalike only where the two counts differ, with both counts
    r = beside_inductor(mlp)
    for row in r.rows:
        line = next((d for d in said if d.startswith(f"`{row.layer}`: ")), None)
        differ = bool(row.xla) and bool(row.inductor) and len(row.xla) != len(row.inductor)
        assert (line is not None) == differ, row.layer
        if line:
            assert f"in {len(row.xla)} XLA kernels" in line and f"in {len(row.inductor)} Inductor kernel" in line


def test_measured_each_call_site_and_both_whole_calls_alternated(mlp):
    ind = mlp.inductor
    assert ind["measured"] and ind["alternation"]["calls"] == ind["xla"]["alternated_calls"]
    assert ind["compiled"]["alternated_calls"] == ind["xla"]["alternated_calls"] >= 15
    for k in ind["kernels"]:
        assert k["calls"] == inductor.PROFILED_CALLS and k["q1_s"] <= k["median_s"] <= k["q3_s"]
    r = beside_inductor(mlp)
    assert r.verdict == call_verdict(ind) and r.verdict  # a verdict, or "within the spread" in words
    if r.xla_call.parts_from(r.inductor_call):
        assert r.verdict.startswith("Inductor's module is")
    else:
        assert r.verdict.startswith("within the spread")


# a graph break between the two Linears: Dynamo hands Inductor two graphs
BROKEN = '''import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(16, 16)
        self.second = nn.Linear(16, 16)

    def forward(self, x):
        x = torch.relu(self.first(x))
        torch._dynamo.graph_break()
        return torch.relu(self.second(x))


torch.manual_seed(0)
model = Net().eval()


def example_inputs():
    return (torch.randn(4, 16),)
'''


def test_a_graph_break_gives_two_graphs_each_kernel_in_its_own():
    c = recipe.compile(load_source(BROKEN, "broken.py", "broken"), "cpu")
    recipe.beside_inductor(c, measure_it=True)
    ind = c.bundle.inductor
    assert ind["graphs"] == 2
    ks = ind["kernels"]
    assert [(k["graph"], k["module"], k["aten"]) for k in ks] == [
        (0, "first", ["aten::addmm"]), (0, "", ["aten::relu"]), (1, "second", ["aten::addmm"]), (1, "", ["aten::relu"])]
    relu = [k for k in ks if k["kind"] == "cpp"]
    # each graph's relu kernel has a source of its own, and each call site its times
    assert {inductor.code_key(k["graph"], k["name"]) for k in relu} <= set(ind["code"]) and len(ind["code"]) == 2
    assert all(k["calls"] == inductor.PROFILED_CALLS for k in ks)
    assert set(ind["graph_calls"]) == {"0", "1"}


def test_the_section_survives_the_bundles_json(mlp):
    b = Bundle.from_json(mlp.to_json())
    assert b.inductor["kernels"] == mlp.inductor["kernels"]
    assert b.inductor["code"] == mlp.inductor["code"]


def test_a_model_inductor_cannot_compile_is_one_line_at_the_users_code():
    c = recipe.compile(load_source(NO_FAKE, "no_fake.py", "no_fake"), "cpu")  # XLA compiles it
    with pytest.raises(ExplorerError) as e:
        recipe.beside_inductor(c, measure_it=False)
    err = e.value
    assert err.phase == "inductor" and err.file == "no_fake.py"
    assert err.message.startswith("Inductor could not compile the model:") and "fake" in err.message
    assert "xe_test" in err.message  # Dynamo's explanation names the op the file defines
    assert "\n" not in err.one_line() and "Traceback" not in err.one_line()


def test_a_model_that_is_not_pytorchs_is_refused():
    c = recipe.compile(load_source("import jax.numpy as jnp\nmodel = jnp.tanh\n"
                                   "def example_inputs():\n    return (jnp.ones(4),)\n", "jax_fn.py", "jax_fn"), "cpu")
    with pytest.raises(ExplorerError) as e:
        recipe.beside_inductor(c, measure_it=False)
    assert e.value.phase == "options" and "PyTorch models only" in e.value.message


def test_module_paths_name_layers_as_the_xla_side_does():
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(2, 2), nn.GELU())

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Block(), Block()])
            self.heads = nn.ModuleDict({"a": nn.Linear(2, 2)})

    net = Net()
    assert inductor.module_path(net, "L['self'].layers[1].mlp[1]") == "layers.1/mlp/1"
    assert inductor.module_path(net, "L['self'].layers[0].mlp._modules['0']") == "layers.0/mlp/0"
    assert inductor.module_path(net, "L['self'].heads['a']") == "heads.a"
    assert inductor.module_path(net, "L['self']") == ""


def _section(**change):
    good = {"torch": "2.13.0", "device": "cpu", "mode": "default", "graphs": 1, "compile_s": 1.0,
            "kernels": [{"name": "cpp_fused_gelu_0", "kind": "cpp", "handle": 1, "graph": 0, "library": None,
                         "aten": ["aten::gelu"], "modules": ["act"], "module": "act", "parts": [["act", "aten::gelu"]],
                         "source_nodes": ["mul"], "median_s": 1e-6, "q1_s": 1e-6, "q3_s": 2e-6, "calls": 20}],
            "code": {"cpp_fused_gelu_0": "void kernel() {}"}, "truncated": False, "measured": False,
            "xla": None, "compiled": None, "alternation": None, "profiled_calls": 20, "graph_calls": None}
    good.update(change)
    return good


def _load(mlp, section):
    d = json.loads(mlp.to_json())
    d["inductor"] = section
    return Bundle.from_json(json.dumps(d))


def test_a_good_section_loads_and_loses_what_it_should_not_hold(mlp):
    b = _load(mlp, _section(extra="<script>", kernels=[dict(_section()["kernels"][0], html="<b>")]))
    assert "extra" not in b.inductor and "html" not in b.inductor["kernels"][0]
    assert b.inductor["kernels"][0]["aten"] == ["aten::gelu"]
    # measured is what its numbers say: without both sides' calls it is not
    assert _load(mlp, _section(measured=True)).inductor["measured"] is False


@pytest.mark.parametrize("change, where", [
    ({"kernels": {"a": 1}}, "inductor.kernels"),
    ({"kernels": [{"name": "k", "kind": "python"}]}, "inductor.kernels[0]"),
    ({"kernels": [dict(_section()["kernels"][0], aten=[1, 2])]}, "inductor.kernels[0].aten"),
    ({"kernels": [dict(_section()["kernels"][0], median_s=-1.0)]}, "inductor.kernels[0].median_s"),
    ({"kernels": [dict(_section()["kernels"][0], median_s="fast")]}, "inductor.kernels[0].median_s"),
    ({"kernels": [dict(_section()["kernels"][0], parts=[["a"]])]}, "inductor.kernels[0].parts"),
    ({"kernels": [dict(_section()["kernels"][0], name="k" * 301)]}, "inductor.kernels[0].name"),
    ({"kernels": [_section()["kernels"][0]] * 4001}, "inductor.kernels"),
    ({"code": {"k": "x" * 60_001}}, "inductor.code"),
    ({"code": {f"k{i}": "x" * 60_000 for i in range(51)}}, "inductor.code"),
    ({"xla": {"call_median_s": float("inf")}}, "inductor.xla.call_median_s"),
    ({"alternation": {"calls": 3, "stopped": "bored"}}, "inductor.alternation"),
    ({"graphs": -1}, "inductor.graphs"),
])
def test_a_hostile_section_is_refused_in_one_line_naming_where(mlp, change, where):
    with pytest.raises(ExplorerError) as e:
        _load(mlp, _section(**change))
    assert e.value.phase == "load" and where in e.value.message
    assert "\n" not in e.value.one_line()


def test_a_section_that_is_not_an_object_is_refused(mlp):
    with pytest.raises(ExplorerError) as e:
        _load(mlp, ["kernels"])
    assert "'inductor' must be an object or null" in e.value.message


def test_the_gallery_lesson_on_torch_mlp_holds_beside_inductor_and_only_there(mlp):
    """The gallery's torch_mlp through both compilers in one sandboxed job: the lesson on where they
    fuse differently holds claim by claim; a pasted model (the MLP above) has no gallery lesson."""
    from analysis.service.job import Job
    from analysis.service.worker import run_job
    from sample_models import gallery
    from sample_models.lessons_torch import inductor_lesson

    b = run_job(Job(kind="gallery", name="torch_mlp", filename=str(gallery()["torch_mlp"].path), backend="cpu",
                    inductor=True)).bundle
    les = inductor_lesson(b)
    assert les is not None and len(les.checks) == 4
    assert [c.claim for c in les.checks if not c.holds] == []
    assert inductor_lesson(mlp) is None
    # a bundle without Inductor's compile has none either
    b.inductor = None
    assert inductor_lesson(b) is None
