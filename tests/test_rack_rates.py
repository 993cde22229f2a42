"""Per-rack fault rates in a planner's units (``rack_mtbf_hours``, ``rack_power_losses_per_year``,
``rack_repair_time``; replica_core.sim.faults): the schedule is a pure function of the seed,
schedules without the new keys are the ones drawn before they existed, bad values are refused
naming them, and a rack's power loss takes every broker of that rack down at once — checked
against cases worked out by hand."""
import math

import numpy as np
import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.risk import SECONDS_PER_YEAR
from replica_core.sim import scenario as sc
from replica_core.sim.faults import (
    PlannedFault,
    plan_all_random,
    plan_rack_faults,
    plan_rack_outages,
    validate_rates,
    with_rack_outages,
)
from replica_core.sim.run import run_scenario
from replica_core.sweep import wilson

RACKS = {1: "a", 2: "b", 3: "c"}
SIX = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}

# ---- schedules without the new keys are unchanged --------------------------------------------------
OLD_KEYS = {"broker_mtbf_hours": 0.5, "power_failure_fraction": 0.5,
            "repair_time": {"distribution": "lognormal", "median_s": 60, "sigma": 1.0},
            "power_losses_per_year": 8760 * 2, "isolations_per_broker_hour": 1,
            "rack_outages_per_hour": 1, "rack_power_failure_fraction": 0.5,
            "rack_isolations_per_hour": 1, "rack_partitions_per_hour": 1}
# Drawn for seed 7 over 30 minutes by faults.py as of commit 77d7346 (before the per-rack
# planner keys existed: plan_random, then plan_rack_faults, on one generator), as
# (at_ms, kind, broker, rack, mode of a crash).
OLD_SCHEDULE_SEED_7 = [
    (29882, "crash", None, "c", "process"), (79808, "isolate", None, "a", ""),
    (84112, "restart", None, "c", ""), (88607, "unisolate", None, "a", ""),
    (216166, "isolate", 3, None, ""), (240638, "unisolate", 3, None, ""),
    (540961, "crash", 2, None, "process"), (638884, "restart", 2, None, ""),
    (743517, "isolate", 1, None, ""), (811190, "unisolate", 1, None, ""),
    (846303, "isolate", 1, None, ""), (902488, "unisolate", 1, None, ""),
    (985355, "crash", None, "c", "process"), (1006693, "restart", None, "c", ""),
    (1200746, "crash", 2, None, "process"), (1267417, "restart", 2, None, ""),
    (1273552, "crash", 1, None, "power"), (1324543, "crash", 3, None, "power"),
    (1354442, "restart", 1, None, ""), (1371973, "restart", 3, None, ""),
    (1710554, "crash", None, "a", "power"), (1741833, "restart", None, "a", ""),
]


def brief(plan):
    return [(p.at_ms, p.kind, p.broker, p.rack, p.mode if p.kind == "crash" else "")
            for p in sorted(plan)]


def test_without_the_new_keys_the_schedule_is_the_one_drawn_before_them():
    plan = plan_all_random(OLD_KEYS, [1, 2, 3], RACKS, 1_800_000, np.random.default_rng(7))
    assert brief(plan) == OLD_SCHEDULE_SEED_7
    # a zero rate of the new kind draws nothing either
    zero = plan_all_random({**OLD_KEYS, "rack_power_losses_per_year": 0}, [1, 2, 3], RACKS,
                           1_800_000, np.random.default_rng(7))
    assert zero == plan


def test_new_keys_draw_after_everything_else():
    """Adding rack outages leaves every other fault as it was; each broker is still down over
    every window it was down before (now merged with its rack's outages)."""
    base = {k: v for k, v in OLD_KEYS.items() if k != "rack_outages_per_hour"}
    added = {**base, "rack_mtbf_hours": 0.5, "rack_power_losses_per_year": 8760 * 4}
    for seed in range(5):
        a = plan_all_random(base, [1, 2, 3], RACKS, 1_800_000, np.random.default_rng(seed))
        b = plan_all_random(added, [1, 2, 3], RACKS, 1_800_000, np.random.default_rng(seed))
        def others(plan):
            return brief(p for p in plan if p.kind not in ("crash", "restart") or p.rack)
        assert others(a) == others(b)
        for broker in (1, 2, 3):
            assert down_ms(b, broker) >= down_ms(a, broker)
    assert any(down_ms(b, k) > down_ms(a, k) for k in (1, 2, 3))


