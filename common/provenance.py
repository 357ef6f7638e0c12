"""The provenance block every result carries: code version, library versions, host."""
from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

_LIBRARIES = ("torch", "numpy", "tokenizers", "transformers", "datasets", "safetensors", "lm_eval", "snakemake")
_ROOT = Path(__file__).resolve().parents[1]


def git_state() -> tuple[str, bool]:
    """(commit, dirty) of the repository this code runs from; ('unknown', False) outside git. Dirty counts
    untracked files too (a new profile in config/ is not the commit), never ignored ones (results/, .venv)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=normal"], cwd=_ROOT,
                                    capture_output=True, text=True, check=True).stdout.strip())
        return commit, dirty
    except (OSError, subprocess.CalledProcessError):
        return "unknown", False


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name.replace("_", "-"))
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


# The environment variables that fix which code path a CPU library takes on an x86 host (docs/embedded.md, "Same numbers
# on another host"): MKL's conditional-numerical-reproducibility AVX2 branch (fixed cache sizes, deterministic
# reductions) and ATen's AVX2 kernels. The workflow sets them for its jobs (workflows/common.smk); the
# fingerprint records what was in effect.
HOST_PINS = {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}


def host_pins() -> dict[str, str]:
    """The pins for this machine: ``HOST_PINS`` on x86-64, none elsewhere (the values name x86 code paths)."""
    return dict(HOST_PINS) if platform.machine().lower() in ("x86_64", "amd64") else {}


def _cpu_model() -> tuple[str, str, str, str]:
    """(model name, vendor, widest x86 vector extension the CPU has, "family F model M stepping S") from
    /proc/cpuinfo, or the platform's words where there is none. The numbers tell CPU generations apart where
    a virtual machine names every one "Intel(R) Xeon(R) Processor"."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return platform.processor() or platform.machine(), "unknown", "unknown", "unknown"
    field = lambda name: next(iter(re.findall(rf"^{name}\s*:\s*(.+)$", text, re.M)), "unknown").strip()  # noqa: E731
    flags = set(field("flags").split())
    widest = next((name.upper() for name in ("avx512f", "avx2", "avx", "sse4_2") if name in flags), "unknown")
    cpu_id = f"family {field('cpu family')} model {field('model')} stepping {field('stepping')}"
    return field("model name"), field("vendor_id"), widest.replace("AVX512F", "AVX512"), cpu_id


@functools.lru_cache(maxsize=1)
def host_fingerprint() -> dict:
    """What decides a CPU run's numbers besides the code and the seed: the CPU (model, vendor, its widest vector
    extension, the instruction set torch dispatches to), cores and threads, the torch / oneDNN / BLAS builds
    and the pins in effect."""
    import torch

    config = torch.__config__.show()
    find = lambda pattern: next(iter(re.findall(pattern, config)), "unknown")  # noqa: E731
    cpu, vendor, widest, cpu_id = _cpu_model()
    return {"cpu": cpu, "vendor": vendor, "cpu_id": cpu_id, "machine": platform.machine(), "cpu_isa": widest,
            "isa": torch.backends.cpu.get_cpu_capability(),  # what torch dispatches to (after the pins)
            "cores": os.cpu_count(), "threads": torch.get_num_threads(), "torch": torch.__version__,
            "onednn": find(r"MKL-DNN (v[\d.]+)"), "blas": find(r"BLAS_INFO=(\w+)"),
            "mkl": find(r"Math Kernel Library Version ([\d.]+)"),
            "pins": {name: os.environ.get(name) for name in HOST_PINS}}


def host_summary(fingerprint: dict) -> str:
    """One line of a fingerprint: ``Intel(R) Xeon(R) Processor (GenuineIntel, family 6 model 207 stepping 2, AVX512),
    ISA AVX2, 2 cores, ...``."""
    pins = ", ".join(f"{k}={v}" for k, v in fingerprint.get("pins", {}).items() if v) or "none"
    known = fingerprint.get("cpu_id", "unknown") != "unknown"  # older records have none
    cpu_id = f"{fingerprint['cpu_id']}, " if known else ""
    return (f"{fingerprint.get('cpu', 'unknown CPU')} ({fingerprint.get('vendor', '?')}, {cpu_id}"
            f"{fingerprint.get('cpu_isa', '?')}), "
            f"ISA {fingerprint.get('isa', '?')}, "
            f"{fingerprint.get('cores', '?')} cores, torch {fingerprint.get('torch', '?')}, oneDNN "
            f"{fingerprint.get('onednn', '?')}, BLAS {fingerprint.get('blas', '?')} "
            f"{fingerprint.get('mkl', '')}".rstrip()
            + f", pins {pins}")


def provenance(*, config_hash: str, checkpoint_sha256: str | None, seed: int, wall_time_s: float) -> dict:
    commit, dirty = git_state()
    return {"git_commit": commit, "git_dirty": dirty, "config_hash": config_hash,
            "checkpoint_sha256": checkpoint_sha256, "versions": library_versions(), "seed": seed,
            "wall_time_s": round(wall_time_s, 3), "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "host_fingerprint": host_fingerprint()}
