"""Every Triton solution builds for the H200 (sm_90a) and the leaderboard's B200 (sm_100a), within the limits.

The launches are the solution's own (recorded on meta tensors under the interpreter, see harness.aot), then
compiled by Triton for each architecture in a process without the interpreter. Shapes cover each kernel's
configurations (074: both M ranges of its config table; 075: 4, 8 and 16 query-token builds; 077: one chunked
image, whose kernels are the same for every size). The GPU-only constexprs (075's inline-PTX prefetches and
its split pair's programmatic dependent launch, 077's) are switched on here, since the CPU path leaves them off.
"""

from __future__ import annotations

import copy
import dataclasses
import os

import pytest
import torch

from harness import PROJECT_ROOT
from harness.aot import (
    REGISTER_LIMIT,
    SHARED_LIMIT,
    TARGET_ARCH_ENV,
    Launch,
    build_launches,
    capture_launches,
    capture_solution,
)
from harness.schema import Workload
from harness.tasks import load_module, load_task

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="records launches in Triton's interpreter (CPU runs)"
)

SHAPES = {
    "074": [{"batch_size": 1, "point_batch_size": 64}, {"batch_size": 2, "point_batch_size": 256}],
    "075": [
        {"batch_size": 1, "point_batch_size": 2, "n_query_tokens": 5, "n_key_tokens": 1024},
        {"batch_size": 1, "point_batch_size": 1, "n_query_tokens": 16, "n_key_tokens": 100},
        {"batch_size": 8, "point_batch_size": 2, "n_query_tokens": 4, "n_key_tokens": 4096},  # TPK7 4, hb 64
    ],
    "077": [{"batch_size": 2, "height": 64, "width": 64}],
}
# what a CUDA launch sets and the CPU path leaves off (see kernel.py): 075's inline-PTX prefetches, 077's
# griddepcontrol.wait (programmatic dependent launch); 075's phase-7 launch: kernel.PHASE7_GPU_META (_launches)
# (075's PF_DIST is Config.prefetch_dist on a GPU, 0 since session 24 as on the CPU: the recording's own)
GPU_ONLY = {"075": {"PF_W": True, "PF_TOK": 32}, "077": {"PDL": 1}}


def _launches(task_id: str, arch: str = "sm_90a"):
    """The launches recorded with the solution targeting `arch` (TARGET_ARCH_ENV, as `solbench build` sets)."""
    task = load_task(task_id)
    (folder,) = (PROJECT_ROOT / "solutions").glob(f"{task_id}_*/triton_fused")
    workloads = [Workload(uuid="aot", axes=axes, inputs=task.workloads[0].inputs) for axes in SHAPES[task_id]]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(TARGET_ARCH_ENV, arch)
        launches = capture_solution(folder, workloads=workloads)
    for launch in launches:
        launch.kwargs.update({k: v for k, v in GPU_ONLY.get(task_id, {}).items() if k in launch.kwargs})
    if task_id == "075":  # the phase-7 launch's GPU-only constexpr, as kernel.launch sets it on a GPU
        kernel = load_module(folder / "kernel.py", "_build_test075_meta")
        for launch in launches:
            if launch.kwargs.get("PHASE") == 7:  # (the Gluon phase 7 carries its own)
                launch.kwargs.update(kernel.PHASE7_GPU_META)
    return launches


def _config_launches(task_id: str, kernel, axes: dict, configs: list) -> list:
    """The launches `kernel.launch(inputs, outputs, cfg)` makes for each Config on meta tensors of one workload's
    axes (the official workloads' scalar inputs): settings other than the ones `run` picks."""
    from harness.inputs import allocate_outputs, gen_inputs, resolve_axes

    task = load_task(task_id)
    workload = Workload(uuid="aot", axes=axes, inputs=task.workloads[0].inputs)
    ins = gen_inputs(task.definition, workload, device="meta")
    outs = allocate_outputs(task.definition, resolve_axes(task.definition, workload), device="meta")
    n_in = len(ins)
    launches = []
    for cfg in configs:
        launches += capture_launches(
            lambda *a, c=cfg: kernel.launch(list(a[:n_in]), list(a[n_in:]), c), [*ins, *outs]
        )
    return launches