def down_ms(plan, broker, end_ms=1_800_000):
    """Milliseconds a broker spends down under ``plan``'s crash/restart of it."""
    total, since = 0, None
    for p in sorted(p for p in plan if p.broker == broker and p.kind in ("crash", "restart")):
        if p.kind == "crash" and since is None:
            since = p.at_ms
        elif p.kind == "restart" and since is not None:
            total, since = total + p.at_ms - since, None
    return total + (end_ms - since if since is not None else 0)


# ---- a pure function of the seed -------------------------------------------------------------------
RACK_PLANNER = {"rack_mtbf_hours": 0.5, "rack_power_failure_fraction": 0.3,
                "rack_power_losses_per_year": 8760 * 3,
                "rack_repair_time": {"distribution": "lognormal", "median_s": 30, "sigma": 0.5},
                "broker_mtbf_hours": 1.0}


def test_rack_schedule_is_a_pure_function_of_the_seed():
    def plan(seed):
        return plan_all_random(RACK_PLANNER, sorted(SIX), SIX, 3_600_000,
                               np.random.default_rng(seed))
    assert plan(11) == plan(11) != plan(12)
    assert any(p.kind == "crash" and p.mode == "power" for p in plan(11))

    # the same through whole runs: the scenario's seed alone fixes the faults
    def timeline(seed):
        s = sc.from_dict({**ZONES_DOC, "duration_s": 30, "fault_rates": {
            "rack_power_losses_per_year": 8760 * 240.0,
            "rack_repair_time": {"distribution": "exponential", "mean_s": 5}}}, {"seed": seed})
        return [(r["at_s"], r["fault"]) for r in run_scenario(s)[0]["fault_recovery"]]
    assert timeline(3) == timeline(3) != timeline(4)
    assert timeline(3)


def test_rack_mtbf_is_the_inverse_of_the_hourly_outage_rate():
    """Same generator, same draws: an MTBF of m hours gives the outages (times and modes) that
    rack_outages_per_hour = 1/m gives, now as each broker's crash and restart."""
    for seed in range(4):
        by_rate = plan_rack_faults({"rack_outages_per_hour": 4.0, "rack_power_failure_fraction": 0.5},
                                   SIX, 3_600_000, np.random.default_rng(seed))
        outages = plan_rack_outages({"rack_mtbf_hours": 0.25, "rack_power_failure_fraction": 0.5},
                                    SIX, 3_600_000, np.random.default_rng(seed))
        windows = {}
        starts = {}
        for p in sorted(by_rate):
            if p.kind == "crash":
                starts[p.rack] = (p.at_ms, p.mode)
            else:
                at, mode = starts.pop(p.rack)
                windows.setdefault(p.rack, []).append((at, p.at_ms, mode))
        for rack, (at, mode) in starts.items():  # still down at the end
            windows.setdefault(rack, []).append((at, None, mode))
        got = {rack: [(int(s), int(e) if e < 3_600_000 else None, m) for s, e, m in spans]
               for rack, spans in outages.items()}
        assert got == windows and sum(map(len, got.values())) >= 4


