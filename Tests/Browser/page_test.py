#!/usr/bin/env python3
"""The family page in a real browser (issue 24, point 9), started by Scripts/browser-test.sh.

Two homes on loopback (Mom's and Dad's laptops), each with its daemon serving the page on a free
port. Headless Chromium opens Mom's page and gives with a quick button, gives an arbitrary amount,
sees a bad amount refused with the CLI's message, undoes after reading the preview, renames a child,
sets a weekly allowance (its first period paid at once),
sees a give made on Dad's laptop appear without a reload, checks Dad's page agrees, fits 360 px, and
takes a screenshot whose size it checks. A second test checks that requests without the token or
from a foreign Origin are refused and change nothing. Everything is bounded in time and cleaned up.

usage: page_test.py KIDLEDGER_BINARY [SCREENSHOT.png]
"""
import json, os, re, shutil, signal, struct, subprocess, sys, tempfile, time, urllib.error, urllib.request

TOTAL_SECONDS = 150
STEP_SECONDS = 10


def fail(message):
    raise AssertionError(message)


def eventually(what, condition, seconds=STEP_SECONDS):
    """Polls `condition` until it returns a true value or the deadline passes (never a bare sleep)."""
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            last = condition()
            if last:
                return last
        except Exception as e:  # the page may be re-rendering
            last = e
        time.sleep(0.05)
    fail(f"timed out waiting for {what} (last: {last!r})")