def _assert_builds(builds: list, arch: int) -> None:
    """Every build succeeded within the architecture's shared-memory and register limits."""
    assert builds
    for b in builds:
        assert "error" not in b, b
        assert b["shared"] <= SHARED_LIMIT[arch], b
        assert b["registers"] is None or b["registers"] <= REGISTER_LIMIT, b


@pytest.mark.parametrize("arch", [90, 100], ids=["sm_90a", "sm_100a"])
@pytest.mark.parametrize("task_id", list(SHAPES))
def test_triton_solution_builds(task_id, arch):
    launches = _launches(task_id, f"sm_{arch}a")
    assert launches, "the solution launched no kernel"
    _assert_builds(build_launches(launches, arch), arch)


def test_077_builds_carry_the_gpu_launch_constexprs():
    launches = _launches("077")
    assert launches and all(launch.kwargs.get("PDL") == 1 for launch in launches)


def test_077_attention_is_gluon_on_sm90a_only():
    """sm_90a (H200) records the warp-specialized Gluon attention and GEMM (qkv), sm_100a (B200: no wgmma) the
    tl kernels."""
    names = {arch: {launch.kernel for launch in _launches("077", arch)} for arch in ("sm_90a", "sm_100a")}
    assert {"_window_attention_gluon_kernel", "_linear_gluon_kernel"} <= names["sm_90a"]
    assert "_window_attention_persistent_kernel" not in names["sm_90a"]
    assert "_window_attention_persistent_kernel" in names["sm_100a"]
    assert not {"_window_attention_gluon_kernel", "_linear_gluon_kernel"} & names["sm_100a"]


def test_077_gluon_gemm_builds_for_sm90a_with_both_epilogues():
    """The Gluon GEMM as mlp1 launches it (the GELU epilogue; the build's small workload keeps mlp1 on Triton)
    and as qkv does: sm_90a, within the limits, no spills."""
    pytest.importorskip("triton.experimental.gluon")
    gemm = next(launch for launch in _launches("077") if launch.kernel == "_linear_gluon_kernel")
    builds = []
    for gelu in (False, True):
        launch = Launch(gemm.module_file, gemm.kernel, gemm.args, {**gemm.kwargs, "GELU": gelu})
        builds += build_launches([launch], 90)
    assert len(builds) == 2
    for b in builds:
        assert "error" not in b, b
        assert b["shared"] <= SHARED_LIMIT[90] and b["stack"] == 0, b


def test_077_pingpong_projection_builds_for_sm90a():
    """The 077 projection's ping-pong GEMM at each BK (64 is GLUON_GEMM's, which the solution's recording
    launches; 16 and 32 are not): sm_90a, within the limits, no spills."""
    pytest.importorskip("triton.experimental.gluon")
    (folder,) = (PROJECT_ROOT / "solutions").glob("077_*/triton_fused")
    kernel = load_module(folder / "kernel.py", "_build_test077_pingpong")
    m, h = 1000, kernel.HIDDEN

    def meta(*shape, dtype=torch.float32):
        return torch.empty(*shape, dtype=dtype, device="meta")

    o, w = meta(m, h, dtype=torch.float16), meta(h, h, dtype=torch.float16)
    x, out, b = meta(m, h), meta(m, h), meta(h)
    cfgs = [(*kernel.GLUON_GEMM["proj"][:4], bk) for bk in (16, 32, 64)]
    plan = [kernel._linear_launch(o, w, b, out, kernel.EPILOGUE_RESIDUAL, cfg, x, bias2=b) for cfg in cfgs]
    launches = capture_launches(kernel._launch, [plan])
    assert [launch.kernel for launch in launches] == ["_linear_gluon_residual_pp_kernel"] * 3
    for launch in launches:
        launch.kwargs.update(GPU_ONLY["077"])
    builds = build_launches(launches, 90)
    assert len(builds) == 3
    for b in builds:
        assert "error" not in b, b
        assert b["shared"] <= SHARED_LIMIT[90] and b["stack"] == 0, b


