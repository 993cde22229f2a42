"""The risk estimator (replica_core.risk) against answers computed by hand, and the fault rates a
planner states (broker MTBF, repair-time distributions, power losses per year): the schedule is a
pure function of the seed, and a power-loss rate gives the loss probability 1 − exp(−λt)."""
import math
import random

import numpy as np
import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.risk import (
    SECONDS_PER_YEAR,
    mcnemar_exact_p,
    paired_comparison,
    quantile,
    risk_estimate,
    seeds_for_mean,
    seeds_for_proportion,
    wilson_half_width,
)
from replica_core.sim import scenario as sc
from replica_core.sim.faults import PlannedFault, _with_power_losses, draw_repair_ms, plan_random
from replica_core.sim.run import run_scenario
from replica_core.sweep import wilson

Z = 1.959964


def wilson_by_quadratic(k, n, z=Z):
    """The Wilson interval as the two roots p of (p̂ − p)² = z²·p(1 − p)/n — solved here as a
    quadratic, independently of the library's centre ± half-width form."""
    ph = k / n
    a = 1 + z * z / n
    b = -(2 * ph + z * z / n)
    c = ph * ph
    disc = math.sqrt(b * b - 4 * a * c)
    return (-b - disc) / (2 * a), (-b + disc) / (2 * a)


