"""The dashboard at a desk's width (1280 px) and on a phone (390 px), in a browser set to Kolkata's
time: Debian's Chromium driven through chromedriver by Selenium. Started by
tests/services/dashboard.rs with the daemon's address, an admin token, the repository's name and the
directory for screenshots. Any failed check ends it non-zero.
"""

import datetime
import os
import sys

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

ADDR, TOKEN, NAME, SHOTS = sys.argv[1:5]
BASE = f"http://{ADDR}"
# UTC+05:30 all year: no daylight saving to reckon with, and the half hour shows a real shift.
ZONE, OFFSET = "Asia/Kolkata", datetime.timedelta(hours=5, minutes=30)
# The elements of the page (logs and patches aside) whose content is wider than they are, so that
# they scroll sideways. Text cut with an ellipsis (a subject, a ref; whole in its tooltip) is not.
SIDEWAYS = ("return [...document.querySelectorAll('main *')].filter(e => e.scrollWidth > e.clientWidth + 1"
            " && getComputedStyle(e).overflowX !== 'visible' && getComputedStyle(e).textOverflow !== 'ellipsis'"
            " && e.tagName !== 'PRE').map(e => e.tagName + '.' + e.className)")
DESK, PHONE = (1280, 900), (390, 844)


def shot(driver, name):
    os.makedirs(SHOTS, exist_ok=True)
    driver.save_screenshot(os.path.join(SHOTS, name + ".png"))


def fits(d, what):
    """The page is no wider than the window, and nothing in it scrolls sideways."""
    inner = d.execute_script("return window.innerWidth")
    wide = d.execute_script("return document.documentElement.scrollWidth")
    assert wide <= inner, f"{what}: the page is {wide}px wide in a {inner}px window"
    hidden = d.execute_script(SIDEWAYS)
    assert not hidden, f"{what}: these scroll sideways: {hidden}"


def inside(d, e, what):
    """The element is on screen, within the window's width."""
    inner = d.execute_script("return window.innerWidth")
    r = d.execute_script("return arguments[0].getBoundingClientRect().toJSON()", e)
    assert r["width"] > 0 and 0 <= r["left"] and r["right"] <= inner, f"{what} spans {r} of {inner}px"


def main():
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=390,844",
              "--disable-gpu", "--no-first-run"]:
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        run(driver)
    finally:
        driver.quit()


def run(d):
    d.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ZONE})
    d.get(BASE + "/login")
    d.add_cookie({"name": "gsbx_session", "value": TOKEN, "path": "/"})

    # The experiments at 390 px: the page does not scroll sideways and every button is on screen.
    d.set_window_size(390, 844)
    d.get(f"{BASE}/r/{NAME}")
    inner = d.execute_script("return window.innerWidth")
    assert inner <= 400, f"the window is {inner}px wide"
    wide = d.execute_script("return document.documentElement.scrollWidth")
    shot(d, "experiments-phone")
    assert wide <= inner, f"the experiments page is {wide}px wide in a {inner}px window"
    buttons = d.find_elements(By.CSS_SELECTOR, "main button")
    assert any(b.text == "promote" for b in buttons), [b.text for b in buttons]
    for b in buttons:
        r = d.execute_script("var r = arguments[0].getBoundingClientRect(); return [r.left, r.right];", b)
        assert 0 <= r[0] and r[1] <= inner, f"the {b.text!r} button spans {r} of {inner}px"
    # Nothing inside scrolls sideways either (a table wider than its card hides its buttons).
    hidden = d.execute_script(SIDEWAYS)
    assert not hidden, f"these scroll sideways at {inner}px: {hidden}"

    # The commits and a branch's page, at a desk and on a phone: nothing scrolls sideways, a long
    # subject is cut (whole in its tooltip), the ref links the branch's page, the charts show.
    for size in (DESK, PHONE):
        d.set_window_size(*size)
        inner = d.execute_script("return window.innerWidth")
        what = f"at {inner}px"
        for page in ("/", f"/r/{NAME}"):
            d.get(BASE + page)
            fits(d, f"{page} {what}")
        d.get(f"{BASE}/r/{NAME}/commits")
        shot(d, f"commits-{inner}")
        fits(d, f"the commits page {what}")
        subject = d.find_element(By.XPATH, "//td[contains(@class, 'subject')][contains(., 'A subject long enough')]")
        assert "long-paths-that-never-break" in subject.get_attribute("title"), subject.get_attribute("title")
        inside(d, subject, f"the long subject {what}")
        ref = d.find_element(By.CSS_SELECTOR, "#commits td.ref a[href$='/branches/experiment/a-rather-long-experiment-name']")
        inside(d, ref, f"the long ref {what}")
        for branch in ("main", "experiment/a-rather-long-experiment-name"):
            d.get(f"{BASE}/r/{NAME}/branches/{branch}")
            shot(d, f"branch-{branch.replace('/', '-')}-{inner}")
            fits(d, f"the page of {branch} {what}")
            for chart in ("time", "tests"):
                svg = d.find_element(By.CSS_SELECTOR, f"#{chart} svg")
                assert svg.is_displayed(), f"the {chart} chart of {branch} {what}"
                inside(d, svg, f"the {chart} chart of {branch} {what}")
                r = d.execute_script("return arguments[0].getBoundingClientRect().toJSON()", svg)
                columns = svg.find_elements(By.CSS_SELECTOR, "a[data-commit]")
                assert columns and len(columns) == int(svg.get_attribute("data-commits")), (chart, len(columns))
                # A column is a good finger's width, however few commits there are.
                assert r["width"] >= min(inner * 0.5, 30 * len(columns)) and r["height"] >= 60, f"the {chart} chart is {r} {what}"
                # Every commit's bar is drawn, inside the chart.
                for bar in svg.find_elements(By.CSS_SELECTOR, "rect.bar"):
                    b = d.execute_script("return arguments[0].getBoundingClientRect().toJSON()", bar)
                    assert b["width"] > 0 and b["height"] > 0, f"a bar of {chart} is {b} {what}"
                    assert r["left"] - 1 <= b["left"] and b["right"] <= r["right"] + 1, f"a bar of {chart} at {b} outside {r}"
            assert d.find_elements(By.CSS_SELECTOR, "#time rect.bar.passed"), f"a passing run of {branch} {what}"
    d.set_window_size(*PHONE)
    inner = d.execute_script("return window.innerWidth")

    # Times in the viewer's zone: each <time> of the feed shows its UTC instant in Kolkata's time.
    d.get(BASE + "/")
    wide = d.execute_script("return document.documentElement.scrollWidth")
    assert wide <= inner, f"the home page is {wide}px wide in a {inner}px window"
    hidden = d.execute_script(SIDEWAYS)
    assert not hidden, f"these scroll sideways at {inner}px on the home page: {hidden}"
    times = d.find_elements(By.CSS_SELECTOR, "#feed time")
    assert times, "no times in the feed"
    for t in times:
        utc = datetime.datetime.fromisoformat(t.get_attribute("datetime").replace("Z", "+00:00"))
        local = (utc + OFFSET).strftime("%H:%M:%S")
        assert t.text == local, f"{t.get_attribute('datetime')} shows {t.text!r}, not {local!r} in {ZONE}"
        # Chromium names the zone by its older name.
        title = t.get_attribute("title") or ""
        assert any(f"shown in {z}" in title for z in (ZONE, "Asia/Calcutta")), title
    shot(d, "home-kolkata")


main()
print("ok")