def test_077_gluon_attention_builds_for_sm90a_with_either_bias_form():
    """The Gluon attention with its bias columns by shuffles (GLUON_ATTENTION_BIAS_SHUFFLE 1, the default, 28 KB
    more shared memory for the per-tile tables) and by the one gather (0): sm_90a, within the limits."""
    pytest.importorskip("triton.experimental.gluon")
    attention = next(
        launch for launch in _launches("077") if launch.kernel == "_window_attention_gluon_kernel"
    )
    launches = [copy.deepcopy(attention) for _ in range(2)]
    for launch, shuffle in zip(launches, (0, 1), strict=True):
        launch.kwargs["BIAS_SHUFFLE"] = shuffle
    builds = build_launches(launches, 90)
    assert len(builds) == 2
    for b in builds:
        assert "error" not in b, b
        assert b["shared"] <= SHARED_LIMIT[90], b
    assert builds[1]["shared"] > builds[0]["shared"]  # the per-tile tables: the two builds really differ


def test_075_builds_carry_the_split_launch_constexprs():
    """The build of 075's split pairs is what a GPU launches: every shape here splits (a persistent launch of
    phases 1-6, then phase 7), and the phase-7 launch waits for the persistent one (programmatic dependent
    launch) while the persistent launch carries no PDL constexpr."""
    for arch in ("sm_90a", "sm_100a"):
        launches = _launches("075", arch)
        pairs = [(a, b) for a, b in zip(launches, launches[1:], strict=False) if a.kwargs.get("SPLIT7")]
        assert len(pairs) == len(SHAPES["075"]) == len(launches) // 2
        assert all(b.kwargs["PDL"] in (True, 1) and not a.kwargs.get("PDL") for a, b in pairs)
        # phase 7 in Gluon on sm_90a where key chunks hold two 64-token tiles or more (here 8x2x4x4096 only)
        gluon = [b.kernel for _, b in pairs if b.kernel.startswith("_i2t_gluon")]
        assert gluon == (["_i2t_gluon16_kernel"] if arch == "sm_90a" else []), arch
        assert all(b.kwargs.get("PHASE") == 7 for _, b in pairs if not b.kernel.startswith("_i2t_gluon"))


def test_capture_records_what_the_solution_launches():
    launches = _launches("074")
    assert [launch.kernel for launch in launches] == ["_fused_bwd_kernel"] * 2
    small, large = launches
    assert small.kwargs != large.kwargs  # two configurations of the table (M = 64 and M = 512)
    assert small.kwargs["num_warps"] == 8
    kinds = {arg.kind for arg in small.args}
    assert kinds <= {"tensor", "value"} and "tensor" in kinds


