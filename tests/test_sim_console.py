"""What a user sees of each feature scenario: the console summary and the report name the
figures the scenario is about, both ways (feature on and off)."""
import json
import re

import pytest

from replica_core import cli

CASES = [
    # (example, overrides, console lines expected: regular expressions)
    ("last-replica-standing", [],
     [r"eligible leader replicas +off \(eligible\.leader\.replicas\.enable=false\)",
      r"  by cause +power failure [1-9]", r"verdict +FAIL: .*explained"]),
    # the unclean restart of broker 1 removes it from the ELR; broker 2 is elected from it
    ("last-replica-standing", ["eligible.leader.replicas.enable=true"],
     [r"eligible leader replicas +on \(KIP-966\): 1 leader elected from the ELR, "
      r"1 unclean shutdown removed", r"lost acked records +0\n", r"verdict +PASS"]),
    # the one fetch broker 3 sent before its disk was replaced is recognised as stale
    ("disk-replacement", [],
     [r"broker epochs +refused Fetch stale replica epoch 1 ", r"lost acked records +0\n"]),
    ("disk-replacement", ["isr.broker.epochs=false"],
     [r"broker epochs +KIP-903 off \(isr\.broker\.epochs=false\)",
      r"  by cause +stale replica rejoined [1-9]"]),
    ("kip380", [],
     [r"broker epochs +refused LeaderAndIsr BROKER_NOT_AVAILABLE [1-9][\d,]* "
      r"\(not registered yet, KIP-380\)", r"lost acked records +0\n"]),
    ("kip380", ["cluster.detect_bounces=false"],
     [r"broker epochs +KIP-380 off \(cluster\.detect_bounces=false\)",
      r"  by cause +power failure [1-9]"]),
    ("idempotence", [],
     [r"idempotent producer +on \(enable\.idempotence=true",
      r"a consumer reads 0 records twice"]),
    ("idempotence", ["enable.idempotence=false"],
     [r"idempotent producer +off \(enable\.idempotence=false",
      r"a consumer reads [1-9][\d,]* records twice"]),
    ("power-outage", [],
     [r"storage faults +torn files [1-9]", r"log recovery +.*[1-9][\d,]* B truncated",
      r"log flush \(fsync\) +flush\.messages never, flush\.ms never; Kafka's default",
      r"  by cause +power failure [1-9]"]),
    ("power-outage", ["log.flush.interval.messages=1"],
     [r"log flush \(fsync\) +flush\.messages 1, flush\.ms never\n", r"lost acked records +0\n"]),
    ("retention-reset", [],
     [r"retention +[1-9][\d,]* segments deleted; [1-9]\d* follower fetch(es)? answered "
      r"OFFSET_OUT_OF_RANGE"]),
    # three zones of two brokers; the striped placer puts one replica in each zone
    ("az-outage", ["topics.0.partitions=6", "duration_s=25"],
     [r"racks \(brokers\) +a: 1, 4; b: 2, 5; c: 3, 6; replicas span 3 racks in 6/6 "
      r"partitions"]),
]


@pytest.mark.parametrize("example, overrides, expected", CASES,
                         ids=[f"{c[0]}{'+' + ','.join(c[1]) if c[1] else ''}" for c in CASES])
def test_console_and_report_show_what_the_scenario_is_about(example, overrides, expected,
                                                            tmp_path, capsys):
    argv = ["simulate", example, "-q", "--out", str(tmp_path)]
    for o in overrides:
        argv += ["--set", o]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    for pattern in expected:
        assert re.search(pattern, out), (pattern, out)
    # a cause that was nonzero but small never reads "0.0"; no exponent, no NaN
    assert not re.search(r"(?<![\d.])0\.0(?![\d])", out), out
    assert "nan" not in out.lower() and not re.search(r"\de-\d", out)
    page = (tmp_path / "report.html").read_text()
    assert "Producer, flush, fencing, retention, racks</h2>" in page
    label = re.search(r"\n(idempotent producer|eligible leader replicas|broker epochs|"
                      r"retention|racks \(brokers\)|log flush \(fsync\)) ", out)
    assert label and f"<td>{label.group(1)}</td>" in page


def test_a_run_without_those_features_keeps_its_summary_keys(tmp_path, capsys):
    assert cli.main(["simulate", "idempotence", "-q", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    for key in ("elr", "requests_refused", "retention", "rack_placement"):
        assert key not in summary, key
    out = capsys.readouterr().out
    assert "broker epochs" not in out and "racks" not in out and "log flush" not in out


def test_overlapping_faults_get_their_own_rows_on_the_timeline(tmp_path, capsys):
    # last-replica-standing: broker 3 down from 10 s to the end, broker 2 cut off 20-65 s,
    # broker 1 without power 35-50 s: three overlapping periods, three rows
    assert cli.main(["simulate", "last-replica-standing", "-q", "--out", str(tmp_path)]) == 0
    page = (tmp_path / "report.html").read_text()
    timeline = page[page.index("<figcaption>Timeline"):]
    timeline = timeline[:timeline.index("</figure>")]
    bars = re.findall(r'<rect x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="18"', timeline)
    assert len(bars) == 3 and len(set(bars)) == 3
