"""`irqlab run --target kvm-arm64`'s refusals: one line naming the fix, exit 2."""

from __future__ import annotations

from tests.conftest import call_cli


def test_accel_is_refused_with_why(tmp_path) -> None:
    r = call_cli(["run", "--target", "kvm-arm64", "--accel", "kvm"], tmp_path / "x.duckdb")
    assert r.code == 2 and "Traceback" not in r.stderr
    assert "--accel does not apply to --target kvm-arm64" in r.stderr


def test_the_host_hog_needs_the_nested_kvm_host(tmp_path) -> None:
    r = call_cli(["run", "--target", "native", "--load", "kvm-host-hog"],
                 tmp_path / "x.duckdb")
    assert r.code == 2 and "needs --target kvm-arm64" in r.stderr


def test_the_host_hog_runs_on_the_vcpu_threads_cpu_only(tmp_path) -> None:
    r = call_cli(["run", "--target", "kvm-arm64", "--load", "kvm-host-hog:cpus=0"],
                 tmp_path / "x.duckdb")
    assert r.code == 2 and "drop cpu=" in r.stderr