@pytest.mark.parametrize(
    ("arch", "sms", "stages"), [(None, 132, 3), ("sm_100a", 148, 2)], ids=["default", "sm_100a"]
)
def test_capture_of_075_plans_for_the_target_gpu(monkeypatch, arch, sms, stages):
    """075's CPU path launches one program but plans for the GPU `solbench build` targets (TARGET_ARCH_ENV;
    unset: an H200), so what it compiles carries the constexprs and the key chunking that GPU's launch of each
    official workload uses: 132 SMs and 3 phase-3 stages on the H200; 148 SMs and 2 stages on a B200 (3 need
    233 KB of shared memory there, over the 227 KB limit)."""
    (folder,) = (PROJECT_ROOT / "solutions").glob("075_*/triton_fused")
    kernel = load_module(folder / "kernel.py", "_build_test075_kernel")
    task = load_task("075")
    if arch is None:
        monkeypatch.delenv(TARGET_ARCH_ENV, raising=False)
    else:
        monkeypatch.setenv(TARGET_ARCH_ENV, arch)
    differs = split = preloaded = gluon7 = False
    for workload in task.workloads:
        a = workload.axes
        NI, T, S = a["batch_size"] * a["point_batch_size"], a["n_query_tokens"], a["n_key_tokens"]
        plan, other = (kernel.make_plan(NI, T, S, kernel.DEFAULT_CONFIG, n) for n in (sms, 132 + 148 - sms))
        # the persistent launch, and phase 7's own where the plan splits it off (split7)
        launch, *rest = capture_solution(folder, workloads=[workload])
        assert launch.kwargs["PHASE"] == 0 and launch.kwargs.get("SPLIT7", False) == bool(plan.P7PARTS)
        if plan.P7PARTS and kernel.gluon_phase7_ok(torch.device("meta"), plan, kernel.DEFAULT_CONFIG):
            (p7,) = rest  # sm_90a, two 64-token tiles per key chunk or more: phase 7 in Gluon
            assert p7.kernel == "_i2t_gluon16_kernel" and p7.kwargs["M8"] == 8 * plan.TPK7, workload.uuid
            gluon7 = True
        elif plan.P7PARTS:
            (p7,) = rest
            assert p7.kwargs["PHASE"] == 7 and p7.kwargs["P7PARTS"] == plan.P7PARTS, workload.uuid
            assert p7.kwargs["num_warps"] == plan.P7WARPS, workload.uuid
            assert (p7.kwargs["BS2"], p7.kwargs["S7"]) == (plan.P7BS, plan.P7STAGES), workload.uuid
            split = True
        else:
            assert not rest, workload.uuid
        names = ("TPK", "TPK7", "NHALF", "ND", "NCB", "HB", "P4SPLIT", "KS1", "PRE5", "PRE2")
        got = {k: launch.kwargs[k] for k in names}
        assert got == {
            "TPK": plan.TPK, "TPK7": plan.TPK7, "NHALF": plan.NHALF, "ND": plan.ND, "NCB": plan.NCB,
            "HB": plan.HB, "P4SPLIT": plan.NSP4 > 1, "KS1": stages, "PRE5": plan.HB <= kernel.DEFAULT_CONFIG.pre5,
            "PRE2": kernel.DEFAULT_CONFIG.pre2,
        }, workload.uuid  # fmt: skip
        preloaded |= got["PRE5"]
        values = [arg.data[0] for arg in launch.args if arg.kind == "value"]
        pairs = list(zip(values, values[1:], strict=False))
        assert (plan.n_ch, plan.CH) in pairs, workload.uuid  # the key chunking (runtime scalars)
        differs |= (plan.n_ch, plan.CH) != (other.n_ch, other.CH)
    assert differs  # the SM count changes the chunking of some official workload (#6, #11)
    assert split  # and phase 7 runs as its own launch on some (the large ones)
    assert preloaded  # and phase 5 loads its weights before its barrier on some (32-wide MLP blocks)
    assert gluon7 == (arch is None)  # phase 7 in Gluon on the H200 only (#6, #11, #4, ...)


def test_capture_of_075_rejects_an_unknown_target(monkeypatch):
    (folder,) = (PROJECT_ROOT / "solutions").glob("075_*/triton_fused")
    monkeypatch.setenv(TARGET_ARCH_ENV, "sm_80")
    with pytest.raises(ValueError, match=TARGET_ARCH_ENV):
        capture_solution(folder, workloads=load_task("075").workloads[:1])


