"""Every page a user and an admin reach from the header, in headless Chromium at a desktop's and a
phone's width (and the user's in the dark colour scheme too), checked with axe-core (WCAG 2.0 and
2.1, A and AA): no serious or critical violation. At a phone's width nothing overflows the viewport
(a table or code block may scroll inside itself); at 1024 px the header's navigation is one line.

axe-core comes from npm, locked in tests/browser/axe/ (scripts/install.sh installs it with npm ci);
it is injected into each page as a script tag, which the portal's Content-Security-Policy
(script-src 'self') would refuse, so the contexts bypass the policy. The header's links are read from
the DOM, visible or not (they may sit in closed menus). The report (page, width, user, violations
by impact and rule) is written as JSON to $GPUPORTAL_TEST_ARTIFACTS or the test's tmp dir, and a
summary table is printed."""

import contextlib
import json
import os
import re
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from portal.accounts.models import User
from portal.efficiency.models import Efficiency
from portal.sessions.models import Session
from tests.conftest import DEMO_PASSWORDS, ROOT
from tests.factories import AppFactory, JobFactory

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

AXE = ROOT / "tests" / "browser" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
FAILING = ("critical", "serious")
IMPACTS = ("critical", "serious", "moderate", "minor")
WIDTHS = {1280: 800, 390: 844}
# Each user at both widths in the light scheme; the dark one (prefers-color-scheme) at a desktop's
# width, for the user: its colours are checked, the layout is the same.
VIEWS = [(1280, "light"), (390, "light"), (1280, "dark")]
DARK_FOR = ("alice",)
NARROW = 390
HEADER_WIDTH = 1024
HEADER_MAX_HEIGHT = 70  # px: one line of navigation
USERS = ("alice", "ada")  # a user and an admin (ada is staff in the directory)
# Header links that are actions or lead away from the portal's pages.
SKIP_PATHS = re.compile(r"^/(accounts/logout|oauth|hub|user|api/v1|metrics)\b")
# A session's own page, where the session list links to one.
SESSION_PAGE = re.compile(r"^/(servers|sessions)/[\w-]+/$")
NOT_A_SESSION_PAGE = re.compile(r"^/(servers|sessions)/(cards|new|timing\.csv)/$")

# Elements that reach past the viewport's right edge at 390 px, outermost only; an element inside a
# table (or its .table-scroll wrapper) or a code block that scrolls is allowed, so is one not rendered
# or clipped away whole.
OVERFLOW_JS = """() => {
  const width = document.documentElement.clientWidth;
  const scroller = document.scrollingElement;
  const describe = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
      + [...e.classList].slice(0, 3).map(c => '.' + c).join('');
  const scrolls = e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX);
  // Inside a table or code block that scrolls, or wholly outside a box that clips it (a closed
  // drawer's panel): not past the viewport.
  const allowed = e => {
    const r = e.getBoundingClientRect();
    for (let a = e.parentElement; a && a !== document.documentElement; a = a.parentElement) {
      if (a.matches('.table-scroll, table, pre, code') && scrolls(a)) return true;
      if (getComputedStyle(a).overflowX !== 'visible') {
        const box = a.getBoundingClientRect();
        if (r.left >= box.right || r.right <= box.left) return true;
        if (r.top >= box.bottom || r.bottom <= box.top) return true;
      }
    }
    return false;
  };
  const over = e => {
    if (!e.checkVisibility({visibilityProperty: true})) return false;
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.right > width + 1 && !allowed(e);
  };
  let found = [...document.body.querySelectorAll('*')].filter(e => over(e)
      && !(e.parentElement && e.parentElement !== document.body && over(e.parentElement)));
  if (!found.length && scroller.scrollWidth > width + 1) {
    // What widens the page from inside a scrolling box: something positioned against an outer one.
    found = [...document.body.querySelectorAll('*')].filter(e => e.getBoundingClientRect().right > width + 1
        && ['absolute', 'fixed'].includes(getComputedStyle(e).position));
  }
  return {
    scrollWidth: scroller.scrollWidth, width,
    elements: found.slice(0, 8)
        .map(e => `${describe(e)} (right ${Math.round(e.getBoundingClientRect().right)} px)`),
  };
}"""

# The header's top-level navigation items (the nav's children, through one wrapping list).
HEADER_JS = """() => {
  const header = document.querySelector('header');
  const nav = header && header.querySelector('nav');
  if (!nav) return {error: 'no <nav> in the <header>'};
  let level = nav;
  while (level.children.length === 1 && ['UL', 'OL', 'DIV'].includes(level.children[0].tagName)) {
    level = level.children[0];
  }
  const items = [...level.children].filter(e => e.checkVisibility({visibilityProperty: true}))
      .map(e => ({text: e.innerText.trim().split('\\n')[0], top: Math.round(e.getBoundingClientRect().top),
                  height: Math.round(e.getBoundingClientRect().height)}));
  return {height: Math.round(header.getBoundingClientRect().height), items};
}"""


