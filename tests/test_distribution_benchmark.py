"""The stored distribution-test benchmark keeps the promises the course makes about it."""

from specdec_lib.analysis.results import load_result

SIZES_IN_CHAPTER_7 = {100, 200, 300, 500, 750, 1000, 1500}


def _inside(x, interval):
    return interval[0] <= x <= interval[1]


def test_the_stored_distribution_test_result_passed():
    result = load_result("distribution_test")
    assert result["passed"] is True
    assert all(result["checks"].values())


def test_false_alarm_intervals_contain_alpha_at_every_size_over_2000_seed_runs():
    result = load_result("distribution_test")
    alpha = result["setup"]["alpha"]
    rows = result["rows"]
    assert {r["samples"] for r in rows} >= SIZES_IN_CHAPTER_7
    for r in rows:
        assert r["seeds"] >= 2000 and r["null_runs"] >= 2000
        assert r["pooled_runs"] == r["seeds"] + r["null_runs"]
        assert r["pooled_false_alarms"] == r["false_alarms"] + r["null_false_alarms"]
        assert _inside(alpha, r["pooled_false_alarm_interval"]), r["samples"]
        assert _inside(r["false_alarms"] / r["seeds"], r["false_alarm_interval"])
    t1 = result["temperature_1"]
    assert t1["null_runs"] >= 2000 and _inside(alpha, t1["null_false_alarm_interval"])


def test_the_predicted_miss_rate_lies_inside_the_measured_interval_at_every_size():
    # at the level that holds for every size at once (the benchmark's Bonferroni interval):
    # seven 95% intervals miss an exact prediction somewhere about a third of the time
    rows = load_result("distribution_test")["rows"]
    for r in rows:
        assert _inside(r["predicted_miss_rate"], r["miss_interval_familywise"]), r["samples"]
        lo, hi = r["miss_interval"]
        flo, fhi = r["miss_interval_familywise"]
        assert flo <= lo and hi <= fhi  # wider than the per-size interval
        if "real_seeds" in r:  # the real functions, at the sizes they were run
            assert _inside(r["predicted_miss_rate"], r["real_miss_interval"]), r["samples"]
        assert abs(r["predicted_power"] + r["predicted_miss_rate"] - 1) < 1e-12
    assert any("real_seeds" in r for r in rows)
    misses = [r["misses"] for r in rows]
    assert misses == sorted(misses, reverse=True) and misses[0] > misses[-1]
