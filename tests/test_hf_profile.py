"""The side-by-side profile of the course's engine and transformers, and its benchmark."""

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from transformers.generation.logits_process import LogitsProcessorList

from specdec_lib import ModelConfig, SamplingParams, TinyGPT, generate
from specdec_lib.experiments import generation_profile
from specdec_lib.experiments.generation_profile import (
    FORWARD,
    FORWARD_PARTS,
    GENERATION,
    LABEL,
    NORM,
    PARTS,
    SideJob,
    python_calls,
)
from specdec_lib.experiments.hf_compare import export_hf, load_hf
from specdec_lib.experiments.hf_profile import (
    JOBS,
    calls_by_package,
    count_table,
    profile_jobs,
    side_by_side_jobs,
    time_table,
)

ROOT = Path(__file__).resolve().parents[1]
N_TOKENS, K = 12, 3
PROMPT = [1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 1, 2]  # repeats, so lookup proposes


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    torch.manual_seed(0)
    config = ModelConfig(block_size=64, vocab_size=50, n_layer=2, n_head=2, n_embd=16, n_hidden=32)
    model = TinyGPT(config).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.k_smear.normal_(0, 2)
    return model, load_hf(export_hf(model, tmp_path_factory.mktemp("hf")))


@pytest.fixture(scope="module")
def profiles(models):
    model, hf = models
    return profile_jobs(side_by_side_jobs(model, hf, PROMPT, N_TOKENS, K), repeats=2)


def test_all_four_jobs_return_plain_greedy_output(models):
    model, hf = models
    reference = generate(model, PROMPT, SamplingParams(temperature=0, max_tokens=N_TOKENS))
    jobs = side_by_side_jobs(model, hf, PROMPT, N_TOKENS, K)
    assert list(jobs) == list(JOBS)
    for name, job in jobs.items():
        assert job.run() == reference, name


def test_both_sides_make_the_same_passes_and_every_marked_region_runs(profiles):
    course, tf, course_spec, tf_spec = (profiles[name] for name in JOBS)
    assert course.passes == tf.passes == N_TOKENS
    assert course_spec.passes == tf_spec.passes < N_TOKENS
    assert course_spec.region_calls["drafting"] == course_spec.passes  # one proposal a round
    assert tf_spec.region_calls["drafting"] >= tf_spec.passes
    assert tf.region_calls["stopping criteria"] == tf.passes
    assert tf.region_calls["rest of the loop"] == tf_spec.region_calls["rest of the loop"] == 1
    assert course.region_calls["setup"] >= 1 and "drafting" not in course.region_calls
    for profile in profiles.values():
        assert set(profile.seconds) == set(PARTS)
        assert min(profile.seconds.values()) >= 0  # a negative part would be a nesting error
        assert profile.forward > 0 and profile.host > 0 and profile.unprofiled > 0
        assert 0 < profile.unprofiled_forward < profile.unprofiled
        assert profile.forward_ops == sum(profile.forward_op_names.values())
        assert profile.host_ops == sum(profile.host_ops_by_part.values())
        assert profile.recorded_ops >= profile.forward_ops + profile.host_ops


def test_each_pass_runs_the_same_projections_on_both_sides(models, profiles):
    model, _ = models
    linear_per_pass = 4 * model.config.n_layer + 3 * model.config.n_layer + 1  # + output head
    for name in JOBS:
        profile = profiles[name]
        assert profile.forward_op_names["aten::linear"] == linear_per_pass * profile.passes, name
        assert profile.seconds["matrix products"] > 0 and profile.seconds["norms"] > 0


def test_share_is_the_median_over_repeats_of_a_within_run_ratio(profiles):
    profile = profiles["course plain"]
    assert len(profile.repeat_seconds) == 2
    each = [r["matrix products"] / sum(r[p] for p in FORWARD_PARTS) for r in profile.repeat_seconds]
    assert profile.share("matrix products") == pytest.approx(sum(each) / 2)
    assert profile.share(*FORWARD_PARTS) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="parts"):
        profile.share("drafting")
    with pytest.raises(ValueError, match="parts"):
        profile.share()


def test_python_calls_are_counted_inside_and_outside_the_passes(models, profiles):
    model, _ = models
    norms = 2 * model.config.n_layer + 1
    course = profiles["course plain"]
    calls = course.forward_python_functions
    assert calls["specdec_lib.engine.model.RMSNorm.forward"] == norms * course.passes
    assert calls["specdec_lib.engine.model.TinyGPT.forward"] == course.passes
    assert course.forward_python_calls == sum(calls.values())
    assert "specdec_lib.engine.model.TinyGPT.forward" not in course.host_python_functions
    tf = profiles["transformers plain"].forward_python_functions
    assert tf["transformers.models.llama.modeling_llama.LlamaRMSNorm.forward"] == norms * N_TOKENS
    by_package = calls_by_package(tf)
    assert sum(by_package.values()) == sum(tf.values()) and by_package["transformers"] > 0


def test_python_calls_of_a_job_repeat_exactly(models):
    model, hf = models
    job = side_by_side_jobs(model, hf, PROMPT, N_TOKENS, K)["transformers prompt lookup"]
    job.run()
    assert python_calls(job) == python_calls(job)


