"""The web page at `GET /` in a real browser (CTest serve_page, label serve): headless Chromium driven by Selenium
(Debian's chromium, chromium-driver and python3-selenium, from scripts/setup.sh) on a real server serving DeiT-Tiny
and a DINOv2 folder. Photos go in through the page's file input; the labels and probabilities it shows are
`vit classify --json`'s, the similarity figures of its heat map those of `vit embed --normalize`'s rows; a text
file shows its refusal on its own card; on a CLIP model, the search box ranks the photos by a query as `vit embed
--text` and `vit embed --head` rank them; phone photos of 14 MB are scaled down in the browser, not refused. A page
of another origin calls the server only when --cors-origin names it. Screenshots land beside the vit binary
(serve_page_*.png) for people to look at."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest
import requests

from conftest import (DEIT, NAME, VIT_BINARY, cli_embed, data_uri, layout_models, photos, sanitized_binary,
                      text_models)

CHROMEDRIVER = "/usr/bin/chromedriver"
SHOTS = pathlib.Path(VIT_BINARY).parent


def need(what):
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {what} (scripts/setup.sh installs chromium, chromium-driver, python3-selenium)")
    pytest.skip(f"{what}; skipping")


@pytest.fixture
def browser():
    """A headless Chromium session, always ended."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        need("selenium is not installed")
    if not os.path.exists(CHROMEDRIVER):
        need(f"{CHROMEDRIVER} is missing")
    options = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(a)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def cli_top(files):
    out = subprocess.run([VIT_BINARY, "classify", "--json", "-k", "5", "-m", str(DEIT), *map(str, files)],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    return {json.loads(l)["file"].rsplit("/", 1)[-1]: [(t["label"], t["prob"]) for t in json.loads(l)["top"]]
            for l in out.splitlines()}


def open_page(driver, url, model):
    from selenium.webdriver.support.ui import Select, WebDriverWait
    driver.get(url + "/")
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.state") == "ready")
    Select(driver.find_element("id", "model")).select_by_value(model)


def upload(driver, files, timeout=300):
    """Chooses files through the page's file input and waits for the page to finish."""
    from selenium.webdriver.support.ui import WebDriverWait
    driver.find_element("id", "files").send_keys("\n".join(str(f) for f in files))
    WebDriverWait(driver, timeout).until(lambda d: d.execute_script("return document.body.dataset.state") == "done")


def test_page_is_self_contained(serve):
    """One HTML page with its script and styles inline: nothing fetched from elsewhere, a policy that forbids it."""
    s = serve()
    r = requests.get(s.url + "/", timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in r.headers["Content-Security-Policy"]
    assert "http://" not in r.text and "https://" not in r.text and "//cdn" not in r.text
    assert '<script src' not in r.text and '<link' not in r.text


def test_page_classifies_and_explains_in_a_browser(serve, browser, tmp_path):
    """Three photos through the file input: each card's bars are `vit classify --json`'s top 5 (labels in order,
    probabilities within 1e-6) and its attention picture is drawn, every card's title, photo and bars at the same
    offsets from its top; a text file gets a message, not a blank."""
    dino = layout_models() / "hf_dinov2"
    s = serve("-m", f"dino={dino}")
    files = photos()[:3]
    want = cli_top(files)
    open_page(browser, s.url, NAME)
    upload(browser, files)
    cards = browser.find_elements("css selector", ".card")
    assert len(cards) == 3
    for card in cards:
        name = card.get_attribute("data-file")
        rows = card.find_elements("css selector", ".bars li")
        got = [(r.find_element("css selector", ".label").text, float(r.get_attribute("data-prob"))) for r in rows]
        assert [g[0] for g in got] == [w[0] for w in want[name]], name
        assert all(abs(g[1] - w[1]) <= 1e-6 for g, w in zip(got, want[name])), name
        picture = card.find_element("css selector", "img.attention")
        size = browser.execute_script("return [arguments[0].naturalWidth, arguments[0].naturalHeight]", picture)
        assert 0 < min(size) and max(size) <= 512, size  # drawn (the longer side at most the page's 512)
    assert browser.find_element("id", "message").text == ""
    # Every card lays out the same from its top, however tall its row: title, photo and bars at the same offsets.
    offsets = browser.execute_script(
        "return Array.from(document.querySelectorAll('.card')).map((c) => { const top = c.getBoundingClientRect().top;"
        " return ['h2', '.photo img', '.bars'].map((s) => c.querySelector(s).getBoundingClientRect().top - top); })")
    assert all(abs(o - p) <= 1 for card in offsets for o, p in zip(card, offsets[0])), offsets
    browser.save_screenshot(str(SHOTS / "serve_page_classify.png"))

    text = tmp_path / "notes.txt"
    text.write_text("a shopping list, not a photo\n")
    upload(browser, [text])
    message = browser.find_element("id", "message").text
    assert "notes.txt" in message and "HTTP 400" in message, message
    assert browser.find_element("id", "message").is_displayed()
    browser.save_screenshot(str(SHOTS / "serve_page_error.png"))


def test_page_shows_embedding_similarity_in_a_browser(serve, browser, tmp_path):
    """Four photos with the DINOv2 folder picked: the heat map's printed figures are the cosines of `vit embed
    --normalize`'s rows (to the 3 decimals printed); a text among photos gets a card with its refusal, and the
    photos are compared all the same."""
    dino = layout_models() / "hf_dinov2"
    s = serve("-m", f"dino={dino}")
    files = photos()[3:7]
    rows = cli_embed(dino, files, "--normalize")
    e = np.asarray([rows[f.name] for f in files], np.float64)
    want = e @ e.T
    open_page(browser, s.url, "dino")
    upload(browser, files)
    cells = browser.find_elements("css selector", "#similarity td")
    assert len(cells) == 16
    for c in cells:
        i, j = int(c.get_attribute("data-i")), int(c.get_attribute("data-j"))
        assert abs(float(c.text) - want[i, j]) <= 5e-4 + 1e-6, (i, j, c.text, want[i, j])
    browser.save_screenshot(str(SHOTS / "serve_page_similarity.png"))

    text = tmp_path / "notes.txt"
    text.write_text("not a photo\n")
    upload(browser, [files[0], text, *files[1:3]])
    cells = browser.find_elements("css selector", "#similarity td")
    assert len(cells) == 9, len(cells)  # the three photos, compared
    for c in cells:
        i, j = int(c.get_attribute("data-i")), int(c.get_attribute("data-j"))
        assert abs(float(c.text) - want[i, j]) <= 5e-4 + 1e-6, (i, j, c.text, want[i, j])
    card = browser.find_element("css selector", '.card[data-file="notes.txt"]')
    refusal = card.find_element("css selector", ".error").text
    assert "HTTP 400" in refusal and "data URI of text/plain is not an image" in refusal, refusal
    message = browser.find_element("id", "message").text
    assert message.startswith("notes.txt: ") and "HTTP 400" in message, message
    browser.save_screenshot(str(SHOTS / "serve_page_similarity_refused.png"))


def test_page_search_box_ranks_the_photos_as_the_cli_does(serve, browser):
    """A CLIP model with its text tower (tests/make_text_models.py's) beside DeiT-Tiny: the search box is shown for
    it alone; eight photos and a query give the ranking of the cosines of `vit embed --head --normalize`'s rows with
    `vit embed --text --normalize`'s, each score shown; an empty query is answered with a message."""
    from selenium.webdriver.support.ui import WebDriverWait
    if sanitized_binary():
        pytest.skip("the text towers' suites run in release builds only (docs/TEXT.md)")
    clip = text_models() / "oc_clip"
    s = serve("-m", f"clip={clip}")
    files = photos()[20:28]
    query = "a photo of a dog on a beach"
    rows = cli_embed(clip, files, "--head", "--normalize")
    out = subprocess.run([VIT_BINARY, "embed", "-m", str(clip), "--normalize", "--text", query], capture_output=True,
                         text=True, timeout=300, check=True).stdout
    q = np.asarray(json.loads(out)["embedding"], np.float64)
    scores = {f.name: float(np.asarray(rows[f.name], np.float64) @ q) for f in files}
    want = sorted(scores, key=lambda n: -scores[n])
    open_page(browser, s.url, NAME)
    assert not browser.find_element("id", "search").is_displayed()  # DeiT-Tiny has no text tower
    open_page(browser, s.url, "clip")
    assert browser.find_element("id", "search").is_displayed()
    upload(browser, files)
    browser.find_element("id", "query").send_keys(query)
    browser.find_element("id", "go").click()
    WebDriverWait(browser, 120).until(lambda d: len(d.find_elements("css selector", "#ranking li")) == len(files))
    items = browser.find_elements("css selector", "#ranking li")
    got = [(i.get_attribute("data-file"), float(i.get_attribute("data-score"))) for i in items]
    assert [g[0] for g in got] == want, (got, want)
    worst = max(abs(score - scores[name]) for name, score in got)
    assert worst <= 1e-6, worst
    for item, (name, score) in zip(items, got):
        assert f"cosine {score:.4f}" in item.text and name in item.text
    browser.save_screenshot(str(SHOTS / "serve_page_search.png"))
    print(f"search: the page's ranking of {len(files)} photos equals the CLI's; scores max |delta| {worst:.3g}")
    browser.find_element("id", "query").clear()
    browser.find_element("id", "go").click()
    WebDriverWait(browser, 30).until(lambda d: d.find_element("id", "message").text != "")
    assert "type what to look for" in browser.find_element("id", "message").text


GRAIN = 12  # the grain's amplitude, chosen so that each photo is about 14 MB at quality 92


def phone_photos(tmp_path, n=3):
    """n JPEGs as a phone takes them at full size: 8000x6000 (48 megapixels, over the server's --max-pixels default)
    and about 14 MB each (three of them over --max-body-mb's 32 MB as base64), made from sample photos with grain."""
    from PIL import Image
    rng = np.random.default_rng(7)
    out = []
    for k, f in enumerate(photos()[:n]):
        big = np.asarray(Image.open(f).convert("RGB").resize((8000, 6000), Image.BICUBIC), np.int16)
        grain = rng.integers(-GRAIN, GRAIN + 1, big.shape, dtype=np.int16)
        path = tmp_path / f"phone_{k}.jpg"
        Image.fromarray(np.clip(big + grain, 0, 255).astype(np.uint8)).save(path, quality=92)
        out.append(path)
    return out


def test_page_scales_phone_photos_down_before_sending(serve, browser, tmp_path):
    """Three 14 MB, 48-megapixel phone photos (together 42 MB, 56 MB as base64): on a classifier each card gets its
    bars and attention picture, on an embedder the heat map compares them; no refusal (413 for the body, 400 for the
    pixels), each card saying how far its photo was scaled down in the browser."""
    dino = layout_models() / "hf_dinov2"
    s = serve("-m", f"dino={dino}")
    files = phone_photos(tmp_path)
    sizes = [f.stat().st_size for f in files]
    assert all(12e6 <= n <= 17e6 for n in sizes), sizes
    open_page(browser, s.url, NAME)
    upload(browser, files)
    assert browser.find_element("id", "message").text == ""
    cards = browser.find_elements("css selector", ".card")
    assert len(cards) == 3
    for card in cards:
        assert len(card.find_elements("css selector", ".bars li")) == 5, card.text
        assert card.find_elements("css selector", "img.attention"), card.text
        note = card.find_element("css selector", ".note").text
        assert note.startswith("scaled down here from 8000x6000") and "to 2048x1536" in note, note
    browser.save_screenshot(str(SHOTS / "serve_page_phone_photos.png"))
    open_page(browser, s.url, "dino")
    upload(browser, files)
    assert browser.find_element("id", "message").text == ""
    cells = browser.find_elements("css selector", "#similarity td")
    assert len(cells) == 9
    assert all(abs(float(c.text) - 1) <= 1e-3 for c in cells if c.get_attribute("data-i") == c.get_attribute("data-j"))
    assert len(browser.find_elements("css selector", ".card .note")) == 3
    browser.save_screenshot(str(SHOTS / "serve_page_phone_similarity.png"))


def test_a_page_of_another_origin_calls_the_server_only_with_cors_origin(serve, browser):
    """A page served from another loopback port (another origin) fetches /v1/embeddings with JSON, which the browser
    preflights: refused by the browser while the server answers no CORS (the default), answered with
    --cors-origin naming that origin."""
    import http.server
    import threading

    class Elsewhere(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            body = b"<!doctype html><title>elsewhere</title><p>a page of another origin</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    page = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere)
    thread = threading.Thread(target=page.serve_forever, daemon=True)
    thread.start()
    try:
        origin = f"http://127.0.0.1:{page.server_port}"
        script = """const [url, input, done] = arguments;
          fetch(url + "/v1/embeddings", {method: "POST", headers: {"Content-Type": "application/json"},
                                         body: JSON.stringify({input: [input], encoding_format: "float"})})
            .then((r) => r.json()).then((j) => done(j.data[0].embedding.length)).catch((e) => done("failed: " + e));"""
        browser.set_script_timeout(120)
        image = data_uri(photos()[0])
        for flags, want in (((), "failed: TypeError: Failed to fetch"), (("--cors-origin", origin), 192)):
            s = serve(*flags)
            browser.get(origin + "/")
            assert browser.execute_async_script(script, s.url, image) == want, flags
            s.kill()
    finally:
        page.shutdown()
        page.server_close()
        thread.join(10)