# ---- worked by hand ----------------------------------------------------------------------------------
def test_brokers_are_down_over_their_own_windows_and_their_racks_outages():
    plan = [PlannedFault(1000, 0, "crash", broker=1, mode="process", source="random"),
            PlannedFault(5000, 1, "restart", broker=1, source="random"),
            PlannedFault(6000, 2, "crash", broker=2, mode="power", source="random",
                         storage=(("torn_write", "subset"),)),
            PlannedFault(7000, 3, "restart", broker=2, source="random"),
            PlannedFault(2000, 4, "isolate", broker=3, source="random"),
            PlannedFault(2500, 5, "crash", broker=3, mode="process", source="random"),
            PlannedFault(3500, 6, "restart", broker=3, source="random")]
    racks = {1: "a", 2: "b", 3: "c", 4: "a"}
    outages = {"a": [(3000.0, 4000.0, "power"), (8000.0, 12000.0, "process")],
               "b": [(6500.0, 9000.0, "power")]}
    out = sorted(with_rack_outages(plan, outages, racks, 10_000))
    got = [(p.at_ms, p.kind, p.broker, p.mode if p.kind == "crash" else "", p.storage)
           for p in out]
    assert got == [
        (1000, "crash", 1, "power", ()),      # down already: the rack's power loss takes its cache
        (2000, "isolate", 3, "", ()),         # rack c had no outage: broker 3 untouched
        (2500, "crash", 3, "process", ()),
        (3000, "crash", 4, "power", ()),
        (3500, "restart", 3, "", ()),
        (4000, "restart", 4, "", ()),
        (5000, "restart", 1, "", ()),         # its own repair ends after the rack's power is back
        (6000, "crash", 2, "power", (("torn_write", "subset"),)),  # its own power failure first
        (8000, "crash", 1, "process", ()), (8000, "crash", 4, "process", ()),  # back after the end
        (9000, "restart", 2, "", ()),         # the rack's power returns after its own repair
    ]


# A rack's power fails at rate λ; with a fixed repair time R its brokers are back before the run
# ends at T when the first loss starts before T − R, so P(rack a's brokers lose power and come
# back within the run) = 1 − exp(−λ(T − R)), racks independent. λ makes that 1/2.
T_S, R_S = 600.0, 10.0
LAMBDA = math.log(2) / ((T_S - R_S) / SECONDS_PER_YEAR)


def times(plan, kind, broker):
    return sorted(p.at_ms for p in plan if p.kind == kind and p.broker == broker)


def test_rack_power_losses_have_the_hand_computed_probability():
    rates = {"rack_power_losses_per_year": LAMBDA,
             "rack_repair_time": {"distribution": "fixed", "value_s": R_S}}
    n, hits, both = 2000, 0, 0
    for seed in range(n):
        plan = plan_all_random(rates, sorted(SIX), SIX, int(T_S * 1000),
                               np.random.default_rng(seed))
        assert all(p.mode == "power" for p in plan if p.kind == "crash")
        back = {}
        for rack, (x, y) in (("a", (1, 4)), ("b", (2, 5))):
            # both brokers of a rack go and return together, R after the loss
            assert times(plan, "crash", x) == times(plan, "crash", y)
            assert times(plan, "restart", x) == times(plan, "restart", y)
            assert all(r - c in (R_S * 1000 - 1, R_S * 1000, R_S * 1000 + 1)
                       for c, r in zip(times(plan, "crash", x), times(plan, "restart", x),
                                       strict=False))
            back[rack] = bool(times(plan, "restart", x))
        hits += back["a"]
        both += back["a"] and back["b"]
    # 99.9 % Wilson intervals (z = 3.29): two checks on one fixed set of seeds
    lo, hi = wilson(hits, n, z=3.2905)
    assert lo <= 0.5 <= hi
    lo, hi = wilson(both, n, z=3.2905)   # independent racks: 1/4
    assert lo <= 0.25 <= hi


