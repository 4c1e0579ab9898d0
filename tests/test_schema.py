"""harness/schema.py + expressions.py: the official models' validators and defaults, and our strict YAML.

Official files ignore unknown keys (as NVIDIA's evaluator does); our definitions/*.yaml reject them, and every
error a user can cause is ONE line `path: field: ...`.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from harness.errors import SchemaError
from harness.expressions import safe_eval
from harness.schema import (
    CompileOptions,
    Correctness,
    Definition,
    Environment,
    Evaluation,
    EvaluationStatus,
    Performance,
    ScalarInput,
    Solution,
    ToleranceSpec,
    Trace,
    Workload,
    load_definition_file,
    load_definition_json,
    load_solution_json,
    load_workloads_jsonl,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "schema"
TINY_YAML = FIXTURES / "tiny.yaml"
TINY_REFERENCE = FIXTURES / "tiny_reference.py"

# ------------------------------------------------------------------------------------------- helpers


def _definition(**over) -> dict:
    """A valid official definition.json as a dict; keyword arguments replace top-level keys."""
    data = {
        "name": "toy",
        "axes": {
            "n": {"type": "var"},
            "d": {"type": "const", "value": 4},
            "nd": {"type": "expr", "expression": "n * d"},
        },
        "inputs": {
            "x": {"shape": ["n", "d"], "dtype": "float32"},
            "w": {"shape": ["d", "d"], "dtype": "float32"},
        },
        "outputs": {"y": {"shape": ["n", "d"], "dtype": "float32"}},
        "reference": "import torch\n\ndef run(x, w):\n    return x @ w\n",
    }
    data.update(over)
    return data


def _reject(model, data, *fragments: str) -> str:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    text = str(info.value)
    for fragment in fragments:
        assert fragment in text, text
    return text


def _solution(**spec_over) -> dict:
    spec = {
        "languages": ["triton"],
        "target_hardware": ["B200"],
        "entry_point": "kernel.py::run",
    }
    spec.update(spec_over.pop("spec", {}))
    data = {
        "name": "s",
        "definition": "toy",
        "author": "me",
        "spec": spec,
        "sources": [{"path": "kernel.py", "content": "def run(): pass\n"}],
    }
    data.update(spec_over)
    return data


def _evaluation(status: str, *, correctness: bool, performance: bool) -> dict:
    return {
        "status": status,
        "environment": {"hardware": "cpu"},
        "timestamp": "2026-01-01T00:00:00",
        "correctness": {"max_relative_error": 0.0, "max_absolute_error": 0.0} if correctness else None,
        "performance": {"latency_ms": 1.0} if performance else None,
    }


# ------------------------------------------------------------------------------ Definition validators


def test_valid_definition_keeps_order_and_digit_literals():
    d = Definition.model_validate(
        _definition(
            inputs={
                "w": {"shape": ["2", "d"], "dtype": "float32"},
                "x": {"shape": ["n", "d"], "dtype": "float32"},
            },
            reference="def run(w, x):\n    return x\n",
        )
    )
    assert list(d.inputs) == ["w", "x"]
    assert d.shape_of(d.inputs["w"], d.resolve_axes({"n": 3})) == (2, 4)


def test_missing_run():
    _reject(Definition, _definition(reference="def forward(x, w):\n    return x\n"), "def run")


def test_async_run_is_not_a_run():
    _reject(Definition, _definition(reference="async def run(x, w):\n    return x\n"), "def run")


def test_run_nested_in_a_class_is_not_top_level():
    source = "class M:\n    def run(self, x, w):\n        return x\n"
    _reject(Definition, _definition(reference=source), "def run")


def test_bad_python():
    _reject(Definition, _definition(reference="def run(x, w:\n    return x\n"), "does not parse")


@pytest.mark.parametrize(
    "signature",
    ["x", "w, x", "x, w, z", "x, *, w", "x, *w"],
    ids=["too-few", "swapped", "too-many", "keyword-only", "varargs"],
)
def test_run_parameters_must_equal_inputs(signature):
    _reject(Definition, _definition(reference=f"def run({signature}):\n    return x\n"), "parameters")


def test_run_parameters_positional_only_count():
    d = Definition.model_validate(_definition(reference="def run(x, /, w, *rest, **kw):\n    return x\n"))
    assert list(d.inputs) == ["x", "w"]


@pytest.mark.parametrize("entry", ["1gen", "make-inputs", "class"])
def test_custom_entrypoint_not_identifier(entry):
    source = "def run(x, w):\n    return x\n"
    _reject(Definition, _definition(reference=source, custom_inputs_entrypoint=entry), "identifier")


def test_custom_entrypoint_must_be_a_top_level_def():
    source = "def run(x, w):\n    return x\nmake_inputs = run\n"
    _reject(
        Definition, _definition(reference=source, custom_inputs_entrypoint="make_inputs"), "top-level def"
    )
    ok = Definition.model_validate(
        _definition(
            reference=source + "def make_inputs(axes, device):\n    return {}\n",
            custom_inputs_entrypoint="make_inputs",
        )
    )
    assert ok.custom_inputs_entrypoint == "make_inputs"


def test_input_named_like_an_axis():
    data = _definition(
        inputs={"x": {"shape": ["n", "d"], "dtype": "float32"}, "d": {"shape": None, "dtype": "int32"}},
        reference="def run(x, d):\n    return x\n",
    )
    _reject(Definition, data, "axis names", "'d'")


def test_output_named_like_an_axis_is_allowed():
    d = Definition.model_validate(_definition(outputs={"n": {"shape": ["n", "d"], "dtype": "float32"}}))
    assert list(d.outputs) == ["n"]


def test_input_output_overlap():
    _reject(Definition, _definition(outputs={"x": {"shape": ["n", "d"], "dtype": "float32"}}), "both")


@pytest.mark.parametrize("dim", ["m", "-1", "2x", "n*d"])
def test_undefined_axis_in_a_shape(dim):
    data = _definition(outputs={"y": {"shape": ["n", dim], "dtype": "float32"}})
    _reject(Definition, data, "not a defined axis", repr(dim))


def test_empty_shape_entry_rejected():
    _reject(Definition, _definition(outputs={"y": {"shape": ["n", ""], "dtype": "float32"}}), "outputs.y")


def test_definition_ignores_unknown_keys_officially():
    d = Definition.model_validate(_definition(constraints=["n > 0"], extra_field={"a": 1}))
    assert not hasattr(d, "constraints")


# ------------------------------------------------------------------------------------ axis resolution


def test_axis_resolution_const_var_expr():
    d = Definition.model_validate(_definition())
    assert d.resolve_axes({"n": 3}) == {"d": 4, "n": 3, "nd": 12}


def test_workload_may_override_a_const():
    d = Definition.model_validate(_definition())
    assert d.resolve_axes({"n": 3, "d": 5}) == {"d": 5, "n": 3, "nd": 15}


def test_expr_axes_evaluate_in_definition_order():
    axes = {
        "n": {"type": "var"},
        "a": {"type": "expr", "expression": "n + 1"},
        "b": {"type": "expr", "expression": "a * 2"},
        "d": {"type": "const", "value": 4},
    }
    d = Definition.model_validate(_definition(axes=axes))
    assert d.resolve_axes({"n": 3}) == {"d": 4, "n": 3, "a": 4, "b": 8}
    backwards = {"n": {"type": "var"}, "b": axes["b"], "a": axes["a"], "d": axes["d"]}
    with pytest.raises(TypeError, match="unknown name 'a'"):
        Definition.model_validate(_definition(axes=backwards)).resolve_axes({"n": 3})


def test_integral_float_becomes_int_and_non_integral_is_type_error():
    value = safe_eval("n / 2", {"n": 8}, integral=True)
    assert value == 4 and type(value) is int
    with pytest.raises(TypeError, match="non-integral"):
        safe_eval("n / 3", {"n": 8}, integral=True)
    # without `integral` (roofline expressions) the float stays
    assert safe_eval("n / 3", {"n": 9}) == 3.0


@pytest.mark.parametrize(
    "expression, value",
    [("2 ** 3 - -1", 9), ("(n + 1) * 2 // 3 % 5", 4), ("+n", 5), ("1.5 * 2", 3)],
)
def test_safe_eval_arithmetic(expression, value):
    assert safe_eval(expression, {"n": 5}, integral=True) == value


@pytest.mark.parametrize(
    "expression",
    ["max(n, 2)", "n.real", "(n, n)[0]", "n if n else 1", "n > 1", "__import__('os')", "True + n", "[n]"],
)
def test_safe_eval_rejects_everything_else(expression):
    with pytest.raises(TypeError):
        safe_eval(expression, {"n": 5})


def test_definition_digit_literal_shape_and_scalar_and_0d():
    d = Definition.model_validate(
        _definition(
            inputs={"x": {"shape": ["3", "d"], "dtype": "float32"}, "w": {"shape": [], "dtype": "float32"}},
            outputs={"y": {"shape": None, "dtype": "float32"}},
        )
    )
    axes = d.resolve_axes({"n": 1})
    assert d.shape_of(d.inputs["x"], axes) == (3, 4)
    assert d.shape_of(d.inputs["w"], axes) == ()
    assert d.shape_of(d.outputs["y"], axes) is None


# ------------------------------------------------------------------------------------------- Workload


def test_workload_lax_ints():
    w = Workload.model_validate({"uuid": "u", "axes": {"a": 4.0, "b": True}})
    assert w.axes == {"a": 4, "b": 1} and type(w.axes["a"]) is int


@pytest.mark.parametrize("value", [-1, 2.5, "x"])
def test_workload_bad_axis_values(value):
    _reject(Workload, {"uuid": "u", "axes": {"a": value}}, "axes.a")


def test_workload_empty_uuid():
    _reject(Workload, {"uuid": ""}, "uuid")


def test_scalar_value_types_are_preserved_from_json():
    line = '{"uuid": "u", "inputs": {"b": {"type": "scalar", "value": true}, '
    line += '"i": {"type": "scalar", "value": 1}, "f": {"type": "scalar", "value": 1.0}}}'
    for w in (Workload.model_validate_json(line), Workload.model_validate(json.loads(line))):
        values = w.scalars()
        assert [type(v) for v in values.values()] == [bool, int, float]
        assert values == {"b": True, "i": 1, "f": 1.0}


def test_scalar_value_rejects_strings():
    _reject(ScalarInput, {"type": "scalar", "value": "1"}, "value")


@pytest.mark.parametrize(
    "other",
    [
        {"type": "random"},
        {"type": "scalar", "value": 1},
        {"type": "safetensors", "path": "a", "tensor_key": "k"},
    ],
)
def test_custom_mixed_with_others_rejected(other):
    _reject(Workload, {"uuid": "u", "inputs": {"a": {"type": "custom"}, "b": other}}, "custom")


def test_custom_alone_accepted_and_unknown_input_type_rejected():
    w = Workload.model_validate({"uuid": "u", "inputs": {"a": {"type": "custom"}, "b": {"type": "custom"}}})
    assert {d.type for d in w.inputs.values()} == {"custom"}
    _reject(Workload, {"uuid": "u", "inputs": {"a": {"type": "zeros"}}}, "inputs.a")


def test_safetensors_descriptor_needs_non_empty_fields():
    _reject(Workload, {"uuid": "u", "inputs": {"a": {"type": "safetensors", "path": "", "tensor_key": "k"}}})
    _reject(Workload, {"uuid": "u", "inputs": {"a": {"type": "safetensors", "path": "p"}}}, "tensor_key")


def test_tolerance_defaults():
    w = Workload.model_validate({"uuid": "u"})
    assert w.tolerance.model_dump() == {
        "max_atol": 1e-2,
        "max_rtol": 1e-2,
        "required_matched_ratio": 0.99,
        "max_error_cap": None,
        "allow_negative_inf": False,
    }
    assert w.axes == {} and w.inputs == {}


def test_tolerance_ignores_the_dataset_key():
    tol = ToleranceSpec.model_validate({"max_atol": 0.1, "required_match_ratio": 0.5})
    assert tol.required_matched_ratio == 0.99  # the official default: the dataset's key is unknown


def test_workloads_jsonl(tmp_path):
    path = tmp_path / "workload.jsonl"
    path.write_text('{"uuid": "a", "axes": {"n": 2}}\n\n   \n{"uuid": "b", "extra": 1}\n')
    assert [w.uuid for w in load_workloads_jsonl(path)] == ["a", "b"]
    path.write_text('{"uuid": "a"}\n{"uuid": "b", "axes": {"n": -1}}\n')
    with pytest.raises(SchemaError) as info:
        load_workloads_jsonl(path)
    assert str(info.value).startswith(f"{path}:2: axes.n: ")


# ------------------------------------------------------------------------------------------- Solution


def test_solution_valid_defaults():
    s = Solution.model_validate(_solution())
    assert s.spec.destination_passing_style is True
    assert s.spec.dependencies == [] and s.spec.binding is None and s.spec.compile_options is None
    assert (s.spec.entry_file, s.spec.entry_function) == ("kernel.py", "run")


def test_solution_is_frozen():
    s = Solution.model_validate(_solution())
    with pytest.raises(ValidationError):
        s.name = "other"


def test_languages_python_and_cpp_cannot_mix():
    _reject(Solution, _solution(spec={"languages": ["triton", "cuda_cpp"]}), "C++ and Python cannot be mixed")


def test_empty_language_list_accepted():
    assert Solution.model_validate(_solution(spec={"languages": []})).spec.languages == []


@pytest.mark.parametrize("suffix", [".cu", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cuh"])
def test_cpp_entry_suffixes(suffix):
    data = _solution(
        spec={"languages": ["cuda_cpp"], "entry_point": f"kernel{suffix}::run"},
        sources=[{"path": f"kernel{suffix}", "content": "int x;"}],
    )
    assert Solution.model_validate(data).spec.is_cpp


def test_cpp_entry_must_not_be_python_and_python_entry_must_be_py():
    data = _solution(spec={"languages": ["cutlass"]})
    _reject(Solution, data, "C++ entry file")
    data = _solution(
        spec={"languages": ["pytorch"], "entry_point": "kernel.cu::run"},
        sources=[{"path": "kernel.cu", "content": "int x;"}],
    )
    _reject(Solution, data, ".py")


@pytest.mark.parametrize("entry", ["kernel.py", "kernel.py::run::x", "kernel.py:run"])
def test_entry_point_needs_exactly_one_double_colon(entry):
    _reject(Solution, _solution(spec={"entry_point": entry}), "'::' exactly once")


def test_duplicate_source_paths():
    src = {"path": "kernel.py", "content": "x = 1\n"}
    _reject(Solution, _solution(sources=[src, dict(src)]), "duplicate")


def test_entry_file_must_be_among_sources_exactly():
    _reject(Solution, _solution(spec={"entry_point": "./kernel.py::run"}), "not among the sources")
    _reject(Solution, _solution(spec={"entry_point": "other.py::run"}), "not among the sources")


@pytest.mark.parametrize("path", ["/abs/kernel.py", "../kernel.py", "sub/../../kernel.py"])
def test_source_path_absolute_or_dotdot_rejected(path):
    sources = [{"path": "kernel.py", "content": "x\n"}, {"path": path, "content": "y\n"}]
    _reject(Solution, _solution(sources=sources), "relative")


def test_source_in_subfolder_allowed_and_empty_content_rejected():
    sources = [{"path": "kernel.py", "content": "x\n"}, {"path": "sub/util.py", "content": "y\n"}]
    assert len(Solution.model_validate(_solution(sources=sources)).sources) == 2
    _reject(Solution, _solution(sources=[{"path": "kernel.py", "content": ""}]), "sources.0.content")
    _reject(Solution, _solution(sources=[]), "sources")


def test_target_hardware_is_case_sensitive():
    _reject(Solution, _solution(spec={"target_hardware": ["local"]}), "target_hardware")
    _reject(Solution, _solution(spec={"target_hardware": []}), "target_hardware")
    ok = Solution.model_validate(_solution(spec={"target_hardware": ["LOCAL", "B200"]}))
    assert ok.spec.target_hardware == ["LOCAL", "B200"]


def test_compile_options_null_vs_empty_object():
    assert Solution.model_validate(_solution(spec={"compile_options": None})).spec.compile_options is None
    opts = Solution.model_validate(_solution(spec={"compile_options": {}})).spec.compile_options
    assert opts == CompileOptions(cflags=[], cuda_cflags=["-O3", "--use_fast_math"], ld_flags=["-lcuda"])
    custom = Solution.model_validate(_solution(spec={"compile_options": {"cuda_cflags": []}})).spec
    assert custom.compile_options.cuda_cflags == [] and custom.compile_options.ld_flags == ["-lcuda"]


def test_unknown_language_and_binding_rejected():
    _reject(Solution, _solution(spec={"languages": ["Triton"]}), "languages")
    _reject(Solution, _solution(spec={"binding": "pybind"}), "binding")


def test_load_solution_json_fills_empty_content_from_the_file_beside_it(tmp_path):
    (tmp_path / "kernel.py").write_text("def run(x, y):\n    y.copy_(x)\n")
    data = _solution(sources=[{"path": "kernel.py", "content": ""}], unknown_key=1)
    path = tmp_path / "solution.json"
    path.write_text(json.dumps(data))
    sol = load_solution_json(path)
    assert sol.sources[0].content == "def run(x, y):\n    y.copy_(x)\n"
    # without the file the empty content stays empty, and that is an error naming the file and field
    (tmp_path / "kernel.py").unlink()
    with pytest.raises(SchemaError) as info:
        load_solution_json(path)
    assert str(info.value).startswith(f"{path}: sources.0.content: ")


def test_load_definition_json_ignores_unknown_keys_and_names_the_field(tmp_path):
    path = tmp_path / "definition.json"
    path.write_text(json.dumps(_definition(constraints=["n > 0"], op_type="gemm")))
    assert load_definition_json(path).op_type == "gemm"
    data = _definition()
    data["inputs"]["x"]["dtype"] = "uint8"
    path.write_text(json.dumps(data))
    with pytest.raises(SchemaError) as info:
        load_definition_json(path)
    assert str(info.value).startswith(f"{path}: inputs.x.dtype: ")
    path.write_text("{not json")
    with pytest.raises(SchemaError, match=r"line 1: invalid JSON"):
        load_definition_json(path)


# ---------------------------------------------------------------------------------------------- Trace


def _trace(evaluation: dict, **tolerance) -> dict:
    return {
        "definition": "toy",
        "workload": {"uuid": "u", "tolerance": tolerance},
        "solution": "s",
        "evaluation": evaluation,
    }


@pytest.mark.parametrize(
    "status, correctness, performance, ok",
    [
        ("PASSED", True, True, True),
        ("PASSED", True, False, False),
        ("PASSED", False, True, False),
        ("INCORRECT_NUMERICAL", True, False, True),
        ("INCORRECT_NUMERICAL", False, False, False),
        ("INCORRECT_NUMERICAL", True, True, False),
        ("RUNTIME_ERROR", False, False, True),
        ("RUNTIME_ERROR", True, False, False),
        ("RUNTIME_ERROR", False, True, False),
        ("INCORRECT_SHAPE", False, False, True),
        ("REWARD_HACK", True, False, False),
    ],
)
def test_trace_status_rules(status, correctness, performance, ok):
    evaluation = _evaluation(status, correctness=correctness, performance=performance)
    if ok:
        assert Evaluation.model_validate(evaluation).status == EvaluationStatus(status)
    else:
        _reject(Evaluation, evaluation, status)


def test_trace_status_enum_is_case_sensitive():
    _reject(Evaluation, _evaluation("passed", correctness=True, performance=True), "status")


def test_trace_json_line_key_order_and_round_trip():
    trace = Trace.model_validate(_trace(_evaluation("PASSED", correctness=True, performance=True)))
    line = trace.to_json_line()
    assert "\n" not in line
    data = json.loads(line)
    assert list(data) == ["definition", "workload", "solution", "evaluation"]
    assert list(data["evaluation"])[:6] == [
        "status",
        "environment",
        "timestamp",
        "log",
        "correctness",
        "performance",
    ]
    assert "extra" not in data["evaluation"]
    assert data["workload"]["tolerance"]["required_matched_ratio"] == 0.99  # defaulted, always serialised
    assert Trace.model_validate_json(line) == trace


def test_trace_json_line_refuses_non_finite_numbers():
    trace = Trace.model_validate(_trace(_evaluation("RUNTIME_ERROR", correctness=False, performance=False)))
    bad = trace.model_copy(
        update={"workload": Workload(uuid="u", tolerance=ToleranceSpec(max_atol=math.nan))}
    )
    with pytest.raises(ValueError, match="JSON compliant"):
        bad.to_json_line()
    ev = Evaluation(
        status="INCORRECT_NUMERICAL",
        environment=Environment(hardware="cpu"),
        timestamp="t",
        correctness=Correctness(max_relative_error=math.inf),
    )
    with pytest.raises(ValueError):
        trace.model_copy(update={"evaluation": ev}).to_json_line()


def test_correctness_and_performance_must_be_non_negative():
    _reject(Correctness, {"max_absolute_error": -1.0}, "max_absolute_error")
    _reject(Correctness, {"max_relative_error": math.nan}, "max_relative_error")
    _reject(Performance, {"latency_ms": -0.5}, "latency_ms")


# ----------------------------------------------------------------------------------- our strict YAML


@pytest.fixture(scope="module")
def tiny() -> dict:
    return yaml.safe_load(TINY_YAML.read_text())


def test_fixture_yaml_is_valid():
    file = load_definition_file(TINY_YAML)
    definition = file.to_definition(TINY_REFERENCE.read_text(), TINY_YAML)
    assert definition.resolve_axes(file.workloads[0].to_official().axes) == {"d": 4, "n": 3, "nd": 12}
    workload = file.workloads[0].to_official()
    assert workload.scalars() == {"scale": 2.0}
    assert workload.tolerance.max_atol == 0.001


def _expect_one_line_error(tmp_path: Path, data, field: str, *fragments: str) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(SchemaError) as info:
        load_definition_file(path)
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith(f"{path}: {field}: "), message
    for fragment in fragments:
        assert fragment in message, message
    return message


def _with(data: dict, keys: list, value) -> dict:
    data = copy.deepcopy(data)
    node = data
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    return data


@pytest.mark.parametrize(
    "keys, field",
    [
        (["bogus"], "bogus"),
        (["axes", "n", "bogus"], "axes.n.var.bogus"),
        (["axes", "d", "bogus"], "axes.d.const.bogus"),
        (["axes", "nd", "bogus"], "axes.nd.expr.bogus"),
        (["inputs", "x", "bogus"], "inputs.x.bogus"),
        (["outputs", "y", "bogus"], "outputs.y.bogus"),
        (["workloads", 0, "bogus"], "workloads.0.bogus"),
        (["workloads", 0, "tolerance", "required_match_ratio"], "workloads.0.tolerance.required_match_ratio"),
        (["workloads", 0, "inputs", "scale", "bogus"], "workloads.0.inputs.scale.scalar.bogus"),
        (["roofline", "bogus"], "roofline.bogus"),
    ],
)
def test_unknown_keys_rejected_at_every_level(tmp_path, tiny, keys, field):
    _expect_one_line_error(tmp_path, _with(tiny, keys, 1), field, "unknown key")


def test_wrong_dtype_string(tmp_path, tiny):
    _expect_one_line_error(
        tmp_path, _with(tiny, ["inputs", "x", "dtype"], "fp32"), "inputs.x.dtype", "'fp32'"
    )


@pytest.mark.parametrize(
    "keys, field",
    [
        (["reference"], "reference"),
        (["inputs", "x", "dtype"], "inputs.x.dtype"),
        (["roofline", "flops"], "roofline.flops"),
        (["workloads", 0, "uuid"], "workloads.0.uuid"),
    ],
)
def test_missing_field(tmp_path, tiny, keys, field):
    data = copy.deepcopy(tiny)
    node = data
    for key in keys[:-1]:
        node = node[key]
    del node[keys[-1]]
    _expect_one_line_error(tmp_path, data, field, "missing")


def test_negative_axis_in_yaml_workload(tmp_path, tiny):
    _expect_one_line_error(
        tmp_path, _with(tiny, ["workloads", 0, "axes", "n"], -3), "workloads.0.axes.n", "-3"
    )


def test_workload_input_not_in_definition(tmp_path, tiny):
    data = _with(tiny, ["workloads", 0, "inputs", "gamma"], {"type": "random"})
    _expect_one_line_error(tmp_path, data, "(top level)", "gamma")


def test_bad_yaml_syntax(tmp_path):
    message = _expect_one_line_error(tmp_path, "name: x\naxes: {n: [1, 2\n", "line 3", "invalid YAML")
    assert "Traceback" not in message


def test_yaml_top_level_not_a_mapping(tmp_path):
    _expect_one_line_error(tmp_path, "- a\n- b\n", "(top level)", "mapping")


def test_file_missing(tmp_path):
    path = tmp_path / "absent.yaml"
    with pytest.raises(SchemaError) as info:
        load_definition_file(path)
    assert str(info.value) == f"{path}: file not found"


def test_yaml_definition_validators_name_the_file(tiny):
    data = _with(tiny, ["inputs", "d"], {"shape": None, "dtype": "int32"})  # input named like an axis
    from harness.schema import DefinitionFile

    file = DefinitionFile.model_validate(data)
    with pytest.raises(SchemaError) as info:
        file.to_definition("def run(x, scale, d):\n    return x\n", "definitions/tiny.yaml")
    message = str(info.value)
    assert message.startswith("definitions/tiny.yaml: (top level): ") and "axis names" in message
    assert "\n" not in message
