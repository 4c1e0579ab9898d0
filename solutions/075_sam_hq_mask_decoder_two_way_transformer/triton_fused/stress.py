"""GPU: call 075's kernel many times per official workload, each call on fresh NaN-poisoned outputs and checked
against the reference (L2 flushed before every other call), and count the wrong calls; the first wrong calls'
outputs, items and token range are printed and written to $OUT/stress075.json.

    WLS=12,5,16 CALLS=400 SETS=3 CFGS="base|base,p7tf32,p7h64a" python3 stress.py

CFGS: sequences of tune.py variants separated by |, each sequence alternated call by call (as tune.py's checks)."""

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
import tune  # noqa: E402  (the variants; it loads kernel.py as tune.kernel)

from harness.correctness import failed_elements  # noqa: E402
from harness.inputs import allocate_outputs, gen_inputs, resolve_axes  # noqa: E402
from harness.tasks import load_task  # noqa: E402

kernel = tune.kernel
task = load_task("075")
flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.int8, device="cuda")
res = []
for wi in map(int, os.environ.get("WLS", "12,5,16,1,6").split(",")):
    w = task.workloads[wi - 1]
    axes = resolve_axes(task.definition, w)
    tol = w.tolerance
    for seq in os.environ.get("CFGS", "base|base,p7tf32,p7h64a").split("|"):
        names = seq.split(",")
        bad, calls, details = 0, 0, []
        t0 = time.time()
        for s in range(int(os.environ.get("SETS", "3"))):
            torch.manual_seed(1000 * wi + s)
            ins = gen_inputs(task.definition, w, device="cuda")
            refs = task.reference(*ins)
            for i in range(int(os.environ.get("CALLS", "400"))):
                name = names[i % len(names)]
                outs = allocate_outputs(task.definition, axes, device="cuda")
                for o in outs:
                    o.fill_(float("nan"))
                if i % 2:
                    flush.zero_()
                kernel.launch(ins, outs, tune.VARIANTS[name])
                torch.cuda.synchronize()
                calls += 1
                wrong = [failed_elements(o, r, tol) for o, r in zip(outs, refs, strict=True)]
                nw = [int(x.sum()) for x in wrong]
                if any(nw):
                    bad += 1
                    if len(details) < 8:
                        k = (
                            wrong[1].reshape(-1, wrong[1].shape[-2], wrong[1].shape[-1]).any(-1)
                        )  # [NI, S] tokens
                        rows = k.nonzero()
                        d = {
                            "call": i,
                            "set": s,
                            "variant": name,
                            "wrong": nw,
                            "nan_k": int(outs[1].isnan().sum()),
                            "items": sorted(set(rows[:, 0].tolist()))[:16],
                            "tok_min": int(rows[:, 1].min()) if len(rows) else None,
                            "tok_max": int(rows[:, 1].max()) if len(rows) else None,
                            "n_tok": int(k.sum()),
                        }
                        details.append(d)
                        print("BAD", wi, d, flush=True)
        r = {
            "wl": wi,
            "axes": dict(w.axes),
            "seq": seq,
            "calls": calls,
            "bad": bad,
            "s": round(time.time() - t0, 1),
            "details": details,
        }
        print("SUMMARY", json.dumps({k: v for k, v in r.items() if k != "details"}), flush=True)
        res.append(r)
        json.dump(res, open(os.path.join(os.environ.get("OUT", "."), "stress075.json"), "w"), indent=1)
