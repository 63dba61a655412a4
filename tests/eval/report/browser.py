"""Opening a page in a real headless Chromium (Debian's ``chromium`` package), offline, for the report tests.

No DevTools client is needed: a small probe script is injected at the top of a copy of the page. It records
every error event (script errors and resources that fail to load, captured before they bubble), every
``console.error`` and unhandled promise rejection, and on ``load`` writes a JSON verdict -- images and their
``naturalWidth``, the errors, the amount of visible text -- into ``<pre id="aegis-browser-check">``, which
``--dump-dom`` returns. A second run takes a screenshot. Chromium runs with a fresh profile and every
background service that would reach Google hosts switched off.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
RESULT_ID = "aegis-browser-check"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-default-browser-check",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-breakpad",
    "--metrics-recording-only",
    "--mute-audio",
    "--hide-scrollbars",
    "--run-all-compositor-stages-before-draw",
    "--virtual-time-budget=5000",
    "--enable-logging=stderr",
    "--v=0",
)

PROBE = (
    """<script>
(function () {
  var errors = [];
  window.addEventListener('error', function (e) {
    var t = e.target;
    if (t && t !== window && t.tagName) {
      errors.push('resource failed to load: <' + t.tagName.toLowerCase() + '> ' + \
String(t.src || t.href || '').slice(0, 80));
    } else {
      errors.push('script error: ' + e.message);
    }
  }, true);
  window.addEventListener('unhandledrejection', function (e) { errors.push('unhandled rejection: ' + e.reason); });
  var original = console.error;
  console.error = function () {
    errors.push('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return original.apply(console, arguments);
  };
  window.addEventListener('load', function () {
    var images = Array.prototype.slice.call(document.images);
    var verdict = {
      images: images.length,
      broken: images.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                    .map(function (i) { return i.alt || String(i.src).slice(0, 60); }),
      widths: images.map(function (i) { return i.naturalWidth; }),
      errors: errors,
      text_chars: (document.body.innerText || '').trim().length,
      headings: Array.prototype.map.call(document.querySelectorAll('h1, h2, h3, h4'),
                                         function (h) { return h.textContent; }),
      tables: document.querySelectorAll('table').length,
      bold_cells: document.querySelectorAll('td strong').length,
      height: document.documentElement.scrollHeight
    };
    var pre = document.createElement('pre');
    pre.id = '"""
    + RESULT_ID
    + """';
    pre.textContent = JSON.stringify(verdict);
    document.body.appendChild(pre);
  });
})();
</script>
"""
)


def find_chromium() -> str | None:
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(binary: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="aegis-chromium-") as profile:
        env = {**os.environ, "HOME": profile}  # nothing of the user's profile or keyring is touched
        return subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )


def console_errors(stderr: str) -> list[str]:
    """Console messages Chromium logged at error level (``...:ERROR:CONSOLE(n)] "..."`` lines)."""
    return [line for line in stderr.splitlines() if "CONSOLE" in line and ":ERROR:" in line]


def check_page(
    html: Path, screenshot: Path, binary: str, timeout: float = 120.0, width: int = 1200, height: int = 2400
) -> dict:
    """Open ``html`` (a copy with the probe, written beside it so relative paths resolve) and return the
    probe's verdict plus ``console`` (error-level console lines from Chromium's log); write a screenshot."""
    page = html.read_text(encoding="utf-8")
    probed = html.with_name(f".{html.stem}.probe.html")
    head = page.find("<head>")
    at = head + len("<head>") if head >= 0 else 0
    probed.write_text(page[:at] + PROBE + page[at:], encoding="utf-8")
    try:
        dom = _run(binary, ["--dump-dom", probed.as_uri()], timeout)
        shot = _run(binary, [f"--screenshot={screenshot}", f"--window-size={width},{height}", html.as_uri()], timeout)
    finally:
        probed.unlink(missing_ok=True)
    start = dom.stdout.find(f'<pre id="{RESULT_ID}">')
    if start < 0:
        raise AssertionError(
            f"the probe wrote no verdict (chromium exit {dom.returncode}); stderr tail:\n" + dom.stderr[-2000:]
        )
    body = dom.stdout[start + len(f'<pre id="{RESULT_ID}">') :]
    body = body[: body.find("</pre>")]
    import html as html_lib

    verdict = json.loads(html_lib.unescape(body))
    verdict["console"] = console_errors(dom.stderr) + console_errors(shot.stderr)
    verdict["screenshot_exit"] = shot.returncode
    return verdict
