"""The report in a real browser: headless Chromium renders a simulated run's report.html and a
probe script (added to a copy, the report itself has none) measures what a person sees — the
verdict, the charts at a readable size, labelled axes inside their charts, tick labels that do
not collide, no NaN or 1e-09 anywhere in the text, and nothing fetched from the network.

Skipped, saying why, when no Chromium is installed (CI installs it: apt-get install chromium).
"""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from replica_core.sim import scenario as sc
from replica_core.sim.run import run_scenario, write_outputs

BROWSER = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser",
                                                       "google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="no headless Chromium on PATH (apt-get install chromium)")

PROBE = """
<script>
window.addEventListener('load', () => {
  const box = el => { const r = el.getBoundingClientRect();
                      return [r.left, r.top, r.right, r.bottom]; };
  const figures = [...document.querySelectorAll('figure')].map(fig => {
    const svg = fig.querySelector('svg');
    const ticks = [...svg.querySelectorAll('text.xt')].map(t => [t.textContent, box(t)]);
    return {caption: fig.querySelector('figcaption').textContent, svg: box(svg),
            labels: [...svg.querySelectorAll('text.label')].map(t => [t.textContent, box(t)]),
            ticks: ticks};
  });
  const verdict = document.querySelector('.verdict');
  const out = {verdict: verdict.innerText, verdictBox: box(verdict),
               verdictColour: getComputedStyle(verdict).backgroundColor,
               text: document.body.innerText, figures: figures,
               resources: performance.getEntriesByType('resource').map(e => e.name)};
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    overrides = {"topics.0.partitions": 24, "duration_s": 12, "faults.0.at_s": 3,
                 "faults.1.at_s": 8, "broker.session.timeout.ms": 2000,
                 "workload.batches_per_second": 2.0}
    summary, series, info = run_scenario(sc.load(sc.default_scenario_path(), overrides))
    out = tmp_path_factory.mktemp("report")
    return summary, write_outputs(out, summary, series, info)["report"]


def render(page: Path, tmp: Path) -> dict:
    probe = tmp / "probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    done = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,900",
         "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    start = dom.index('<pre id="probe">') + len('<pre id="probe">')
    import html

    return json.loads(html.unescape(dom[start:dom.index("</pre>", start)]))


def test_a_person_sees_the_verdict_and_readable_charts(report, tmp_path):
    summary, page = report
    seen = render(page, tmp_path)
    assert seen["verdict"].strip() == summary["verdict"]["line"]
    assert seen["verdict"].startswith("PASS: 5/5 invariants held")
    v_left, v_top, v_right, v_bottom = seen["verdictBox"]
    assert v_bottom - v_top > 20 and v_right - v_left > 400 and v_top < 400  # near the top
    assert seen["verdictColour"] != "rgba(0, 0, 0, 0)"  # coloured, not plain text
    assert "NaN" not in seen["text"] and "1e-09" not in seen["text"]
    assert seen["resources"] == []  # nothing fetched: the page works offline
    captions = [f["caption"] for f in seen["figures"]]
    assert len(captions) == 6 and "Produce latency (acknowledged requests, CDF)" in captions
    for fig in seen["figures"]:
        left, top, right, bottom = fig["svg"]
        assert right - left >= 600 and bottom - top >= 120, fig["caption"]
        for text, (x0, y0, x1, y1) in fig["labels"]:
            assert x1 > x0 and y1 > y0, (fig["caption"], text)
            assert left - 1 <= x0 and x1 <= right + 1, text
            assert top - 1 <= y0 and y1 <= bottom + 1, text
        names = [text for text, _ in fig["labels"]]
        assert any("simulated time (s)" in n or "produce latency" in n for n in names)
        # the time (or latency) axis has several tick labels, side by side, none overlapping
        bottom_ticks = sorted((bx for _, bx in fig["ticks"]), key=lambda bx: bx[0])
        assert len(bottom_ticks) >= 3, fig["caption"]
        for a, c in zip(bottom_ticks, bottom_ticks[1:], strict=False):
            assert a[2] <= c[0] + 0.5, (fig["caption"], a, c)
    assert "crash broker 3 (process)" in seen["text"]
    assert "unavailable to producers" in seen["text"]


def test_screenshot_is_not_blank(report, tmp_path):
    _, page = report
    shot = tmp_path / "report.png"
    done = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,2400",
         "--hide-scrollbars", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 30_000  # text, tables and charts; a blank page compresses to ~5 KB


def test_a_horizon_report_shows_its_episodes_in_place_of_the_time_charts(tmp_path):
    # a day of a small cluster with crashes drawn from rates: a few fault episodes
    from test_sim_episodes import SMALL

    summary, series, info = run_scenario(sc.from_dict(SMALL))
    page = write_outputs(tmp_path / "out", summary, series, info)["report"]
    seen = render(page, tmp_path)
    h = summary["horizon"]
    assert h["episodes"] >= 2
    assert seen["verdict"].strip() == summary["verdict"]["line"]
    text = seen["text"]
    assert f"1 day in {h['episodes']} fault episodes" in text
    assert "Fault episodes" in text and "ended healthy" in text
    assert text.count("\tyes") + text.count("yes\n") >= h["episodes"]
    # over a horizon the time charts would be one line with long gaps: only the latency CDF
    assert [f["caption"] for f in seen["figures"]] == [
        "Produce latency (acknowledged requests, CDF)"]
    assert "NaN" not in text and "1e-09" not in text
    assert seen["resources"] == []
