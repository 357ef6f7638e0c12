"""Which operation makes two hosts' numbers differ? A per-operation fingerprint of one training step.

The embedded DAG is bit-identical from run to run on one host; across hosts some models are not (docs/embedded.md,
"Same numbers on another host"), and finding the operation that takes a host-dependent path needs both
hosts' numbers side by side. This records them: for each embedded model (the default profile's GPT-2 s,
DLCM s, NCM s with its tokenizer, masked diffusion s; ``--models``), from a fixed seed and fixed token
windows, one training step -- forward, backward and AdamW (the trainer's ``make_optimizer``) -- and then
greedy KV-cached decoding for the GPT-2 model, every ATen operation that runs (``TorchDispatchMode``)
with its name, the module it ran in (``backward`` for the autograd pass) and a sha256 of each output's
bytes. The pins of the DAG (``common.provenance.host_pins``) are applied as the DAG's jobs run with them,
unless already set. Run it on each host, then compare:

    python -m benchmarks.host_trace --out trace_A.json            # on host A, then on host B
    python -m benchmarks.host_trace --compare trace_A.json trace_B.json
    python -m benchmarks.host_trace --against REFERENCE                 # trace this host, compare with the
                                                                        # AMD EPYC trace the repository ships

``benchmarks/reference/`` also ships an Intel Xeon's traces, under the DAG's pins and under
``MKL_CBWR=COMPATIBLE`` (MKL's branch for Intel and Intel-compatible CPUs alike): on an AMD host, ``--against``
either one (with the same ``MKL_CBWR``) says whether that setting makes the two vendors agree.

``--compare`` prints, per model, the first operation whose output differs (its index, name, module and
input shapes), how many of the operations differ, and the two hosts' fingerprints. On one host two traces
are identical (a test); a different ATen kernel set (``ATEN_CPU_CAPABILITY``) shows up at its first
vectorised operation (a test).
"""
from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import os
import sys
from pathlib import Path

from common.provenance import host_pins

ROOT = Path(__file__).resolve().parents[1]  # the repository
REFERENCE = Path(__file__).resolve().parent / "reference" / "host_trace_amd_epyc.json.gz"  # `make host-trace`
SOURCES = ("models", "trainer", "common")  # the code a trace runs: a different hash, other operations
MODELS = {"gpt2": "base_gpt2_s", "dlcm": "dlcm_s", "ncm": "ncm_s", "mdlm": "mdlm_s"}
VOCAB = 2048      # the embedded BPE's size
BATCH = 2         # windows per step: small, every operation still runs
# operations whose output is uninitialised memory: recorded, never hashed (their bytes differ run to run), nor
# are views (no arithmetic; a view of an uninitialised buffer differs too)
UNINITIALISED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "resize_"}


def _is_view(func) -> bool:
    returns = func._schema.returns
    return bool(returns) and returns[0].alias_info is not None and not returns[0].alias_info.is_write


def _digest(value) -> list[str]:
    import torch

    out = []
    for t in value if isinstance(value, (tuple, list)) else [value]:
        if isinstance(t, torch.Tensor) and t.layout == torch.strided:
            out.append(hashlib.sha256(t.detach().contiguous().cpu().numpy().tobytes()).hexdigest()[:16])
    return out