def _artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ["GPUPORTAL_TEST_ARTIFACTS"]) if os.environ.get("GPUPORTAL_TEST_ARTIFACTS") \
        else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _login(context, base: str, username: str) -> None:
    page = context.new_page()
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", DEMO_PASSWORDS[username])
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    page.close()


def _settle(page) -> None:
    """Loaded, and the page's own requests (charts, cards) answered, within a moment."""
    # A page that polls may never be idle: what it shows by then is what is checked.
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_load_state("networkidle", timeout=3000)


def _header_paths(page) -> list[str]:
    hrefs = page.eval_on_selector_all("header a[href]", "links => links.map(a => a.href)")
    here, paths = urlsplit(page.url).netloc, []
    for href in hrefs:
        parts = urlsplit(href)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        if parts.netloc == here and not SKIP_PATHS.match(parts.path) and path not in paths:
            paths.append(path)
    return paths


def _first_link(page, pattern: re.Pattern, exclude: re.Pattern | None = None) -> str | None:
    for href in page.eval_on_selector_all("main a[href]", "links => links.map(a => a.getAttribute('href'))"):
        path = urlsplit(href).path
        if pattern.match(path) and not (exclude and exclude.match(path)):
            return path
    return None


def _seed(username: str) -> dict[str, str]:
    """Rows that give the list pages content and the detail pages something to show (no Slurm job
    behind them); returns the detail pages' paths."""
    user = User.objects.get(username=username)
    done = JobFactory(user=user, name=f"{username}-a11y-done", state="COMPLETED",
                      submitted_at=timezone.now() - timedelta(hours=2),
                      started_at=timezone.now() - timedelta(hours=1), ended_at=timezone.now())
    JobFactory(user=user, name=f"{username}-a11y-failed", state="FAILED", exit_code=1,
               submitted_at=timezone.now() - timedelta(hours=3), ended_at=timezone.now() - timedelta(hours=2))
    # /usage/efficiency/ with a row (and in the admin's list of the week's most wasteful users).
    Efficiency.objects.create(user=user, job=done, partition="gpu", ended_at=done.ended_at,
                              recorded_at=done.ended_at, cpus=8, mem_requested_mb=49152, gpus=1,
                              elapsed_seconds=3600, cpu_seconds=1800, mem_peak_mb=2048, gpu_util_percent=5)
    app = AppFactory(user=user)
    Session.objects.create(user=user, name="a11y", partition="gpu", gpus=1, hours=1,
                                  ended_at=timezone.now(), end_reason=Session.EndReason.STOPPED)
    return {"job": reverse("jobs:detail", args=[done.pk]), "app": reverse("webapps:detail", args=[app.pk])}


def _check_page(page, path: str, width: int, username: str, axe_source: Path, seen: set) -> dict | None:
    page.goto(path, wait_until="load")
    if urlsplit(page.url).path in seen:
        return None
    seen.add(urlsplit(page.url).path)
    _settle(page)
    page.add_script_tag(path=str(axe_source))
    result = page.evaluate("""(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags},
                                                         resultTypes: ['violations']})""", WCAG_TAGS)
    violations = [{"rule": v["id"], "impact": v["impact"], "help": v["help"],
                   "targets": [" ".join(map(str, n["target"])) for n in v["nodes"]]}
                  for v in result["violations"]]
    counts = Counter()
    for violation in violations:
        counts[violation["impact"]] += len(violation["targets"])
    record = {"page": path, "url": urlsplit(page.url).path, "title": page.title(), "width": width,
              "user": username, "counts": {impact: counts[impact] for impact in IMPACTS},
              "violations": violations, "overflow": None}
    if width == NARROW:
        overflow = page.evaluate(OVERFLOW_JS)
        if overflow["scrollWidth"] > overflow["width"] + 1 or overflow["elements"]:
            record["overflow"] = overflow
    return record


