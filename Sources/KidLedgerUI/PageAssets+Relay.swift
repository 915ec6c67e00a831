/// The page's relay parts (issue 44, points 1 and 4), apart from the other scripts so they merge
/// easily: the relay panel under "Sync, laptops and members" (each relay's fingerprint, address,
/// whether it is reachable, when it last synced; the owner's *Add a relay* and *Remove the
/// relay*), the way to each other laptop through it beside the direct line, the relay's own
/// trouble, and the words beside the pill when it is `relayed`. Served after ``householdScript``
/// in one `app.js`; it reads `status --json`'s `relays` and `relay status --json` (the state's
/// `relay`), and tolerates keys that are absent.
extension PageAssets {
    /// The style of the relay parts.
    public static let relayStyle = """
    #relays{list-style:none;padding:0;margin:.3em 0}
    #relays li{display:flex;flex-wrap:wrap;gap:.3em .8em;align-items:center;margin:.3em 0}
    #relays .relay-what{flex:1 1 14em;overflow-wrap:anywhere}
    .relay-fingerprint{font:600 .95em ui-monospace,monospace;overflow-wrap:anywhere}
    .relay-trouble{color:#8a4b00;font-weight:600}
    #relay-add form{display:flex;flex-wrap:wrap;gap:.5em;align-items:flex-end;margin:.5em 0}
    #relay-add form label{flex:1 1 14em}
    """

    /// The script of the relay parts (after ``householdScript``, in the same file).
    public static let relayScript = #"""

