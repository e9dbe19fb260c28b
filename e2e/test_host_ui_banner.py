"""``host --background --ui`` says where its dashboard is: the URL (with the token) once
the dashboard child has written it, never the stale file a killed host left."""

from __future__ import annotations

import re
import urllib.request

import pytest

from .harness import Project

pytestmark = pytest.mark.slow


@pytest.mark.timeout(120)
def test_the_background_banner_names_the_live_dashboard(project: Project) -> None:
    stale = project.paths.state_dir / "ui-url"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("http://127.0.0.1:1/?token=left-by-a-killed-host\n")
    try:
        out = project.cli("host", "--background", "--ui").stdout
        found = re.search(r"dashboard at (http://127\.0\.0\.1:\d+/\?token=[\w-]+)", out)
        assert found is not None, out
        assert "left-by-a-killed-host" not in out
        url = found.group(1)
        assert stale.read_text().strip() == url and stale.stat().st_mode & 0o777 == 0o600
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200 and b"pi-workflows" in page.read()
    finally:
        project.cli("host", "--stop", check=False)
    assert not stale.exists()  # the host removed it when it stopped