def test_every_page_passes_axe_fits_a_phone_and_has_a_one_line_header(
        portal_hub, live_server, browser, tmp_path, capsys):
    assert AXE.is_file(), f"{AXE} is missing: scripts/install.sh installs it (npm ci in tests/browser/axe)"
    started = time.monotonic()
    base = live_server.url
    records, header_problems = [], []
    for username in USERS:
        state = None
        pages: list[str] = []
        for width, scheme in VIEWS:
            if scheme == "dark" and username not in DARK_FOR:
                continue
            context = browser.new_context(base_url=base, bypass_csp=True, storage_state=state,
                                          viewport={"width": width, "height": WIDTHS[width]},
                                          color_scheme=scheme)
            try:
                if state is None:
                    _login(context, base, username)
                    state = context.storage_state()
                page = context.new_page()
                page.set_default_timeout(20000)
                if not pages:
                    detail = _seed(username)
                    page.goto("/")
                    pages = _header_paths(page)
                    assert len(pages) >= 5, f"{username}: the header links to {pages}"
                    extra = (reverse("docs"), reverse("jobs:pick"), reverse("jobs:compose", args=["custom"]),
                             detail["job"], detail["app"])
                    pages += [p for p in extra if p not in pages]
                    sessions = next((p for p in pages if p.startswith(("/servers/", "/sessions/"))), None)
                    if sessions:
                        page.goto(sessions)
                        session_page = _first_link(page, SESSION_PAGE, NOT_A_SESSION_PAGE)
                        if session_page and session_page not in pages:
                            pages.append(session_page)
                seen = set()  # a header link that redirects to a page already checked is checked once
                for path in pages:
                    record = _check_page(page, path, width, username, AXE, seen)
                    if record:
                        records.append({**record, "scheme": scheme})
                if width == max(WIDTHS) and scheme == "light":
                    page.set_viewport_size({"width": HEADER_WIDTH, "height": 800})
                    page.goto("/")
                    header = page.evaluate(HEADER_JS)
                    tops = {item["top"] for item in header.get("items", [])}
                    if header.get("error") or not header["items"]:
                        header_problems.append(f"{username} at {HEADER_WIDTH} px: "
                                               f"{header.get('error', 'no visible navigation item')}")
                    elif max(tops) - min(tops) > 4 or header["height"] > HEADER_MAX_HEIGHT:
                        header_problems.append(
                            f"{username} at {HEADER_WIDTH} px: header {header['height']} px tall (at most "
                            f"{HEADER_MAX_HEIGHT}), its {len(header['items'])} items at tops {sorted(tops)}: "
                            + ", ".join(f"{i['text']!r}@{i['top']}" for i in header["items"]))
            finally:
                context.close()
    elapsed = time.monotonic() - started

    report = _artifacts(tmp_path) / "axe-report.json"
    report.write_text(json.dumps({"tags": WCAG_TAGS, "seconds": round(elapsed, 1), "pages": records},
                                 indent=1))
    with capsys.disabled():
        print(_summary(records, header_problems, elapsed, report))
    problems = _problems(records) + header_problems
    assert not problems, f"{len(problems)} problems (report: {report}):\n" + "\n".join(problems)


def _summary(records: list[dict], header_problems: list[str], elapsed: float, report: Path) -> str:
    lines = [f"\naxe-core on {len(records)} page views in {elapsed:.0f} s; report: {report}",
             f"{'user':6} {'width':>5} {'scheme':6} {'pages':>5} " + " ".join(f"{i:>8}" for i in IMPACTS)]
    for username in USERS:
        for width, scheme in VIEWS:
            rows = [r for r in records if (r["user"], r["width"], r["scheme"]) == (username, width, scheme)]
            if rows:
                lines.append(f"{username:6} {width:>5} {scheme:6} {len(rows):>5} "
                             + " ".join(f"{sum(r['counts'][i] for r in rows):>8}" for i in IMPACTS))
    by_rule = Counter(v["rule"] for r in records for v in r["violations"] if v["impact"] in FAILING)
    lines += [f"  {rule}: on {count} page views" for rule, count in by_rule.most_common()]
    overflowing = sum(1 for r in records if r["overflow"])
    lines.append(f"  overflowing at {NARROW} px: {overflowing} page views; "
                 f"header problems at {HEADER_WIDTH} px: {len(header_problems)}")
    return "\n".join(lines)


def _problems(records: list[dict]) -> list[str]:
    problems = []
    for r in records:
        where = f"{r['page']} at {r['width']} px ({r['scheme']}) as {r['user']}"
        for v in r["violations"]:
            if v["impact"] in FAILING:
                more = f" and {len(v['targets']) - 6} more" if len(v["targets"]) > 6 else ""
                problems.append(f"{where}: {v['impact']} {v['rule']} ({v['help']}) on "
                                + ", ".join(v["targets"][:6]) + more)
        if r["overflow"]:
            problems.append(f"{where}: the document is {r['overflow']['scrollWidth']} px wide for "
                            f"{r['overflow']['width']} px; past the right edge: "
                            + ", ".join(r["overflow"]["elements"]))
    return problems