class Laptop:
    def __init__(self, binary, root, name):
        self.binary, self.name = binary, name
        self.home = os.path.join(root, name)
        self.env = dict(os.environ, KIDLEDGER_HOME=self.home, HOME=root, USER=name.lower())
        self.daemon = None
        self.log = os.path.join(root, name + ".log")

    def run(self, *words, check=True):
        r = subprocess.run([self.binary, *words], env=self.env, capture_output=True, text=True, timeout=30)
        if check and r.returncode != 0:
            fail(f"{self.name}: kidledger {' '.join(words)} exited {r.returncode}: {r.stderr}")
        return r

    def serve(self):
        self.daemon = subprocess.Popen([self.binary, "serve", "--listen", "127.0.0.1:0", "--ui", "127.0.0.1:0"],
                                       env=self.env, stdout=subprocess.DEVNULL, stderr=open(self.log, "w"))
        text = eventually(f"{self.name}'s daemon to serve", lambda: "page on http://" in open(self.log).read() and open(self.log).read())
        self.sync_address = re.search(r"on (127\.0\.0\.1:\d+) \(replica", text).group(1)
        self.page = re.search(r"page on http://(127\.0\.0\.1:\d+)/", text).group(1)

    def stop(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(10)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait(5)


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    return struct.unpack(">II", head[16:24])


def http(method, url, headers=None, body=None):
    request = urllib.request.Request(url, method=method, headers=headers or {}, data=body.encode() if body is not None else None)
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def browser_test(mom, dad, screenshot):
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.add_argument("--headless=new")
    options.add_argument("--no-sandbox")           # CI runs as root
    options.add_argument("--disable-dev-shm-usage")
    options.add_argument("--disable-gpu")
    options.add_argument("--window-size=1000,900")
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(STEP_SECONDS)
    try:
        url = mom.run("ui").stdout.strip()
        driver.get(url)
        eventually("the token to leave the address", lambda: driver.current_url.endswith(f"{mom.page}/"))

        def card(name):
            for c in driver.find_elements(By.CSS_SELECTOR, "article.child"):
                if c.find_element(By.CSS_SELECTOR, ".name").text == name:
                    return c
            return None

        def balance(name, d=driver):
            # Read in one script: the page may re-render between two WebDriver calls.
            return d.execute_script("""
                for (const c of document.querySelectorAll("article.child"))
                    if (c.querySelector(".name").textContent === arguments[0]) return c.querySelector(".balance").textContent;
                return null;""", name)

        def act(what, action):
            """Runs `action` until it does not meet an element the page just re-rendered (bounded)."""
            return eventually(what, lambda: action() or True)

        eventually("Ava's card", lambda: balance("Ava") == "$0.00")
        eventually("the sync status", lambda: driver.find_element(By.ID, "sync").text in ("synced", "changes pending"))
        driver.execute_script("window.__noReload = 42")

        # A quick button (found by its accessible name).
        act("a quick button", lambda: card("Ava").find_element(By.CSS_SELECTOR, "button[aria-label='Give $0.05 to Ava']").click())
        eventually("the quick give", lambda: balance("Ava") == "$0.05")
        eventually("the CLI's message", lambda: driver.find_element(By.ID, "message").text == "Gave $0.05 to Ava. Balance: $0.05")
        eventually("the household's name", lambda: driver.find_element(By.ID, "title").text == "The Smiths")

        # The keyboard alone: the focused button keeps its focus through the re-render; Enter gives again.
        eventually("the quick button to keep its focus",
                   lambda: driver.switch_to.active_element.get_attribute("aria-label") == "Give $0.05 to Ava")
        ActionChains(driver).send_keys(Keys.ENTER).perform()   # to whatever has the focus
        eventually("the keyboard give", lambda: balance("Ava") == "$0.10")

        # An arbitrary amount, with the keyboard.
        # (While an input has the focus the page does not re-render the cards.)
        act("typing an amount", lambda: card("Ava").find_element(By.CSS_SELECTOR, "input[name=amount]").send_keys("1.25"))
        act("Give", lambda: card("Ava").find_element(By.CSS_SELECTOR, "button.give").click())
        eventually("the arbitrary give", lambda: balance("Ava") == "$1.35")

        # A bad amount: the CLI's message, nothing changed.
        expected = mom.run("give", "Ava", "1.005", check=False).stderr.strip().removeprefix("kidledger: ")
        act("typing a bad amount", lambda: card("Ava").find_element(By.CSS_SELECTOR, "input[name=amount]").send_keys("1.005"))
        act("Give", lambda: card("Ava").find_element(By.CSS_SELECTOR, "button.give").click())
        eventually("the bad amount's message", lambda: driver.find_element(By.ID, "error").text == expected)
        if balance("Ava") != "$1.35":
            fail("a refused amount changed the balance")
        act("clearing the amount", lambda: card("Ava").find_element(By.CSS_SELECTOR, "input[name=amount]").clear())

        # Undo: the preview names what and whose, then it undoes.
        preview = eventually("the undo preview", lambda: "+$1.25 for Ava" in driver.find_element(By.ID, "undo-preview").text
                             and driver.find_element(By.ID, "undo-preview").text)
        if "made by mom" not in preview:
            fail(f"the undo preview does not name the author: {preview}")
        act("Undo", lambda: driver.find_element(By.ID, "undo").click())
        eventually("the undo", lambda: balance("Ava") == "$0.10")

        # Rename.
        act("Rename", lambda: card("Ava").find_element(By.CSS_SELECTOR, "button.rename").click())
        field = eventually("the rename field", lambda: driver.find_element(By.CSS_SELECTOR, ".rename-form input"))
        field.clear()
        field.send_keys("Ava Rose")
        act("Save name", lambda: driver.find_element(By.CSS_SELECTOR, ".rename-form button[type=submit]").click())
        eventually("the rename", lambda: balance("Ava Rose") == "$0.10")

        # A change made on the other laptop appears without a reload, within 2 s of reaching this one.
        eventually("Dad's laptop to have the rename", lambda: dad.run("balance", "Ava Rose", check=False).returncode == 0)
        dad.run("give", "Ava Rose", "2", "--note", "from dad")
        started = time.monotonic()
        eventually("Dad's give on Mom's page", lambda: balance("Ava Rose") == "$2.10")
        seen_after = time.monotonic() - started
        if driver.execute_script("return window.__noReload") != 42:
            fail("the page reloaded")

        # Dad's page agrees.
        driver.switch_to.new_window("tab")
        driver.get(dad.run("ui").stdout.strip())
        eventually("Dad's page", lambda: balance("Ava Rose") == "$2.10")
        driver.close()
        driver.switch_to.window(driver.window_handles[0])
        # Mom's page still works beside Dad's (each page's cookie is named by its port).
        dad.run("give", "Ava Rose", "1")
        eventually("Dad's second give on Mom's page", lambda: balance("Ava Rose") == "$3.10")

        # A weekly allowance, set on the page: the first period (today's) is paid at once.
        act("the allowance box", lambda: card("Ava Rose").find_element(By.CSS_SELECTOR, "details.allowance summary").click())
        act("typing the allowance", lambda: card("Ava Rose").find_element(By.CSS_SELECTOR, ".allowance-form input[name=amount]").send_keys("0.50"))
        act("Set allowance", lambda: card("Ava Rose").find_element(By.CSS_SELECTOR, "button.set-allowance").click())
        eventually("the allowance's first payment", lambda: balance("Ava Rose") == "$3.60")
        eventually("the allowance on the card", lambda: "Allowance: $0.50 every week" in driver.execute_script("""
            for (const c of document.querySelectorAll("article.child"))
                if (c.querySelector(".name").textContent === arguments[0]) return c.querySelector(".allowance-summary").textContent;
            return "";""", "Ava Rose"))
        if "Ava Rose" not in mom.run("allowance", "list").stdout:
            fail("the CLI does not list the allowance set on the page")
        driver.execute_script("document.getElementById('message').textContent = ''")

        # The screenshot, at a desktop width; then the page fits 360 px.
        driver.execute_script("document.activeElement.blur()")
        path = screenshot
        driver.save_screenshot(path)
        width, height = png_size(path)
        size = os.path.getsize(path)
        if width < 800 or height < 600 or size < 10_000:
            fail(f"the screenshot is {width}x{height}, {size} bytes")
        driver.set_window_size(360, 800)
        eventually("a 360 px layout without horizontal scrolling",
                   lambda: driver.execute_script("return document.documentElement.scrollWidth") <= driver.execute_script("return window.innerWidth"))
        narrow = os.path.splitext(path)[0] + "-360.png"
        driver.save_screenshot(narrow)
        if png_size(narrow)[0] > 400:
            fail(f"the narrow screenshot is {png_size(narrow)[0]} px wide")
        print(f"browser test: passed (Dad's give seen {seen_after:.1f} s after the command; screenshot {width}x{height}, {size} bytes)")
    finally:
        driver.quit()


def refusal_test(mom, dad):
    token = open(os.path.join(mom.home, "ui-token")).read().strip()
    base = f"http://{mom.page}"
    port = mom.page.rsplit(":", 1)[1]
    digest = mom.run("digest").stdout
    form = "child=Ava+Rose&amount=5"
    form_type = {"Content-Type": "application/x-www-form-urlencoded"}
    checks = [
        ("no token", "POST", "/api/give", dict(form_type, Origin=base), 403),
        ("a foreign Origin", "POST", "/api/give", dict(form_type, Origin="http://evil.example", **{"X-KidLedger-Token": token}), 403),
        ("a rebinding Host", "POST", "/api/give", dict(form_type, Host="evil.example:80", **{"X-KidLedger-Token": token}), 403),
        ("a cookie but no header", "POST", "/api/give", dict(form_type, Cookie=f"kidledger_token_{port}={token}"), 403),
        ("a wrong token", "POST", "/api/give", dict(form_type, **{"X-KidLedger-Token": "0" * 64}), 403),
        ("a read without the cookie", "GET", "/api/state", {}, 401),
        ("a change by GET", "GET", "/api/give?" + form, {"Cookie": f"kidledger_token_{port}={token}"}, 405),
    ]
    for what, method, path, headers, expected in checks:
        status, body = http(method, base + path, headers, form if method == "POST" else None)
        if status != expected:
            fail(f"{what}: {status} (expected {expected}): {body}")
    status, _ = http("POST", base + "/api/give", dict(form_type, Origin=base, **{"X-KidLedger-Token": token}), "child=Ava+Rose&amount=1.005")
    if status != 400:
        fail(f"a bad amount: {status}")
    if mom.run("digest").stdout != digest:
        fail("a refused request changed the ledger")
    # Garbage on the page's port gets 400, and the daemon keeps syncing.
    import socket
    host, port_text = mom.page.rsplit(":", 1)
    with socket.create_connection((host, int(port_text)), timeout=5) as raw:
        raw.sendall(b"\x00\x01GARBAGE \xff\r\n\r\n")
        answer = raw.recv(100)
    if not answer.startswith(b"HTTP/1.1 400 "):
        fail(f"garbage got {answer!r}")
    dad.run("give", "Ben", "0.01", "--note", "after the garbage")
    eventually("Dad's give to reach Mom after the garbage",
               lambda: json.loads(mom.run("--json", "balance", "Ben").stdout)["balanceCents"] == 351)
    status, body = http("GET", base + "/", {})
    if status != 401 or "kidledger ui" not in body:
        fail(f"the page without the token: {status}")
    print(f"refusal test: passed ({len(checks) + 3} requests refused, the digest unchanged, the daemon still syncing)")


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 64
    binary = os.path.abspath(sys.argv[1])
    root = tempfile.mkdtemp(prefix="kidledger-browser-")
    screenshot = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.path.join(root, "page.png")
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(AssertionError(f"the browser test took over {TOTAL_SECONDS} s")))
    signal.alarm(TOTAL_SECONDS)
    mom, dad = Laptop(binary, root, "Mom"), Laptop(binary, root, "Dad")
    try:
        mom.run("init", "The Smiths", "--name", "mom")
        mom.run("child", "add", "Ava")
        mom.run("child", "add", "Ben")
        mom.run("give", "Ben", "3.50", "--note", "birthday")
        mom.serve()
        code = re.search(r"KL1-[A-Za-z0-9_-]+", mom.run("invite", "--address", mom.sync_address).stdout).group(0)
        dad.run("join", code, "--name", "dad")
        dad.serve()
        mom.run("peer", "add", dad.sync_address)
        browser_test(mom, dad, screenshot)
        refusal_test(mom, dad)
        return 0
    except Exception as e:
        print(f"browser test: FAILED: {e}", file=sys.stderr)
        for laptop in (mom, dad):
            if os.path.exists(laptop.log):
                print(f"--- {laptop.name}'s daemon log\n" + open(laptop.log).read()[-3000:], file=sys.stderr)
        return 1
    finally:
        signal.alarm(0)
        mom.stop()
        dad.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