def test_descriptors_are_recorded_and_rebuilt_with_their_kind_and_layout():
    """A Triton TensorDescriptor and a Gluon one (which carries its shared-memory layout) survive the record /
    rebuild round trip the child build process relies on, each as its own class."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    from harness.aot import _describe, _rebuild

    t = torch.empty(300, 768, dtype=torch.float16)
    tl_desc = TensorDescriptor.from_tensor(t, [128, 64])
    arg = _describe(tl_desc)
    back = _rebuild(arg)
    assert arg.kind == "desc" and type(back) is TensorDescriptor
    assert (back.shape, back.strides, back.block_shape) == ([300, 768], [768, 1], [128, 64])
    gluon = pytest.importorskip("triton.experimental.gluon")
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor

    layout = gluon.language.NVMMASharedLayout.get_default_for([64, 256], gluon.language.float16)
    g_desc = GluonDescriptor.from_tensor(t[:, :512], [64, 256], layout)
    arg = _describe(g_desc)
    back = _rebuild(arg)
    assert arg.kind == "gdesc" and type(back) is GluonDescriptor and back.layout == layout
    assert (list(back.shape), list(back.strides), list(back.block_shape)) == ([300, 512], [768, 1], [64, 256])
    assert back.base.dtype == torch.float16


def test_capture_needs_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        capture_launches(lambda: None, [])


# ------------------------------------------------------------------------------------------ solbench build

SOLUTION_074 = next((PROJECT_ROOT / "solutions").glob("074_*/triton_fused"))


def test_solbench_build_reports_each_kernel_build(monkeypatch):
    from click.testing import CliRunner

    from harness import aot
    from harness.cli import main

    args = ["build", str(SOLUTION_074), "--arch", "sm_100a", "--workload", "0b4dbe91"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "_fused_bwd_kernel" in result.output and "1 builds fit (sm_100a)" in result.output
    monkeypatch.setitem(aot.SHARED_LIMIT, 100, 1024)  # a limit the kernel cannot fit
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "shared memory" in result.output and "1 of 1 builds failed or exceed a limit" in result.output
    unknown = CliRunner().invoke(main, ["build", str(SOLUTION_074), "--workload", "zzz"])
    assert unknown.exit_code == 2 and "no workload with uuid prefix 'zzz'" in unknown.output


def test_check_solution_build_compiles_cuda_sources_with_nvcc():
    from harness.aot import check_solution_build
    from harness.build import nvcc_path

    if nvcc_path() is None:
        pytest.skip("needs nvcc")
    rows = check_solution_build(PROJECT_ROOT / "tests" / "fixtures" / "cpp_tiny_add", ["sm_90a", "sm_100a"])
    assert [(r["kernel"], r["arch"], r["ok"]) for r in rows] == [
        ("kernel.cu", 90, True),
        ("kernel.cu", 100, True),
    ]


def test_check_solution_build_rejects_an_unknown_arch():
    from harness.aot import check_solution_build
    from harness.errors import HarnessError

    with pytest.raises(HarnessError, match="--arch"):
        check_solution_build(SOLUTION_074, ["sm_80"])


def test_077_gluon_attention_probe_builds_for_sm90a():
    """The Gluon probe (warp-specialized attention core) compiles for the H200 without a GPU, within the limits."""
    from harness.aot import compile_in_child

    pytest.importorskip("triton.experimental.gluon")
    probe = (
        PROJECT_ROOT / "solutions" / "077_sam_hq_vision_encoder_window_partition_attention" / "triton_fused"
    )
    rows = compile_in_child([str(probe / "gluon_attn_probe.py"), "--compile-only"])
    assert [r["kernel"] for r in rows] == ["gluon_ws", "triton_bm128_w8"]
    for row in rows:
        assert 0 < row["shared"] <= SHARED_LIMIT[90], row
        assert row["registers"] is not None and row["registers"] <= REGISTER_LIMIT, row


def _phase7_fp16_launches(arch: int, field: str, extra_warps: tuple = ()) -> list:
    """075's recorded tl phase-7 launches with fp16 products, set up as the launch tuple `Config.<field>` says
    (parts, warps, tile, stages), and again with each of `extra_warps` warps."""
    (folder,) = (PROJECT_ROOT / "solutions").glob("075_*/triton_fused")
    config = load_module(folder / "kernel.py", f"_build_test075_{field}").DEFAULT_CONFIG
    parts, warps, _, tile, stages = getattr(config, field)
    return [
        Launch(
            launch.module_file,
            launch.kernel,
            launch.args,
            {**launch.kwargs, "F16_7": True, "BS2": tile, "num_warps": nw, "P7PARTS": parts, "S7": stages},
        )
        for launch in _launches("075", f"sm_{arch}a")
        if launch.kernel == "_two_way_kernel" and launch.kwargs.get("PHASE") == 7
        for nw in (warps, *extra_warps)
    ]


@pytest.mark.parametrize("arch", [90, 100], ids=["sm_90a", "sm_100a"])
def test_075_tl_phase7_fp16_builds(arch):
    """The tl phase-7 launch with its fp16 products as `Config.p7_launch_fp16` sets it up (tile, warps; the
    recorded shapes do not all take it) builds for both architectures within the limits, for every TPK7 the
    recorded shapes take."""
    launches = _phase7_fp16_launches(arch, "p7_launch_fp16")
    tpks = {launch.kwargs["TPK7"] for launch in launches}  # sm_90a: the T = 4 shape takes the Gluon phase 7
    assert tpks >= {8, 16} and (arch == 90 or 4 in tpks), tpks
    _assert_builds(build_launches(launches, arch), arch)


@pytest.mark.parametrize("arch", [90, 100], ids=["sm_90a", "sm_100a"])
def test_075_tl_phase7_fp16_short_builds(arch):
    """`Config.p7_tl_fp16_short`: the tl phase-7 launch `p7_launch_short` (32-token tiles, fp16 products, the scores
    transposed) builds for both architectures within the limits, for every TPK7 the recorded shapes take (the
    default takes it at TPK7 8 only), and with 4 warps (tune.py's p7s8w4)."""
    launches = _phase7_fp16_launches(arch, "p7_launch_short", extra_warps=(4,))
    assert {launch.kwargs["BS2"] for launch in launches} == {32}
    assert {launch.kwargs["TPK7"] for launch in launches} >= {8, 16}
    assert {launch.kwargs["num_warps"] for launch in launches} == {8, 4}
    _assert_builds(build_launches(launches, arch), arch)


@pytest.mark.parametrize("arch", [90, 100], ids=["sm_90a", "sm_100a"])
def test_075_phase0_fp16_weights_build(arch):
    """`Config.kproj_w16`: the persistent launch of a shape that takes phase 0, with and without its items on the
    fp16 copy of Wk and Wv, builds for both architectures within the limits (the CPU tests run the copy with one
    program only)."""
    launches = [
        Launch(launch.module_file, launch.kernel, launch.args, {**launch.kwargs, "W16": w16})
        for launch in _launches("075", f"sm_{arch}a")
        if launch.kernel == "_two_way_kernel" and launch.kwargs.get("PHASE") == 0 and launch.kwargs.get("KPJ")
        for w16 in (False, True)
    ]
    assert len(launches) >= 2, len(launches)  # (1 x 2 x 5 x 1024 and 1 x 1 x 16 x 100 take phase 0)
    _assert_builds(build_launches(launches, arch), arch)


@pytest.mark.parametrize("arch", [90, 100], ids=["sm_90a", "sm_100a"])
def test_074_o_iou_fma_builds(arch):
    """074's `Config.o_iou_fma` (the IoU MLP's O items in fp32 FMA) reaches the launch (O_FMA) and builds within the
    limits (on sm_90a without stack) for the table's M = 64 and M = 512 variants; the shared memory stays the variant's own
    (the FMA loop's pipelined chunks fit in what the K loops take already). Recorded on meta tensors."""
    kernel = load_module(SOLUTION_074 / "kernel.py", "_build_test074_ofma")
    launches = []
    for m in (64, 512):
        configs = [dataclasses.replace(kernel.pick_config(m), o_iou_fma=fma) for fma in (False, True)]
        launches += _config_launches("074", kernel, {"batch_size": 1, "point_batch_size": m}, configs)
    assert [launch.kwargs["O_FMA"] for launch in launches] == [False, True, False, True]
    builds = build_launches(launches, arch)
    _assert_builds(builds, arch)
    assert len(builds) == 4, builds
    if arch == 90:  # (sm_100a at M = 512: 254 registers and 24 bytes of stack with Triton 3.6 and 3.9)
        assert all(b["stack"] in (0, None) for b in builds), builds
    assert builds[1]["shared"] == builds[0]["shared"] and builds[3]["shared"] == builds[2]["shared"], builds


@pytest.mark.parametrize("arch", [90, 100], ids=["sm_90a", "sm_100a"])
def test_075_vector_prefetches_build(arch):
    """`Config.prefetch_vectors` (GPU only, so the CPU path never compiles it): the persistent launch with its
    L2 prefetches of the LayerNorm parameters and biases (PF_VEC) builds within the limits."""
    launches = [launch for launch in _launches("075", f"sm_{arch}a") if launch.kwargs.get("PHASE") == 0]
    assert launches and all(launch.kwargs.get("PF_VEC") is False for launch in launches)
    launch = launches[0]
    launch.kwargs["PF_VEC"] = True
    _assert_builds(build_launches([launch], arch), arch)


def _075_variant_launches(arch: int, name: str, shapes, **overrides) -> tuple:
    """(kernel module, launches) of 075's Config with `overrides`, recorded targeting sm_{arch}a and planned as
    `run` plans the CPU path (one program, the target's SMs), for each (B, P, T, S) of `shapes`."""
    folder = next((PROJECT_ROOT / "solutions").glob("075_*/triton_fused"))
    kernel = load_module(folder / "kernel.py", name)
    launches = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(TARGET_ARCH_ENV, f"sm_{arch}a")
        cfg = dataclasses.replace(
            kernel.DEFAULT_CONFIG, grid=1, plan_programs=kernel._target()[1], **overrides
        )
        for b, p, t, s in shapes:
            axes = {"batch_size": b, "point_batch_size": p, "n_query_tokens": t, "n_key_tokens": s}
            launches += _config_launches("075", kernel, axes, [cfg])
    return kernel, launches


@pytest.mark.parametrize("arch", [90, 100], ids=["sm_90a", "sm_100a"])
def test_075_short_phase7_two_stages_build(arch):
    """tune.py's `p7s2` (session 60; off): the tl phase-7 launches of one-tile key chunks, T 4 (TF32) and T 8
    (fp16, transposed scores), with a two-stage cp.async tile loop build within the limits."""
    kernel, launches = _075_variant_launches(
        arch, "_build_test075_p7s2", [(1, 1, 4, 4096), (1, 1, 8, 4096)],  # #14's and #8's shapes
        p7_launch=(1, 8, 0, 32, 2), p7_launch_short=(1, 8, 0, 32, 2),
    )  # fmt: skip
    phase7 = [launch for launch in launches if launch.kwargs.get("PHASE") == 7]
    assert [(launch.kwargs["S7"], launch.kwargs["F16_7"]) for launch in phase7] == [(2, False), (2, True)]
    for launch in phase7:
        launch.kwargs.update(kernel.PHASE7_GPU_META)
    _assert_builds(build_launches(phase7, arch), arch)


@pytest.mark.parametrize("arch", [90, 100], ids=["sm_90a", "sm_100a"])
def test_075_warm_sites_off_builds(arch):
    """`Config.warm_sites` (on by default since session 61, 4: the recording's persistent launches and so the
    other build tests carry WS 4, its GPU form): its off form (WS 0) builds within the limits too, for #14's shape
    (one item, 4 prompt tokens, 4096 keys) and #1's (8 items, 5 tokens, 1024 keys)."""
    shapes = [(1, 1, 4, 4096), (4, 2, 5, 1024)]
    _, on = _075_variant_launches(arch, "_build_test075_ws", shapes)
    _, launches = _075_variant_launches(arch, "_build_test075_ws0", shapes, warm_sites=0)
    assert [launch.kwargs["WS"] for launch in on if launch.kwargs.get("PHASE") == 0] == [4, 4]
    persistent = [launch for launch in launches if launch.kwargs.get("PHASE") == 0]
    assert [launch.kwargs["WS"] for launch in persistent] == [0, 0]
    assert all(launch.kwargs.get("WS", 0) == 0 for launch in on + launches if launch.kwargs.get("PHASE") == 7)
    for launch in persistent:
        launch.kwargs.update(GPU_ONLY["075"])
    _assert_builds(build_launches(persistent, arch), arch)


def test_077_attention_skip_pad_off_builds_for_sm90a():
    """The Gluon window attention with GLUON_ATTENTION_SKIP_PAD 0 (on by default since session 60, so the
    recording launches it with 1 and the other build tests compile that): sm_90a, within the limits."""
    pytest.importorskip("triton.experimental.gluon")
    attn = next(launch for launch in _launches("077") if launch.kernel == "_window_attention_gluon_kernel")
    assert attn.kwargs["SKIP_PAD"] == 1
    builds = build_launches(
        [Launch(attn.module_file, attn.kernel, attn.args, {**attn.kwargs, "SKIP_PAD": 0})], 90
    )
    _assert_builds(builds, 90)
