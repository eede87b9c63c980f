from irqlab.bench.stats import bench_stats


def test_bench_small_run():
    result = bench_stats(n=300_000, chunk=70_000)
    assert set(result) >= {"ours_s", "numpy_s", "ratio", "samples_per_s"}
    assert result["ours_s"] > 0 and result["numpy_s"] > 0
    assert result["ratio"] == result["ours_s"] / result["numpy_s"]
    # Our percentiles agree with the exact sort within the histogram's bound.
    assert 0 <= result["max_percentile_rel_err"] <= 1 / 128