def trace_model(name: str, seed: int = 0) -> list[dict]:
    """The operations of one training step of model ``name`` (and greedy decoding for GPT-2)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from models.registry import build_model
    from trainer.train import make_optimizer
    from workflows.experiments import load_profile, resolve

    run = resolve(load_profile(Path(__file__).resolve().parents[1] / "config" / "default.yaml"))[MODELS[name]]
    cfg = dict(run["model"])
    seq_len = cfg.pop("seq_len")
    torch.manual_seed(seed)
    model = build_model(cfg, vocab_size=VOCAB, seq_len=seq_len)
    opt = make_optimizer(model, run["train"])
    x = torch.randint(0, VOCAB, (BATCH, seq_len + 1), generator=torch.Generator().manual_seed(seed))
    where = ["-"]  # the module running now (forward hooks; a hook's return value would replace the output)

    def enter(name):
        return lambda module, args: where.append(name or "model") and None

    def leave(module, args, output):
        where.pop()

    hooks = [m.register_forward_pre_hook(enter(n)) for n, m in model.named_modules()]
    hooks += [m.register_forward_hook(leave) for m in model.modules()]
    ops: list[dict] = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            shapes = [list(a.shape) for a in args if isinstance(a, torch.Tensor)]
            op = str(func.overloadpacket.__name__)
            ops.append({"op": op, "module": where[-1], "shapes": shapes,
                        "out": [] if op in UNINITIALISED or _is_view(func) else _digest(out)})
            return out

    try:
        with Recorder():
            losses = model(x[:, :-1], x[:, 1:])["losses"]
            loss = sum(losses.values())
            where.append("backward")
            loss.backward()
            where[-1] = "optimizer"
            opt.step()
            where.pop()
            if name == "gpt2":
                model.eval()
                with torch.no_grad():
                    model.generate(x[:, :1], 8, temperature=0.0)
    finally:
        for h in hooks:
            h.remove()
    return ops


def code_hash(root: Path = ROOT) -> str:
    """sha256 over the code a trace runs (``SOURCES`` under ``root``): each module's path and its syntax tree
    without docstrings, written out field by field (``_canonical``: the same text on every Python the suite
    supports), so comments and docstrings do not count; a file that does not parse counts by its bytes. Two
    traces of equal hashes ran the same code, so a difference between them is the hosts'."""
    h = hashlib.sha256()
    for path in sorted(f for d in SOURCES for f in (root / d).rglob("*.py")):
        raw = path.read_bytes()
        try:
            tree = ast.parse(raw)
        except SyntaxError:
            text = raw
        else:
            for node in ast.walk(tree):
                body = getattr(node, "body", None)
                if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                        and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
                    node.body = body[1:] or [ast.Pass()]
            text = _canonical(tree).encode()
        h.update(str(path.relative_to(root)).encode() + b"\0" + text)
    return h.hexdigest()[:16]


def _canonical(value) -> str:
    """A syntax tree as text, leaving out empty and absent fields (which ``ast.dump`` writes differently from
    one Python to the next) and positions."""
    if isinstance(value, ast.AST):
        fields = ((f, getattr(value, f, None)) for f in value._fields)
        return type(value).__name__ + "(" + ",".join(f"{f}={_canonical(v)}" for f, v in fields
                                                     if v is not None and v != []) + ")"
    if isinstance(value, list):
        return "[" + ",".join(_canonical(v) for v in value) + "]"
    return repr(value)


def compare(a: dict, b: dict) -> dict:
    """Per model: the first differing operation (where one trace ends early: the first operation the other has
    beyond it, ``"only_in"`` naming which) and the count of differing ones; a model in one trace only is listed
    with ``"only_in"`` and no operations compared."""
    report = {}
    for name in sorted(set(a["models"]) | set(b["models"])):
        if name not in a["models"] or name not in b["models"]:
            report[name] = {"only_in": "A" if name in a["models"] else "B", "ops": None, "differing": None,
                            "first": None}
            continue
        ops_a, ops_b = a["models"][name], b["models"][name]
        differ = [i for i, (x, y) in enumerate(zip(ops_a, ops_b)) if x["out"] != y["out"] or x["op"] != y["op"]]
        shorter = min(len(ops_a), len(ops_b))
        if not differ and len(ops_a) != len(ops_b):
            longer = ops_a if len(ops_a) > shorter else ops_b
            first = {"index": shorter, **longer[shorter], "only_in": "A" if longer is ops_a else "B"}
        else:
            first = {"index": differ[0], **ops_a[differ[0]]} if differ else None
        report[name] = {"ops": [len(ops_a), len(ops_b)], "differing": len(differ) + abs(len(ops_a) - len(ops_b)),
                        "first": first}
    return report


