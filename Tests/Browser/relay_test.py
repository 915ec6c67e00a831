#!/usr/bin/env python3
"""The relay on the family page (issue 44, points 1 and 4), started by Scripts/browser-relay-test.sh.

On 127.0.0.1 only: Mom's and Dad's laptops (daemons on loopback, the household made with the CLI:
this test is about the relay, Scripts/browser-household-test.sh covers starting and joining on
the page) and a relay (`kidledger relay serve --listen 127.0.0.1:PORT --home R`). In headless
Chromium, Mom's page first refuses a code that is not one (the error at the field, in a
parent's words), then adds the relay with its code; the relay panel shows it reachable. Dad's
page shows the relay without the owner's controls, and "Mom's laptop: via the relay" beside
the direct line. Mom's daemon then stops and forgets Dad's address: a give on Dad's page makes
Dad's pill read "synced through the relay", never `offline`. Mom's daemon restarts on a new
port, so Dad's laptop can't reach it directly: the give reaches Mom's page through the relay,
and Dad's pill reads `synced`. Mom removes the relay from her page (the question
says what happens) and the panel says there is none. Each step is photographed at 1280 px and
360 px into the output folder; RELAY_TEST_DOC_SHOT=PATH also writes Mom's relay panel there
(docs/relay.png).

usage: relay_test.py KIDLEDGER_BINARY OUTPUT_DIR
"""
import json, os, re, shutil, signal, socket, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import household_test  # noqa: E402  (its Laptop on loopback, its patterns)
from page_test import fail  # noqa: E402
from household_test import COMMAND, FINGERPRINT, eventually  # noqa: E402

# A relay's session runs at the daemon's start, every 30 s and soon after a local change: a step
# that waits for one waits up to a few rounds.
RELAY_SECONDS = 120