@dataclass
class Event:
    """The profiler's raw event, as far as the split reads it (nanoseconds)."""

    label: str
    start: int
    end: int

    def name(self) -> str:
        return self.label

    def start_ns(self) -> int:
        return self.start

    def end_ns(self) -> int:
        return self.end


def test_the_split_charges_each_interval_to_exactly_one_part():
    ms = 1_000_000
    events = [
        Event(GENERATION, 0, 100 * ms),
        Event(FORWARD, 10 * ms, 50 * ms),
        Event("aten::linear", 12 * ms, 20 * ms),
        Event("aten::mm", 13 * ms, 19 * ms),  # inside the linear: part of it
        Event("aten::add", 22 * ms, 25 * ms),
        Event(NORM, 26 * ms, 36 * ms),
        Event("aten::mul", 27 * ms, 30 * ms),
        Event("aten::scaled_dot_product_attention", 40 * ms, 44 * ms),
        Event(f"{LABEL}drafting", 55 * ms, 65 * ms),
        Event("aten::eq", 56 * ms, 58 * ms),
        Event("aten::argmax", 70 * ms, 72 * ms),
    ]
    split = generation_profile._split(events[::-1], outer="rest of the loop")  # any order
    seconds = {part: round(1e3 * s, 6) for part, s in split["seconds"].items() if s}
    assert seconds == {
        "matrix products": 8,
        "attention": 4,
        "norms": 10,
        "other operators": 3,
        "Python in forward": 40 - 8 - 4 - 10 - 3,
        "drafting": 10,
        "rest of the loop": 100 - 40 - 10,
    }
    assert split["passes"] == 1 and split["recorded"] == 7
    assert split["names"] == {
        "aten::linear": 1,
        "aten::add": 1,
        "aten::mul": 1,
        "aten::scaled_dot_product_attention": 1,
    }
    assert split["host_ops"] == {"drafting": 1, "rest of the loop": 1}


def test_the_wrappers_are_gone_after_a_profile(models):
    model, hf = models
    original = LogitsProcessorList.__dict__["__call__"]
    jobs = side_by_side_jobs(model, hf, PROMPT, N_TOKENS, K)
    drafter = jobs["course speculative"].regions["drafting"][0][0]
    profile_jobs(jobs, repeats=1, warmup=0)
    assert LogitsProcessorList.__dict__["__call__"] is original
    assert "draft" not in vars(drafter) and "propose" not in vars(drafter)
    assert not model._forward_hooks and not model._forward_pre_hooks


def test_tables_have_a_column_per_job_and_a_row_per_part(profiles):
    counts, times = count_table(profiles), time_table(profiles)
    for name in JOBS:
        assert name in counts.splitlines()[0] and name in times.splitlines()[0]
    assert all(any(line.startswith(part) for line in times.splitlines()) for part in PARTS)
    with pytest.raises(ValueError, match="profiles"):
        count_table({})


def test_bad_arguments_are_refused(models):
    model, hf = models
    with pytest.raises(ValueError, match="prompt_token_ids"):
        side_by_side_jobs(model, hf, PROMPT * 4, 20, K)
    with pytest.raises(ValueError, match="n_tokens"):
        side_by_side_jobs(model, hf, PROMPT, 0, K)
    with pytest.raises(ValueError, match="k"):
        side_by_side_jobs(model, hf, PROMPT, N_TOKENS, 0)
    with pytest.raises(ValueError, match="target"):
        side_by_side_jobs(hf, hf, PROMPT, N_TOKENS, K)
    jobs = side_by_side_jobs(model, hf, PROMPT, N_TOKENS, K)
    with pytest.raises(ValueError, match="repeats"):
        profile_jobs(jobs, repeats=0)
    with pytest.raises(ValueError, match="jobs"):
        profile_jobs({})
    job = jobs["course plain"]
    odd = SideJob(job.run, job.model, {"lunch": [(torch.nn.Module, "forward")]}, job.outer)
    with pytest.raises(ValueError, match="regions"):
        profile_jobs({"odd": odd}, repeats=1, warmup=0)


def test_the_benchmark_runs_in_its_small_form(tmp_path):
    out = tmp_path / "hf_wall_clock.json"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "hf_wall_clock.py"),
            "--small",
            "--out",
            str(out),
        ],
        check=True,
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    result = json.loads(out.read_text())
    settings = result["settings"]
    n_prompts = sum(len(v) for v in result["prompts"].values())
    assert set(result["prompts"]) == {"copy", "novel"}
    for job in JOBS:
        rows = result["times"][job]
        assert len(rows) == n_prompts and all(len(r) == settings["repeats"] for r in rows)
        assert all(t > 0 for r in rows for t in r)
    for workload in ("copy", "novel"):
        for key in ("plain", "speculative"):
            ratio = result["ratios"][workload][key]
            assert ratio["value"] > 0 and ratio["low"] <= ratio["value"] <= ratio["high"]
        passes = result["passes"][workload]
        assert passes["course speculative"] == passes["transformers prompt lookup"]
        assert passes["course plain"] == passes["transformers plain"]
    assert "commit" in result["stamp"] and "busy" in result["load"]
