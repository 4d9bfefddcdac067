#!/usr/bin/env python3
"""nnlab's HTML reports as a browser draws them, in headless Chromium (tests/report_browser.py).

    report_browser_test.py --cli build/nnlab          make a run, multi-run, compare and sweep
                                                      report from tiny real runs and check them
    report_browser_test.py --check PAGE... [--screenshot-dir DIR]
                                                      check the given pages (and save PNGs)

A page passes when it loads with no script error, every chart has drawn content (line points,
bars), every chart label lies inside its picture without overlapping another, legends fit
their box, the page is never wider than the window (at 1280 and at 640 pixels), no table needs
scrolling at 1280 pixels, and hovering a chart shows its read-out. Before that, a deliberately
broken page must fail each of these checks, so the check itself is shown able to fail.

Exits 0 when all pass, 1 when one fails, 77 (CTest's SKIP_RETURN_CODE) without Chromium or
without the Fashion-MNIST data.
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_browser import Browser, find_chromium  # noqa: E402

SKIP = 77
WIDE, NARROW = 1280, 640

# Runs in the page; returns a list of problems (strings), empty when the page is right.
LAYOUT_CHECK = r"""
(function (wide) {
  var problems = [], doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth + 1)
    problems.push('the page is wider than the window: ' + doc.scrollWidth + ' > ' + window.innerWidth + ' px');
  if (wide) document.querySelectorAll('.table-wrap').forEach(function (w, k) {
    if (w.scrollWidth > w.clientWidth + 1)
      problems.push('table ' + (k + 1) + ' needs scrolling: ' + w.scrollWidth + ' > ' + w.clientWidth + ' px');
  });
  var figures = document.querySelectorAll('figure.chart');
  figures.forEach(function (fig, k) {
    var caption = fig.querySelector('figcaption'), svg = fig.querySelector('svg');
    var name = 'chart ' + (k + 1) + ' "' + (caption ? caption.textContent : '') + '"';
    if (!svg) { problems.push(name + ': no picture'); return; }
    var box = svg.getBoundingClientRect();
    if (box.width < 200 || box.height < 60) problems.push(name + ': drawn only ' + box.width + ' x ' + box.height + ' px');
    var points = 0, bars = 0, lines = svg.querySelectorAll('polyline.series');
    lines.forEach(function (p) { points += p.points.numberOfItems; });
    svg.querySelectorAll('rect').forEach(function (r) { var b = r.getBBox(); if (b.width > 0.5 && b.height > 0.5) ++bars; });
    if (points === 0 && bars === 0) problems.push(name + ': nothing drawn (no line points, no bars)');
    var texts = Array.prototype.map.call(svg.querySelectorAll('text'), function (t) {
      return {text: t.textContent, r: t.getBoundingClientRect()};
    });
    texts.forEach(function (t) {
      if (t.r.left < box.left - 0.5 || t.r.right > box.right + 0.5 || t.r.top < box.top - 0.5 || t.r.bottom > box.bottom + 0.5)
        problems.push(name + ': label "' + t.text + '" is cut off at the edge of the picture');
    });
    for (var i = 0; i < texts.length; ++i) for (var j = i + 1; j < texts.length; ++j) {
      var a = texts[i].r, b = texts[j].r;
      var w = Math.min(a.right, b.right) - Math.max(a.left, b.left), h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 1 && h > 1) problems.push(name + ': labels "' + texts[i].text + '" and "' + texts[j].text + '" overlap');
    }
    var legend = fig.querySelectorAll('.legend span'), figBox = fig.getBoundingClientRect();
    if (lines.length > 0 && legend.length !== lines.length)
      problems.push(name + ': ' + lines.length + ' lines but ' + legend.length + ' legend entries');
    legend.forEach(function (s) {
      var r = s.getBoundingClientRect();
      if (r.width < 1 || r.right > figBox.right + 0.5 || s.scrollWidth > s.clientWidth + 1)
        problems.push(name + ': legend entry "' + s.textContent + '" does not fit');
    });
  });
  return problems;
})
"""

# The first line chart's centre, in window coordinates, scrolled into view (null: no line chart).
HOVER_TARGET = r"""
(function () {
  var svg = document.querySelector('figure.chart polyline.series');
  if (!svg) return null;
  svg = svg.ownerSVGElement;
  svg.scrollIntoView({block: 'center'});
  var r = svg.getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2];
})()
"""
HOVER_RESULT = r"""
(function () {
  var fig = document.querySelector('figure.chart polyline.series').ownerSVGElement.closest('figure');
  var tip = fig.querySelector('.tip');
  return tip && getComputedStyle(tip).display !== 'none' ? tip.textContent : '';
})()
"""

# Every kind of fault the check must catch, on one page.
BROKEN_PAGE = """<!DOCTYPE html><html><head><meta charset='utf-8'><style>
.table-wrap{overflow-x:auto}td{white-space:nowrap}</style></head><body>
<figure class='chart'><figcaption>empty</figcaption><div class='plot'><svg viewBox='0 0 600 300' width='600'>
<polyline class='series' points='' data-values=''/><text x='595' y='150'>cut off label</text>
<text x='100' y='100'>overlapping</text><text x='105' y='102'>overlapping too</text></svg></div>
<div class='legend'></div></figure>
<div class='table-wrap'><table><tr><td>%s</td></tr></table></div>
<script>window.addEventListener('load', function () { undefined_function(); });</script>
</body></html>""" % ("a very wide cell " * 200)
BROKEN_MUST_FIND = ["uncaught exception", "nothing drawn", "is cut off", "overlap", "needs scrolling",
                    "lines but 0 legend entries", "hovering"]


def check_page(browser, path, screenshot=None):
    """Everything wrong with one page, as messages."""
    problems = []
    try:
        with open(path, encoding="utf-8") as f:
            html = f.read()
    except (OSError, UnicodeDecodeError) as e:
        return ["cannot be read: %s" % e]
    for external in ("http://", "https://", "<link", "@import", " src="):
        if external in html:
            problems.append("refers to something outside the page (%r): it must be self-contained" % external)
    for width in (WIDE, NARROW):
        problems += ["%d px: %s" % (width, e) for e in browser.open(path, width, 900)]
        layout = browser.evaluate(LAYOUT_CHECK + "(%s)" % str(width == WIDE).lower())
        problems += ["%d px: %s" % (width, p) for p in layout]
    if browser.evaluate("document.querySelectorAll('figure.chart').length") == 0:
        problems.append("no charts at all")
    browser.open(path, WIDE, 900)
    target = browser.evaluate(HOVER_TARGET)
    if target is not None:
        browser.move_mouse(*target)
        if not browser.evaluate(HOVER_RESULT).strip():
            problems.append("hovering the first line chart shows no read-out")
    problems += ["after hovering: %s" % e for e in browser.errors()]
    if screenshot:
        browser.open(path, WIDE, 900)
        browser.screenshot(screenshot)
    return problems


def check_pages(browser, pages, screenshot_dir=None):
    failed = False
    for page in pages:
        shot = None
        if screenshot_dir:
            shot = os.path.join(screenshot_dir, os.path.splitext(os.path.basename(page))[0] + ".png")
        problems = check_page(browser, page, shot)
        print("%s: %s" % (page, "ok" if not problems else "FAILED"))
        for p in problems:
            print("  " + p)
        failed = failed or bool(problems)
    return not failed


def self_test(browser, work):
    """The broken page must fail every check, or the checks prove nothing."""
    path = os.path.join(work, "broken.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(BROKEN_PAGE)
    problems = " | ".join(check_page(browser, path))
    missed = [m for m in BROKEN_MUST_FIND if m not in problems]
    if missed:
        print("the check let a broken page through: it did not find %s (found: %s)" % (missed, problems))
        return False
    print("broken page: every fault found (%d problems)" % problems.count("|"))
    return True


def run(cli, args):
    print("$ nnlab " + " ".join(args), flush=True)
    result = subprocess.run([cli] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        raise RuntimeError("nnlab %s failed (exit %d):\n%s" % (" ".join(args), result.returncode, result.stdout))


def make_reports(cli, data_dir, work):
    """One page of each kind, from tiny real runs (seconds each)."""
    w = lambda name: os.path.join(work, name)  # noqa: E731
    train = ["train", "--model", "mlp", "--data", "fashion-mnist", "--data-dir", data_dir, "--threads", "1",
             "--epochs", "1", "--max-steps", "30", "--batch", "32", "--metrics-every", "3"]
    run(cli, train + ["--metrics", w("sgd.jsonl"), "--report", w("report-run.html")])
    run(cli, train + ["--metrics", w("adam.jsonl"), "--optimizer", "adam", "--lr", "0.001"])
    run(cli, ["report", w("sgd.jsonl"), w("adam.jsonl"), "-o", w("report-runs.html")])
    run(cli, ["compare", "--model", "mlp", "--data", "fashion-mnist", "--data-dir", data_dir, "--devices",
              "cpu:threads=1,cpu:threads=2", "--max-steps", "6", "--batch", "16", "--test-images", "200",
              "--report", w("report-compare.html")])
    run(cli, ["sweep", "--model", "mlp", "--devices", "cpu:threads=1,cpu:threads=2", "--batches", "2,16,64",
              "--steps", "1", "--warmup", "1", "--report", w("report-sweep.html")])
    return [w(n) for n in ("report-run.html", "report-runs.html", "report-compare.html", "report-sweep.html")]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cli", help="the nnlab program: make every kind of report and check them")
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--check", nargs="+", metavar="PAGE", help="check these pages instead")
    parser.add_argument("--screenshot-dir", help="with --check: save a PNG of each page here")
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        print("SKIPPED: Chromium is not installed (Debian: apt-get install chromium; scripts/setup.sh does)")
        return SKIP
    if args.cli and not os.path.exists(os.path.join(args.data_dir, "train-images-idx3-ubyte.gz")):
        print("SKIPPED: no Fashion-MNIST in %s (Debian: apt-get install dataset-fashion-mnist)" % args.data_dir)
        return SKIP
    with tempfile.TemporaryDirectory(prefix="nnlab-report-test-") as work:
        browser = Browser(chromium)
        try:
            if args.check:
                return 0 if check_pages(browser, args.check, args.screenshot_dir) else 1
            if not self_test(browser, work):
                return 1
            pages = make_reports(args.cli, args.data_dir, work)
            return 0 if check_pages(browser, pages) else 1
        finally:
            browser.close()


if __name__ == "__main__":
    sys.exit(main())
