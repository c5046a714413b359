"""Headless Chromium for the live view's tests: Debian's ``chromium`` driven by Selenium
through Debian's ``chromium-driver`` (both installed by scripts/setup.sh)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = ("chromium", "chromium-browser")
DRIVER = "chromedriver"


def binaries() -> tuple[str, str] | None:
    """(browser, driver) paths, or None when either is missing."""
    browser = next((p for p in map(shutil.which, CHROMIUM) if p), None)
    driver = shutil.which(DRIVER) or (
        "/usr/bin/chromedriver" if shutil.which("/usr/bin/chromedriver") else None)
    return (browser, driver) if browser and driver else None


@contextlib.contextmanager
def headless_chromium(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A Selenium WebDriver on headless Chromium (skips the test when it is not installed);
    the browser is always quit, also on failure."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = binaries()
    if found is None:
        pytest.skip("chromium and chromium-driver are not installed (make setup installs them)")
    browser, driver_path = found
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    profile = tempfile.TemporaryDirectory(prefix="liveview-chromium-")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", f"--user-data-dir={profile.name}",
                "--no-first-run", "--disable-extensions", "--proxy-server=direct://",
                "--proxy-bypass-list=*"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)
    try:
        yield driver
    finally:
        driver.quit()
        profile.cleanup()


def wait_for(driver: Any, script: str, timeout_s: float = 20.0) -> Any:
    """Runs ``script`` (JavaScript returning a value) until it returns something truthy."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout_s, poll_frequency=0.1).until(
        lambda d: d.execute_script(script))