# ---- intervals and sample sizes -------------------------------------------------------------------
@pytest.mark.parametrize("k, n, lo, hi", [
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table II,
    # method 3 (Wilson score, no continuity correction)
    (81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_matches_published_values(k, n, lo, hi):
    got = wilson(k, n)
    assert got[0] == pytest.approx(lo, abs=1e-4) and got[1] == pytest.approx(hi, abs=1e-4)
    q = wilson_by_quadratic(k, n)
    assert got[0] == pytest.approx(max(0.0, q[0]), abs=1e-12)
    assert got[1] == pytest.approx(q[1], abs=1e-12)


def test_seeds_for_a_proportion_interval():
    # at p = 1/2 the Wilson half-width h gives n = z²/(4h²) − z² exactly: 384.15 − 3.84 = 380.3
    assert seeds_for_proportion(0.5, 0.05) == 381
    assert seeds_for_proportion(0.5, 0.1) == math.ceil(Z * Z / (4 * 0.01) - Z * Z)  # 93
    # elsewhere: the smallest n whose interval (from the quadratic roots) is narrow enough
    for p, h in ((0.1, 0.05), (0.3, 0.02), (0.0, 0.05)):
        n = seeds_for_proportion(p, h)
        assert half_width_ok(p, n, h)
        lo, hi = wilson_by_quadratic(p * n, n)
        assert wilson_half_width(p, n) == pytest.approx((hi - lo) / 2)
    with pytest.raises(ValueError):
        seeds_for_proportion(0.5, 0.0)


def test_seeds_for_a_mean_interval():
    # sd 1, ±0.5: t(17)/√18 = 2.110/4.243 = 0.497 ≤ 0.5 < t(16)/√17 = 2.120/4.123 = 0.514
    assert seeds_for_mean(1.0, 0.5) == 18
    # large n: t → 1.96, n = ⌈(1.96·sd/h)²⌉ = ⌈(1.96·10/1)²⌉ = ⌈384.16⌉
    assert seeds_for_mean(10.0, 1.0) == 385
    assert seeds_for_mean(0.0, 1.0) == 2 and seeds_for_mean(1.0, 0.0) is None


def test_quantiles_interpolate_between_order_statistics():
    xs = [4, 1, 3, 2]  # sorted 1 2 3 4; position q·3
    assert quantile(xs, 0.5) == 2.5 and quantile(xs, 0.9) == pytest.approx(3.7)
    assert quantile(xs, 0.0) == 1 and quantile(xs, 1.0) == 4 and quantile([7], 0.99) == 7
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_mcnemar_exact_p_values():
    assert mcnemar_exact_p(10, 0) == pytest.approx(2 / 1024)          # 2·(1/2)^10
    assert mcnemar_exact_p(9, 1) == pytest.approx(2 * 11 / 1024)      # 2·(1 + 10)/2^10
    assert mcnemar_exact_p(2, 1) == 1.0 and mcnemar_exact_p(0, 0) == 1.0


# ---- the estimate of one configuration ------------------------------------------------------------
HUNDREDTH_YEAR = SECONDS_PER_YEAR / 100  # 87.6 hours


def synthetic_runs():
    lost = [0, 0, 0, 0, 0, 0, 0, 10, 20, 70]
    return [{"seed_index": i, "lost_acked_records": v, "unavailable_partition_seconds": 36.0,
             "sim_seconds": HUNDREDTH_YEAR} for i, v in enumerate(lost)]


def test_risk_estimate_of_a_synthetic_configuration():
    r = risk_estimate(synthetic_runs())
    assert r["runs"] == 10 and r["sim_years"] == pytest.approx(0.1)
    assert r["sim_seconds"] == pytest.approx(8760 * 3600 / 10)
    p = r["p_any_loss"]
    # 3 of 10 runs lost data; Wilson at p̂ = 0.3, n = 10: centre 0.35555, half 0.24772
    assert p["runs_losing"] == 3 and p["p"] == 0.3
    assert p["wilson95"] == [pytest.approx(0.1078, abs=1e-4), pytest.approx(0.6032, abs=1e-4)]
    # per year: each run is 1/100 year, so the rates are 0×7, 1000, 2000, 7000; mean 1000
    lost = r["lost_records_per_year"]
    assert lost["mean"] == pytest.approx(1000.0)
    sd = math.sqrt((7 * 1000 ** 2 + 0 + 1000 ** 2 + 6000 ** 2) / 9)  # 2211.1
    assert lost["sd"] == pytest.approx(sd)
    half = 2.262 * sd / math.sqrt(10)  # t(9)
    assert lost["ci95"] == [pytest.approx(1000 - half), pytest.approx(1000 + half)]
    # 36 partition-seconds each hundredth of a year: 3,600 per year, no spread
    un = r["unavailable_partition_seconds_per_year"]
    assert un["mean"] == pytest.approx(3600.0) and un["ci95"] == [pytest.approx(3600.0)] * 2
    # loss sizes over the three losing runs 10, 20, 70: p50 20, p90 at position 1.8 → 60
    size = r["loss_size"]
    assert size["runs"] == 3 and size["p50"] == 20 and size["p90"] == pytest.approx(60.0)
    assert size["max"] == 70 and size["mean"] == pytest.approx(100 / 3)
    need = r["seeds_needed"]
    assert need["p_any_loss_half_width"] == 0.05 and need["p_any_loss_at"] == 0.3
    assert half_width_ok(0.3, need["p_any_loss"], 0.05)
    # ±25 % of 1000 per year with sd 2211: n = ⌈(1.96·2211.1/250)²⌉ = ⌈300.5⌉ (t = 1.96 there)
    assert need["lost_records_per_year"] == 301
    assert need["unavailable_partition_seconds_per_year"] == 2  # no spread at all


def half_width_ok(p, n, h):
    lo, hi = wilson_by_quadratic(p * n, n)
    lo1, hi1 = wilson_by_quadratic(p * (n - 1), n - 1)
    return (hi - lo) / 2 <= h < (hi1 - lo1) / 2


def test_no_loss_in_any_run_sizes_for_the_worst_case():
    runs = [{**r, "lost_acked_records": 0} for r in synthetic_runs()]
    r = risk_estimate(runs)
    assert r["p_any_loss"]["wilson95"][0] == 0.0 and r["p_any_loss"]["wilson95"][1] > 0.2
    assert r["seeds_needed"]["p_any_loss"] == 381 and r["seeds_needed"]["p_any_loss_at"] == 0.5
    assert r["seeds_needed"]["lost_records_per_year"] is None
    assert r["loss_size"] == {"runs": 0, "mean": None, "max": None, "p50": None, "p90": None,
                              "p99": None}
    with pytest.raises(ValueError):
        risk_estimate([])


def test_paired_comparison_matches_seeds_not_positions():
    a = [{"seed_index": i, "lost_acked_records": v, "unavailable_partition_seconds": u}
         for i, (v, u) in enumerate([(0, 1.0), (5, 2.0), (0, 3.0), (3, 4.0)])]
    b = [{"seed_index": i, "lost_acked_records": v, "unavailable_partition_seconds": u}
         for i, (v, u) in enumerate([(0, 1.0), (0, 1.0), (2, 1.0), (0, 1.0)])]
    random.Random(3).shuffle(b)
    q = paired_comparison(a, b)
    assert q["pairs"] == 4
    d = q["difference"]["lost_acked_records"]  # differences 0, 5, −2, 3
    sd = math.sqrt(((-1.5) ** 2 + 3.5 ** 2 + (-3.5) ** 2 + 1.5 ** 2) / 3)
    assert d["mean"] == 1.5
    assert d["ci95"] == [pytest.approx(1.5 - 3.182 * sd / 2), pytest.approx(1.5 + 3.182 * sd / 2)]
    u = q["difference"]["unavailable_partition_seconds"]  # 0, 1, 2, 3
    assert u["mean"] == 1.5
    assert q["loss_runs"] == {"a_only": 2, "b_only": 1, "both": 0, "neither": 1,
                              "mcnemar_exact_p": 1.0}
    # only the seeds both ran are paired
    assert paired_comparison(a[:3], b)["pairs"] == 3
    with pytest.raises(ValueError):
        paired_comparison(a, [{**b[0], "seed_index": 9}])


# ---- fault rates as a planner states them ---------------------------------------------------------
def test_mtbf_is_the_inverse_of_the_hourly_crash_rate():
    by_rate = plan_random({"crashes_per_broker_hour": 2.0}, [1, 2, 3], 3_600_000,
                          np.random.default_rng(5))
    by_mtbf = plan_random({"broker_mtbf_hours": 0.5}, [1, 2, 3], 3_600_000,
                          np.random.default_rng(5))
    assert by_rate == by_mtbf and len(by_rate) > 4


PLANNER = {"broker_mtbf_hours": 0.2, "power_failure_fraction": 0.2,
           "repair_time": {"distribution": "lognormal", "median_s": 60, "sigma": 1.0},
           "power_losses_per_year": 8760 * 4}


def test_planner_schedule_is_a_pure_function_of_the_seed():
    a = plan_random(PLANNER, [1, 2, 3], 3_600_000, np.random.default_rng(11))
    b = plan_random(PLANNER, [1, 2, 3], 3_600_000, np.random.default_rng(11))
    c = plan_random(PLANNER, [1, 2, 3], 3_600_000, np.random.default_rng(12))
    assert a == b and a != c
    # the same through a whole run: the scenario's seed alone fixes the faults
    def timeline(seed):
        s = sc.from_dict({**POWER_DOC, "duration_s": 20, "fault_rates": {
            **PLANNER, "power_losses_per_year": 8760 * 360.0}}, {"seed": seed})
        return [(r["at_s"], r["fault"]) for r in run_scenario(s)[0]["fault_recovery"]]
    assert timeline(3) == timeline(3) != timeline(4)
    assert timeline(3)  # something happened


def test_every_broker_is_down_over_the_union_of_its_crashes_and_the_power_outages():
    plan = [PlannedFault(1000, 0, "crash", broker=1, mode="process", source="random"),
            PlannedFault(5000, 1, "restart", broker=1, source="random"),
            PlannedFault(2000, 2, "isolate", broker=2, source="random")]
    out = sorted(_with_power_losses(plan, [(3000.0, 4000.0), (8000.0, 12000.0)], [1, 2],
                                    10_000, 100))
    got = [(p.at_ms, p.kind, p.broker, p.mode if p.kind == "crash" else "") for p in out]
    assert got == [
        (1000, "crash", 1, "power"),   # down already: the outage takes its page cache too
        (2000, "isolate", 2, ""),
        (3000, "crash", 2, "power"), (4000, "restart", 2, ""),
        (5000, "restart", 1, ""),      # its own repair ends after the power came back
        (8000, "crash", 1, "power"), (8000, "crash", 2, "power"),  # power back after the end
    ]


def test_repair_time_distributions():
    rng = np.random.default_rng(1)
    assert draw_repair_ms({"distribution": "fixed", "value_s": 2.5}, rng) == 2500.0
    logn = [draw_repair_ms({"distribution": "lognormal", "median_s": 60.0, "sigma": 1.0}, rng)
            for _ in range(4000)]
    assert quantile(logn, 0.5) == pytest.approx(60_000, rel=0.06)
    # ln T ~ N(ln 60 s, 1): the 84th percentile is one sigma up, 60·e s
    assert quantile(logn, 0.8413) == pytest.approx(60_000 * math.e, rel=0.08)
    expo = [draw_repair_ms({"distribution": "exponential", "mean_s": 30.0}, rng)
            for _ in range(4000)]
    assert sum(expo) / len(expo) == pytest.approx(30_000, rel=0.05)
    fixed = plan_random({"crashes_per_broker_hour": 30.0,
                         "repair_time": {"distribution": "fixed", "value_s": 7}},
                        [1], 3_600_000, np.random.default_rng(2))
    starts = [p.at_ms for p in fixed if p.kind == "crash"]
    ends = [p.at_ms for p in fixed if p.kind == "restart"]
    assert len(starts) > 5
    assert all(e - s in (6999, 7000, 7001) for s, e in zip(starts, ends, strict=False))


@pytest.mark.parametrize("rates, needle", [
    ({"repair_time": {"distribution": "weibull", "mean_s": 3}}, "weibull"),
    ({"repair_time": {"distribution": "lognormal", "median_s": 3}}, "sigma"),
    ({"repair_time": {"distribution": "fixed", "value_s": -1}}, "-1"),
    ({"repair_time": {"distribution": "exponential", "mean_s": 3, "sigma": 1}}, "sigma"),
    ({"repair_time": 600}, "600"),
    ({"broker_mtbf_hours": 0}, "0"),
    ({"broker_mtbf_hours": 10, "crashes_per_broker_hour": 1}, "not both"),
    ({"power_losses_per_year": -2}, "negative"),
])
def test_bad_planner_rates_are_refused_naming_the_value(rates, needle):
    with pytest.raises(InvalidConfigurationError, match=needle):
        sc.from_dict({**POWER_DOC, "fault_rates": rates})


# ---- a loss probability computable by hand ---------------------------------------------------------
# Three brokers, RF 3, acks=all, never flushed (Kafka's default flush.messages): a cluster-wide
# power loss reverts every replica to its last flushed bytes, so the records acknowledged before
# it are gone once a broker is back. With a fixed repair time R the loss is counted when the
# power returns before the run's end T, i.e. when the first outage starts before T − R. Power
# losses at rate λ: P(run loses) = 1 − exp(−λ(T − R)). λ is chosen to make that 1/2.
T_S, R_S = 30.0, 1.0
LAMBDA_PER_YEAR = math.log(2) / ((T_S - R_S) / SECONDS_PER_YEAR)
POWER_DOC = {"name": "power", "duration_s": T_S, "storage": "memory", "sample_interval_s": 5,
             "cluster": {"brokers": 3},
             "configs": {"min.insync.replicas": 2, "broker.session.timeout.ms": 2000},
             "topics": [{"name": "t", "partitions": 3, "replication_factor": 3}],
             "workload": {"batches_per_second": 2.0, "records_per_batch": 5, "acks": "all"},
             "fault_rates": {"power_losses_per_year": LAMBDA_PER_YEAR,
                             "repair_time": {"distribution": "fixed", "value_s": R_S}}}


def test_power_loss_schedule_has_the_hand_computed_probability():
    rates = POWER_DOC["fault_rates"]
    hits = 0
    n = 2000
    for seed in range(n):
        plan = plan_random(rates, [1, 2, 3], int(T_S * 1000), np.random.default_rng(seed))
        crashes = [p for p in plan if p.kind == "crash"]
        assert all(p.mode == "power" for p in crashes)
        first = min((p.at_ms for p in crashes), default=None)
        if first is not None:
            assert sorted(p.broker for p in crashes if p.at_ms == first) == [1, 2, 3]
        hits += any(p.kind == "restart" for p in plan)
    lo, hi = wilson(hits, n)
    assert lo <= 0.5 <= hi


def test_runs_lose_data_exactly_when_the_power_fails_and_comes_back():
    rows = []
    for seed in range(40):
        summary = run_scenario(sc.from_dict(POWER_DOC, {"seed": seed}))[0]
        outages = [r["at_s"] for r in summary["fault_recovery"]
                   if r["kind"] == "crash" and "(power)" in r["fault"]]
        restored = [r["at_s"] for r in summary["fault_recovery"] if r["kind"] == "restart"]
        lost = summary["lost_acked_records"]
        if lost:
            assert restored and summary["lost_acked_records_by_cause"]["power_failure"] == lost
        elif outages and restored:
            assert min(outages) < 0.5  # before the first acknowledgement: nothing to lose
        rows.append({"seed_index": seed, "lost_acked_records": lost,
                     "unavailable_partition_seconds": summary["unavailable_partition_seconds"],
                     "sim_seconds": summary["sim_seconds"]})
    r = risk_estimate(rows)
    lo, hi = r["p_any_loss"]["wilson95"]
    assert 5 < r["p_any_loss"]["runs_losing"] < 35 and lo <= 0.5 <= hi
    # flushing every message (flush.messages=1) keeps everything through the same outages
    losing = [row["seed_index"] for row in rows if row["lost_acked_records"]][:6]
    for seed in losing:
        s = sc.from_dict(POWER_DOC, {"seed": seed, "flush.messages": 1})
        summary = run_scenario(s)[0]
        assert summary["lost_acked_records"] == 0 and summary["acked_records"] > 0
        assert any("(power)" in r["fault"] for r in summary["fault_recovery"])