def test_a_rack_power_loss_keeps_only_flushed_bytes_on_every_broker_of_the_rack():
    """Three zones, RF 3: zone a's power fails at once on both its brokers (power failures
    counted for brokers 1 and 4 only); the other zones keep every acknowledged record."""
    s = sc.from_dict({**ZONES_DOC, "fault_rates": {
        "rack_power_losses_per_year": 8760 * 240.0,
        "rack_repair_time": {"distribution": "fixed", "value_s": 4}}}, {"seed": 5})
    summary = run_scenario(s)[0]
    crashes = [(r["at_s"], tuple(r["brokers"])) for r in summary["fault_recovery"]
               if r["kind"] == "crash"]
    assert crashes and all("(power)" in r["fault"] for r in summary["fault_recovery"]
                           if r["kind"] == "crash")
    by_time = {}
    for at, brokers in crashes:
        by_time.setdefault(at, set()).update(brokers)
    assert all(v in ({1, 4}, {2, 5}, {3, 6}) for v in by_time.values())
    assert summary["lost_acked_records"] == 0 or \
        summary["lost_acked_records_by_cause"]["power_failure"] == summary["lost_acked_records"]


ZONES_DOC = {"name": "zones", "duration_s": 30, "storage": "memory", "sample_interval_s": 5,
             "cluster": {"brokers": 6, "racks": ["a", "b", "c", "a", "b", "c"]},
             "configs": {"min.insync.replicas": 2, "broker.session.timeout.ms": 2000},
             "topics": [{"name": "t", "partitions": 3, "replication_factor": 3}],
             "workload": {"batches_per_second": 2.0, "records_per_batch": 5, "acks": "all"}}


# ---- bad values ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("rates, needle", [
    ({"rack_mtbf_hours": 0}, r"rack_mtbf_hours must be positive, got 0"),
    ({"rack_mtbf_hours": -3}, r"rack_mtbf_hours must not be negative, got -3"),
    ({"rack_mtbf_hours": "nan"}, r"rack_mtbf_hours must be positive, got 'nan'"),
    ({"rack_mtbf_hours": "often"}, r"rack_mtbf_hours: not a number: 'often'"),
    ({"rack_mtbf_hours": 5, "rack_outages_per_hour": 1}, "not both"),
    ({"rack_power_losses_per_year": -1}, "rack_power_losses_per_year must not be negative, got -1"),
    ({"rack_power_losses_per_year": "inf"}, r"rack_power_losses_per_year must be a finite"),
    ({"power_losses_per_year": "inf"}, r"power_losses_per_year must be a finite"),
    ({"rack_repair_time": {"distribution": "gamma", "mean_s": 3}},
     r"rack_repair_time.distribution .* 'gamma'"),
    ({"rack_repair_time": {"distribution": "fixed", "value_s": 0}},
     r"rack_repair_time.value_s must be a positive number, got 0"),
    ({"rack_repair_time": 3600}, r"rack_repair_time must be a table .* got 3600"),
    ({"rack_mtbs_hours": 5}, "rack_mtbs_hours"),
])
def test_bad_rack_rates_are_refused_naming_the_value(rates, needle):
    with pytest.raises(InvalidConfigurationError, match=needle):
        sc.from_dict({**ZONES_DOC, "fault_rates": rates})


@pytest.mark.parametrize("key, value", [("rack_mtbf_hours", 10),
                                        ("rack_power_losses_per_year", 2)])
def test_rack_rates_need_racks(key, value):
    doc = {**ZONES_DOC, "cluster": {"brokers": 6}, "fault_rates": {key: value}}
    with pytest.raises(InvalidConfigurationError, match=f"{key} needs racks"):
        sc.from_dict(doc)


def test_rack_rates_defaults_and_accepted_values():
    r = validate_rates({"rack_mtbf_hours": 8760, "rack_power_losses_per_year": 0.5,
                        "rack_repair_time": {"distribution": "exponential", "mean_s": 3600}})
    assert r["rack_mtbf_hours"] == 8760.0 and r["rack_power_losses_per_year"] == 0.5
    assert r["rack_repair_time"] == {"distribution": "exponential", "mean_s": 3600.0}
    assert "rack_mtbf_hours" not in validate_rates({})
    # no rack planner key: nothing drawn, the generator untouched
    rng = np.random.default_rng(1)
    assert plan_rack_outages({"rack_outages_per_hour": 3}, SIX, 3_600_000, rng) == {}
    assert rng.random() == np.random.default_rng(1).random()