def run(laptop, *words):
    r = subprocess.run([laptop.binary, *words], env=laptop.env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail(f"{laptop.name}: kidledger {' '.join(words)} exited {r.returncode}: {r.stderr}")
    return r.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Relay:
    """`kidledger relay serve` in a home of its own, on 127.0.0.1."""

    def __init__(self, binary, root):
        self.home = os.path.join(root, "relay")
        self.log = os.path.join(root, "relay.log")
        self.port = free_port()
        with open(self.log, "a") as log:
            self.process = subprocess.Popen([binary, "--home", self.home, "relay", "serve", "--listen", f"127.0.0.1:{self.port}"],
                                            env=dict(os.environ, HOME=root), stdout=subprocess.DEVNULL, stderr=log)
        path = os.path.join(self.home, "relay-code.txt")
        eventually("the relay's code", lambda: "relay serving on" in open(self.log).read() and os.path.exists(path), seconds=30)
        self.code = open(path).read().strip()
        if not self.code.startswith("KLR1-"):
            fail(f"the relay's code: {self.code!r}")

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def browser(out, mom, dad, relay):
    from selenium.webdriver.common.by import By

    chromium = household_test.Chromium()
    driver, windows, on, text, find, act = chromium.driver, chromium.windows, chromium.on, chromium.text, chromium.find, chromium.act
    shots = []
    try:
        def texts(css):
            return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]

        def shot(step, who, show="#relay"):
            on(who)
            said = driver.find_element(By.TAG_NAME, "body").text
            if COMMAND.search(said) or re.search(r"kidledger relay|(^|\s)--[a-z]", said):
                at = (COMMAND.search(said) or re.search(r"kidledger relay|(^|\s)--[a-z]", said)).start()
                fail(f"{step}: the page names a command or flag: {said[max(0, at - 120):at + 60]!r}")
            people = driver.execute_script("return [...document.querySelectorAll('#members, #peers, .field-error')].map(e => e.textContent).join(' ')")
            if FINGERPRINT.search(people):
                fail(f"{step}: a person or a laptop shown by fingerprint: {people!r}")
            for width, height in ((1280, 900), (360, 800)):
                driver.set_window_size(width, height)
                driver.execute_script("const e = document.querySelector(arguments[0]); if (e) e.scrollIntoView({ block: 'center' })", show)
                path = os.path.join(out, f"{step}-{who}-{width}.png")
                driver.save_screenshot(path)
                shots.append(path)
            driver.set_window_size(1280, 900)
            print(f"relay test: {step} ({who}): ok", flush=True)

        def open_sync():
            eventually("the page", lambda: text("title") == "The Millers")
            act("Sync, laptops and members", lambda: find("#sync-details").get_attribute("open") or find("#sync-details summary").click())

        # 1. Mom's page (the owner): Add a relay, what it is, its field; a code that is not one.
        driver.get(mom.url())
        windows["mom"] = driver.current_window_handle
        open_sync()
        eventually("Add a relay", lambda: find("#relay-form").is_displayed() and "can read none of them" in text("relay-add"))
        field = find("#relay-code")
        field.send_keys("hello")
        act("Add the relay", lambda: find("#relay-add-button").click())
        eventually("the bad code's error at its field", lambda: field.get_attribute("aria-invalid") == "true"
                   and text(field.get_attribute("aria-describedby")).startswith("That is not a relay code"))
        said = text(field.get_attribute("aria-describedby"))
        if "relay machine" not in said or "`" in said:
            fail(f"the bad code's error in a parent's words: {said!r}")
        shot("01-bad-code", "mom")

        # 2. The code `relay serve` printed: added; the panel shows it reachable, with its fingerprint.
        field.clear()
        field.send_keys(relay.code)
        act("Add the relay", lambda: find("#relay-add-button").click())
        eventually("the relay added", lambda: "The relay is added" in find("#relay .card-message").text, seconds=60)
        line = eventually("the relay reachable in the panel, with its last sync (status's lastSuccessMillis)",
                          lambda: [t for t in texts("#relays li.relay") if "Reachable, last synced with this laptop" in t])[0]
        if f"127.0.0.1:{relay.port}" not in line or not FINGERPRINT.search(line):
            fail(f"the relay's line: {line!r}")
        if not driver.find_elements(By.CSS_SELECTOR, "#relays button.relay-remove"):
            fail("no Remove on the owner's page")
        shot("02-added", "mom")
        doc = os.environ.get("RELAY_TEST_DOC_SHOT")
        if doc:
            driver.execute_script("document.getElementById('relay').scrollIntoView()")
            find("#relay").screenshot(doc)
            print(f"relay test: the panel's picture in {doc}", flush=True)

        # 3. Dad's page: the relay without the owner's controls; Mom's laptop via the relay.
        driver.switch_to.new_window("window")
        windows["dad"] = driver.current_window_handle
        driver.get(dad.url())
        open_sync()
        eventually("the relay on Dad's page", lambda: [t for t in texts("#relays li.relay") if f"127.0.0.1:{relay.port}" in t], seconds=RELAY_SECONDS)
        if driver.find_elements(By.CSS_SELECTOR, "#relay-form, #relays button"):
            fail("Dad's page (not the owner) has the relay's controls")
        eventually("Mom's laptop via the relay on Dad's page",
                   lambda: [t for t in texts("#peers li.relay-route") if t.startswith("Mom's laptop: via the relay, last synced")], seconds=RELAY_SECONDS)
        direct = [t for t in texts("#peers li") if t.startswith("Mom's laptop (")]
        if not direct:
            fail(f"the direct line beside the relay's: {texts('#peers li')!r}")
        shot("03-dad-via-relay", "dad", "#peers")

        # 4. Mom's laptop is shut and moves (its daemon stopped, then on a new port with Dad's address
        # forgotten): the laptops can't reach each other directly. Dad gives while Mom's laptop is
        # off: Dad's pill says the relay carries it (Mom synced through the relay minutes ago) and
        # never alarms. Mom's laptop comes back and gets the give through the relay; Dad's pill then
        # reads `synced` (the relay reports Mom's acknowledgement). Mom's daemon is stopped while
        # the pill is checked so that Mom can't collect the give first: the pill says `synced`
        # once she has, and the test would race her relay round.
        mom.stop()
        for peer in json.loads(run(mom, "peers", "--json"))["peers"]:
            run(mom, "peer", "remove", "--", peer["address"])
        on("dad")
        seen = set()
        amount = lambda: find("article.child input[name=amount]")
        act("an amount", lambda: amount().send_keys("2.50"))
        act("Give", lambda: find("article.child button.give").click())
        eventually("the give on Dad's page", lambda: "$2.50" in find("article.child .balance").text)

        def relayed():
            seen.add(text("sync"))
            return text("sync") == "synced through the relay" and "via the relay, last synced" in text("last-sync")
        eventually("`synced through the relay` on Dad's pill", relayed, seconds=RELAY_SECONDS)
        print(f"relay test: Dad's pill before: {sorted(seen)!r}", flush=True)
        seen.discard("synced through the relay")
        if "offline" in seen:
            fail(f"Dad's pill alarmed while the relay carried the changes: {seen!r}")
        shot("04-dad-relayed", "dad", "header")
        mom.serve()
        on("mom")
        driver.get(mom.url())
        eventually("Dad's give on Mom's page, through the relay", lambda: "$2.50" in find("article.child .balance").text, seconds=RELAY_SECONDS)
        on("dad")
        eventually("`synced` on Dad's pill once Mom's laptop has the give", lambda: text("sync") == "synced", seconds=RELAY_SECONDS)

        # 5. Mom removes the relay: the question says what happens; the panel says there is none.
        on("mom")
        open_sync()
        act("Remove the relay", lambda: find("#relays button.relay-remove").click())
        alert = eventually("the removal's question", lambda: driver.switch_to.alert)
        question = alert.text
        alert.accept()
        for part in ["Remove the relay at 127.0.0.1:", "every laptop stops using it", "sealed", "can't be added again"]:
            if part not in question:
                fail(f"the removal's question {question!r} does not say {part!r}")
        eventually("no relay on Mom's page", lambda: texts("#relays li") == ["No relay yet: the laptops sync only when they reach each other directly."], seconds=60)
        eventually("the removal confirmed", lambda: "The relay is removed" in find("#relay .card-message").text)
        shot("05-removed", "mom")
    finally:
        driver.quit()
    return shots


def main():
    binary, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    root = tempfile.mkdtemp(prefix="kidledger-relay-page-")
    started = []
    try:
        mom = household_test.Laptop(binary, root, "Mom", None)
        started.append(mom)
        dad = household_test.Laptop(binary, root, "Dad", None)
        started.append(dad)
        run(mom, "init", "--name", "Mom", "--", "The Millers")
        run(mom, "child", "add", "--", "Ava")
        mom.serve()
        code = json.loads(run(mom, "invite", "--no-qr", "--json"))["code"]
        run(dad, "join", "--name", "Dad", "--", code)
        dad.serve()
        relay = Relay(binary, root)
        started.append(relay)
        shots = browser(out, mom, dad, relay)
        print(f"relay test: passed; {len(shots)} screenshots in {out}", flush=True)
    except BaseException:
        for name in ("Mom", "Dad", "relay"):
            print(f"--- {name}'s log:", file=sys.stderr)
            try:
                print(open(os.path.join(root, name + ".log")).read()[-3000:], file=sys.stderr)
            except OSError:
                pass
        raise
    finally:
        for p in reversed(started):
            p.close() if hasattr(p, "close") else p.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