    // ---- The relay (issue 44): the panel, the way to each laptop through it, its trouble ----
    // `relay add`'s and `relay remove`'s words made a parent's (before the household script's own).
    actions.unshift([/`kidledger relay serve[^`]*`/g, "the relay machine"], [/\s*\(pass the address with --address[^)]*\)/g, ""],
      [/^that relay is granted already/, "this relay is added already"], [/`kidledger relay status`/g, "the relay panel"]);
    // The relays `status --json` lists.
    function relays() {
      const s = state && state.status;
      return (s && s.relays) || [];
    }
    // "reachable" / "unreachable 5 minutes ago" / "refused this laptop 5 minutes ago", and why.
    function relayReach(r) {
      const when = r.lastAttemptMillis ? " " + ago(r.lastAttemptMillis) : "";
      if (r.reach === "reachable") return "Reachable" + (r.lastSuccessMillis ? ", last synced with this laptop " + ago(r.lastSuccessMillis) : "") + ".";
      if (r.reach === "refused") return "It refused this laptop" + when + (r.error ? ": " + humane(r.error) : "") + ".";
      if (r.reach === "unreachable") return "It was unreachable" + when + (r.error ? ": " + humane(r.error) : "") + ".";
      return "This laptop has not synced with it yet: it will within a minute while kidledger runs.";
    }
    // The relay's own trouble, for the list of laptops: null when it has none.
    function relayTrouble(r) {
      const when = r.lastAttemptMillis ? " " + ago(r.lastAttemptMillis) : "";
      if (r.reach === "refused") return "The relay refused this laptop" + when + ".";
      if (r.reach === "unreachable") return "The relay was unreachable" + when + ".";
      if (typeof r.outOfDate === "string" && r.outOfDate) return "The relay is out of date: " + humane(r.outOfDate);
      return null;
    }
    // Per other laptop: "Dad's laptop: via the relay, last synced 2 minutes ago" (its `.ago`
    // follows the clock with the direct lines), after that laptop's direct line when there is one.
    function relayRoutes() {
      const list = $("peers");
      for (const old of list.querySelectorAll("li.relay-route, li.relay-trouble")) old.remove();
      for (const r of relays()) {
        if (r.reach === "reachable" || r.lastSuccessMillis) for (const l of r.laptops || []) {
          if (l.route !== "relay" || !l.name) continue;
          const line = el("li", { class: "relay-route", "data-last": l.lastSyncMillis || 0 }, l.name + "'s laptop: via the relay, ",
            el("span", { class: "ago", text: l.lastSyncMillis ? "last synced " + ago(l.lastSyncMillis) : "never synced" }));
          const direct = [...list.querySelectorAll("li:not(.relay-route):not(.relay-trouble)")].reverse()
            .find(li => li.textContent.startsWith(l.name + "'s laptop"));
          if (direct) direct.after(line); else list.append(line);
        }
        const trouble = relayTrouble(r);
        if (trouble) list.append(el("li", { class: "relay-trouble", text: trouble }));
      }
      // Only the relay's lines: the laptops themselves are not there yet.
      const placeholder = [...list.children].find(li => !li.dataset.last && !li.classList.contains("relay-trouble"));
      if (placeholder && list.querySelector("li.relay-route")) placeholder.remove();
    }
    // Beside a `relayed` pill: who syncs through the relay, and when.
    function relayedDetail(s) {
      const seen = (name) => Math.max(0, ...relays().flatMap(r => (r.laptops || []).filter(l => l.name === name).map(l => l.lastSyncMillis || 0)));
      return (s.laptops || []).filter(l => l.state === "relayed").map(l => (l.name ? l.name + "'s laptop" : "the other laptop")
        + ": via the relay" + (seen(l.name) ? ", last synced " + ago(seen(l.name)) : "")).join("; ");
    }
    function relayLine(r, owner) {
      const fingerprint = el("span", { class: "relay-fingerprint", text: r.fingerprint });
      const what = el("span", { class: "relay-what" }, "The relay ", fingerprint, " at " + r.address + ". ",
        el("span", { class: "relay-reach", "data-fingerprint": r.fingerprint, text: relayReach(r) }),
        typeof r.outOfDate === "string" && r.outOfDate ? el("span", { class: "relay-trouble", text: " It is out of date: " + humane(r.outOfDate) }) : null);
      const line = el("li", { class: "relay", "data-key": "relay-" + r.fingerprint }, what);
      if (owner) line.append(el("button", { type: "button", class: "secondary relay-remove", text: "Remove the relay",
        "aria-label": "Remove the relay at " + r.address, onclick: () => removeRelay(r, line) }));
      return line;
    }
    async function removeRelay(r, line) {
      const question = "Remove the relay at " + r.address + "? It is told to carry nothing more for this family, and every laptop stops using it at its next sync: "
        + "the laptops then sync only when they reach each other directly. What it holds stays on it, sealed (it can read none of it); "
        + "wipe the relay machine to delete it. A removed relay can't be added again: to replace it, set up a new one and add its code.";
      if (!confirm(question)) return;
      if (await send("/api/relay/remove", { relay: r.fingerprint }, line.closest("section")))
        showCardMessage(line.closest("section") || $("relay"), "The relay is removed: the other laptops stop using it at their next sync.");
    }
    function relayAddForm() {
      const form = el("form", { id: "relay-form" },
        el("label", {}, "The relay's code (it starts with KLR1-; the relay machine shows it when it starts)",
          el("input", { name: "code", id: "relay-code", autocomplete: "off", spellcheck: "false", required: "", placeholder: "KLR1-…" })),
        el("button", { type: "submit", id: "relay-add-button", text: "Add the relay" }));
      form.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const button = form.querySelector("button");
        button.disabled = true;
        const r = await send("/api/relay/add", { code: form.code.value.trim() }, form);
        button.disabled = false;
        if (r) { form.code.value = ""; showCardMessage(form, "The relay is added: every laptop of the family learns it at its next sync and syncs through it when the laptops are apart."); }
      });
      return el("div", { class: "relay-add" }, el("h4", { id: "relay-add-title", text: "Add a relay" }),
        el("p", { class: "hint", text: "A relay is an always-on device the family controls, such as a small computer at a grandparent's home or a rented server. "
          + "It carries the family's sealed changes when the laptops are apart, and can read none of them." }), form);
    }
    function renderRelays() {
      const mine = me(), owner = !!(mine && mine.owner), list = relays();
      // Rebuilt when a relay, its reach or its trouble changed (its times follow in renderRelayTimes).
      const shape = JSON.stringify([owner, list.map(r => [r.fingerprint, r.address, r.reach, r.error, r.outOfDate])]);
      if ($("relays").dataset.shape !== shape) {
        $("relays").dataset.shape = shape;
        $("relays").replaceChildren(...(list.length ? list.map(r => relayLine(r, owner))
          : [el("li", { class: "hint", text: owner ? "No relay yet: the laptops sync only when they reach each other directly." : "No relay: the owner's page can add one." })]));
      }
      const add = $("relay-add");
      if (add.dataset.shape !== String(owner)) { add.dataset.shape = String(owner); add.replaceChildren(...(owner ? [relayAddForm()] : [])); }
      if ($("relay-add-title")) setText($("relay-add-title"), list.length ? "Add another relay" : "Add a relay");
      relayRoutes();
    }
    function renderRelayTimes() {
      for (const span of document.querySelectorAll("#relays .relay-reach")) {
        const r = relays().find(x => x.fingerprint === span.dataset.fingerprint);
        if (r) setText(span, relayReach(r));
      }
    }
    """#
}