def read_trace(path: str, flag: str = "--compare") -> dict:
    """A trace this module wrote (plain or gzipped JSON), or a one-line error naming what is wrong with it."""
    from benchmarks.common import BenchmarkError

    if not Path(path).is_file():
        raise BenchmarkError(f"{flag} {path}: no such file; write it on its host with "
                             f"python -m benchmarks.host_trace --out {path}")
    try:
        raw = Path(path).read_bytes()
        trace = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        if trace.get("benchmark") != "host_trace" or not isinstance(trace.get("models"), dict):
            raise ValueError("not a trace")
        return trace
    except (ValueError, AttributeError, OSError, EOFError):
        raise BenchmarkError(f"{flag} {path}: not a trace of python -m benchmarks.host_trace; "
                             "pass the --out files of two such runs") from None


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="the DAG's training jobs run on one thread")
    p.add_argument("--out", default="results/benchmarks/host_trace.json")
    p.add_argument("--compare", nargs=2, metavar="TRACE", help="two traces (one per host): the first differing op")
    p.add_argument("--against", metavar="TRACE", nargs="?", const=str(REFERENCE),
                   help=f"trace this host (to --out), then compare with TRACE (default: {REFERENCE.name})")
    a = p.parse_args(argv)
    if a.against:
        reference = read_trace(a.against, "--against")  # before the tracing: a bad path costs nothing
        return report(reference, trace(a), (a.against, a.out))
    if a.compare:
        return report(*[read_trace(path) for path in a.compare], a.compare)
    return trace(a)


def report(trace_a: dict, trace_b: dict, paths) -> dict:
    """Print and return ``compare``'s per-model result for two traces, with their hosts and code."""
    traces = [trace_a, trace_b]
    if not set(traces[0]["models"]) & set(traces[1]["models"]):
        from benchmarks.common import BenchmarkError

        raise BenchmarkError(f"--compare: the traces share no model ({sorted(traces[0]['models'])} against "
                             f"{sorted(traces[1]['models'])}); trace the same --models on both hosts")
    result = compare(*traces)
    for name, r in result.items():
        f = r["first"]
        if r["ops"] is None:
            print(f"{name:5s} traced in {r['only_in']} only")
            continue
        print(f"{name:5s} {r['differing']} of {r['ops'][0]} / {r['ops'][1]} ops differ" + (
            "" if f is None else f"; first #{f['index']} {f['op']} in {f['module']} on {f['shapes']}"
            + (f" (in {f['only_in']} only: the other trace ends there)" if "only_in" in f else "")))
    for label, path, t in zip("AB", paths, traces):
        print(f"{label} {path}: {t.get('host_line', 'host unknown')}; code {t.get('code', 'unknown')} "
              f"(commit {t.get('commit', 'unknown')[:12]})")
    if traces[0].get("code") != traces[1].get("code"):
        print("the two traces ran different code (their `code` hashes differ): differences may be the code's, "
              "not the hosts'; trace both at one commit")
    return result


def trace(a) -> dict:
    """Trace this host: every model of ``a.models``, written to ``a.out``."""
    for key, value in host_pins().items():  # as the DAG's jobs run (workflows/common.smk; none off x86)
        os.environ.setdefault(key, value)
    import torch

    from benchmarks.common import environment
    from common.io import atomic_write_json
    from common.provenance import git_state

    torch.set_num_threads(a.threads)
    env = environment(a.threads, torch.device("cpu"))
    result = {"benchmark": "host_trace", "config": vars(a), "host": env["host"], "host_line": env["host_line"],
              "code": code_hash(), "commit": git_state()[0],
              "models": {name: trace_model(name, a.seed) for name in a.models}}
    atomic_write_json(a.out, result)
    print(", ".join(f"{n} {len(ops)} ops" for n, ops in result["models"].items()) + f"; {env['host_line']}  -> {a.out}")
    return result


if __name__ == "__main__":
    from common.errors import entry_point

    sys.exit(entry_point(main)())
