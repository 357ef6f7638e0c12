"""The report page in a headless browser (Debian's chromium; .ci/run installs it): it renders, and its first
screen holds the claims table."""
import os
import re
import shutil
import subprocess

import pytest

from reports.__main__ import main as reports_main
from tables.__main__ import main as tables_main
from tests.reports.test_reports_compare import folder

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1280,900"]
# where the first claims table starts and how tall the page is, written into the page by the page itself
PROBE = ("<script>const t=[...document.querySelectorAll('table')].find(t=>t.rows[0].cells[0].textContent==='Claim');"
         "document.body.dataset.claimsTop=t?Math.round(t.getBoundingClientRect().top):-1;"
         "document.body.dataset.height=document.documentElement.scrollHeight;</script></body>")

pytestmark = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                                reason="no chromium here (apt-get install chromium); CI installs it and never skips")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser")
    runs = folder(root, 0.0)
    assert tables_main(["build", "--results", str(runs), "--out", str(root / "tables")]) == 0
    assert reports_main(["build", "--results", str(runs), "--tables", str(root / "tables"), "--out",
                         str(root / "report")]) == 0
    html = (root / "report" / "report.html").read_text()
    probed = root / "probed.html"
    probed.write_text(html.replace("</body>", PROBE, 1))
    return root, probed


def chromium(*args, user_data):
    assert CHROMIUM is not None, "CI must have chromium: .ci/run installs Debian's package"
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={user_data}", *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow
def test_the_page_renders_with_its_contents_and_the_claims_on_the_first_screen(page, tmp_path):
    root, probed = page
    dom = chromium("--virtual-time-budget=5000", "--dump-dom", probed.as_uri(), user_data=tmp_path / "profile")
    top = int(re.search(r'data-claims-top="(-?\d+)"', dom)[1])
    height = int(re.search(r'data-height="(\d+)"', dom)[1])
    assert 0 < top < 900, f"the first claims table starts at {top} px, below the first screen"
    assert height > 900 and '<nav id="contents">' in dom
    assert dom.index("What this profile reproduces") < dom.index("How to read the verdicts")
    shot = tmp_path / "first_screen.png"
    chromium(f"--screenshot={shot}", probed.as_uri(), user_data=tmp_path / "profile2")
    assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
