/// The page: HTML, CSS and JavaScript embedded in the binary (no CDN, no fonts, no build step).
/// The script talks to the JSON API of docs/UI.md only; the HTML carries the token for its POSTs.
public enum PageAssets {
    /// The HTML shell with `token` in a meta tag (only this origin can read it).
    public static func html(token: String) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="kidledger-token" content="\(HTTPResponse.escapeHTML(token))">
        <title>kidledger</title>
        <link rel="stylesheet" href="/app.css">
        <script src="/app.js" defer></script>
        </head>
        <body>
        <a class="skip" href="#children">Skip to the children</a>
        <header>
          <h1 id="title">kidledger</h1>
          <p id="sync" class="pill" role="status" aria-live="polite" aria-label="sync status">loading…</p>
        </header>
        <main>
          <p id="message" role="status" aria-live="polite"></p>
          <p id="error" role="alert"></p>
          <section id="undo-bar" aria-label="undo" hidden>
            <span id="undo-preview"></span>
            <button id="undo" type="button">Undo</button>
          </section>
          <section id="children" aria-label="children"></section>
          <details id="family">
            <summary>Everyone at once, add a child</summary>
            <form id="all-form" class="row">
              <label>Amount for every child <input name="amount" inputmode="decimal" autocomplete="off" required></label>
              <label>Note <input name="note" autocomplete="off"></label>
              <button type="submit" value="give-all">Give all</button>
              <button type="submit" value="take-all">Take all</button>
            </form>
            <form id="add-form" class="row">
              <label>New child's name <input name="name" autocomplete="off" required></label>
              <button type="submit">Add child</button>
            </form>
            <div id="archived"></div>
          </details>
          <details id="sync-details">
            <summary id="sync-summary">Sync, laptops and members</summary>
            <div id="sync-text"></div>
            <h3>Laptops (peers)</h3><ul id="peers"></ul>
            <h3>Members</h3><ul id="members"></ul>
            <p class="hint">Allowance schedules are not part of this version of kidledger yet.</p>
          </details>
          <details id="settings">
            <summary>Settings: quick amounts on this laptop</summary>
            <form id="quick-form" class="row">
              <label>Quick amounts (up to six, e.g. 0.05 0.10 0.25 1) <input name="amounts" id="quick-input" autocomplete="off" required></label>
              <button type="submit">Save</button>
            </form>
            <p class="hint">Each laptop keeps its own buttons; they are never synced.</p>
          </details>
        </main>
        </body>
        </html>
        """
    }

    /// The style sheet: large balances, big touch targets, one column from 360 px up.
    public static let style = """
    *{box-sizing:border-box}
    body{font:17px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2430;background:#f6f7fb}
    header{display:flex;flex-wrap:wrap;align-items:center;justify-content:space-between;gap:.5em;padding:.75em 1em;background:#2b4c7e;color:#fff}
    h1{font-size:1.3em;margin:0}
    main{max-width:60em;margin:0 auto;padding:1em}
    .skip{position:absolute;left:-999px}.skip:focus{left:1em;top:1em;background:#fff;padding:.5em;z-index:2}
    .pill{margin:0;padding:.2em .8em;border-radius:1em;background:#e8eef8;color:#1d2430;font-weight:600}
    .pill.synced{background:#c9f0d2}.pill.pending{background:#fde9b6}.pill.offline{background:#e3e3e3}.pill.attentionRequired{background:#f8c4c4}
    #children{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,18em),1fr));gap:1em}
    .child{background:#fff;border-radius:.8em;padding:1em;box-shadow:0 1px 3px #0002;min-width:0}
    .child h2{margin:0;font-size:1.2em;display:flex;justify-content:space-between;gap:.5em;align-items:baseline}
    .child h2 button{font-size:.75em;font-weight:400;min-height:2.2em}
    .balance{font-size:2.6em;font-weight:700;margin:.1em 0;font-variant-numeric:tabular-nums}
    .balance.negative{color:#a11}
    .quick{display:flex;flex-wrap:wrap;gap:.4em;margin:.4em 0}
    button{font:inherit;padding:.45em .8em;border-radius:.5em;border:1px solid #2b4c7e;background:#2b4c7e;color:#fff;cursor:pointer;min-height:2.5em}
    button.secondary{background:#fff;color:#2b4c7e}
    button:focus-visible,input:focus-visible,select:focus-visible,summary:focus-visible,a:focus-visible{outline:3px solid #f5a623;outline-offset:2px}
    input,select{font:inherit;padding:.4em;border:1px solid #8a94a6;border-radius:.4em;width:100%;min-width:0;background:#fff}
    form.row{display:flex;flex-wrap:wrap;gap:.5em;align-items:flex-end;margin:.5em 0}
    form.row label{flex:1 1 8em}
    label{display:block;font-size:.9em}
    details{background:#fff;border-radius:.8em;padding:.6em 1em;margin-top:1em;box-shadow:0 1px 3px #0002}
    .child details{box-shadow:none;padding:0;margin-top:.5em}
    summary{cursor:pointer;font-weight:600;min-height:2em}
    #message{color:#176b2c;font-weight:600;min-height:1.4em;margin:.2em 0}
    #error{color:#a11;font-weight:600;min-height:1.4em;margin:.2em 0}
    #message:empty,#error:empty{min-height:0;margin:0}
    #undo-bar{display:flex;flex-wrap:wrap;gap:.6em;align-items:center;background:#fff8e1;border-radius:.8em;padding:.6em 1em;margin-bottom:1em}
    #undo-bar[hidden]{display:none}
    ol.history{list-style:none;padding:0;margin:.3em 0;font-size:.92em}
    ol.history li{display:flex;justify-content:space-between;gap:.5em;border-bottom:1px solid #eee;padding:.2em 0}
    .undone{text-decoration:line-through;color:#777}
    .hint{color:#555;font-size:.9em}
    svg.chart{width:100%;height:3em;display:block}
    .archived-child{display:flex;justify-content:space-between;align-items:center;gap:.5em;margin:.3em 0}
    @media (max-width:420px){main{padding:.5em}.balance{font-size:2.2em}}
    """

    /// The script: renders the state, polls it every second (a 304 when nothing changed), posts
    /// changes with the token header, and shows the CLI's message or error.
    public static let script = #"""
    "use strict";
    const token = document.querySelector('meta[name="kidledger-token"]').content;
    let etag = null, state = null, busy = false;
    const $ = (id) => document.getElementById(id);
    const words = { synced: "synced", pending: "changes pending", offline: "offline", attentionRequired: "attention required" };

    function money(cents) {
      const negative = cents < 0, abs = Math.abs(cents);
      const dollars = Math.floor(abs / 100), rest = abs % 100;
      return (negative ? "-" : "") + "$" + dollars.toLocaleString("en-US") + "." + String(rest).padStart(2, "0");
    }
    // "1.25" from 125: the amount as the CLI reads it, made with integer arithmetic only.
    function plain(cents) { return Math.floor(cents / 100) + "." + String(cents % 100).padStart(2, "0"); }
    function signed(cents) { return (cents > 0 ? "+" : "") + money(cents); }
    function ago(millis) {
      const s = Math.max(0, Math.round((Date.now() - millis) / 1000));
      if (s < 45) return "just now";
      const m = Math.round(s / 60);
      if (m < 60) return m + (m === 1 ? " minute ago" : " minutes ago");
      const h = Math.round(m / 60);
      if (h < 36) return h + (h === 1 ? " hour ago" : " hours ago");
      const d = Math.round(h / 24);
      return d + (d === 1 ? " day ago" : " days ago");
    }
    function el(tag, attrs, ...children) {
      const e = document.createElement(tag);
      for (const [k, v] of Object.entries(attrs || {})) {
        if (k === "text") e.textContent = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
      }
      for (const c of children) if (c != null) e.append(c);
      return e;
    }
    function author(a) { return a && a.name ? a.name : (a && a.device ? "device " + a.device.slice(0, 8) : "?"); }
    function when(ms) { return new Date(ms).toLocaleString(); }

    async function post(path, fields) {
      if (busy) return null;
      busy = true;
      $("error").textContent = "";
      try {
        const r = await fetch(path, { method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/x-www-form-urlencoded", "X-KidLedger-Token": token },
          body: new URLSearchParams(fields || {}).toString() });
        const body = await r.json();
        if (!r.ok) { $("message").textContent = ""; $("error").textContent = body.error ? body.error.message : ("error " + r.status); return null; }
        $("message").textContent = body.message || "Done.";
        await refresh(true);
        return body.result;
      } catch (e) { $("error").textContent = "The daemon did not answer: is `kidledger serve` running?"; return null; }
      finally { busy = false; }
    }

    async function refresh(force) {
      try {
        const r = await fetch("/api/state", { credentials: "same-origin", headers: (etag && !force) ? { "If-None-Match": etag } : {} });
        if (r.status === 304) { renderTimes(); return; }
        if (!r.ok) { const b = await r.json().catch(() => null); $("error").textContent = b && b.error ? b.error.message : "error " + r.status; return; }
        etag = r.headers.get("ETag");
        state = await r.json();
        render();
      } catch (e) { $("sync").textContent = "daemon not answering"; $("sync").className = "pill offline"; }
    }

    function chart(child) {
      const entries = ((state.history && state.history.transactions) || []).filter(e => e.transaction.childId === child.id);
      const points = [child.balanceCents];
      let b = child.balanceCents;
      for (const e of entries) { b -= e.transaction.amountCents; points.push(b); }
      points.reverse();
      if (points.length < 2) return null;
      const lo = Math.min(...points, 0), hi = Math.max(...points, 1), w = 200, h = 40;
      const xy = points.map((p, i) => (i * w / (points.length - 1)).toFixed(1) + "," + (h - 2 - (p - lo) * (h - 4) / (hi - lo)).toFixed(1));
      const ns = "http://www.w3.org/2000/svg";
      const svg = document.createElementNS(ns, "svg");
      svg.setAttribute("viewBox", "0 0 " + w + " " + h); svg.setAttribute("class", "chart"); svg.setAttribute("preserveAspectRatio", "none");
      svg.setAttribute("role", "img"); svg.setAttribute("aria-label", child.name + "'s balance over the last " + (points.length - 1) + " entries, from " + money(points[0]) + " to " + money(child.balanceCents));
      const line = document.createElementNS(ns, "polyline");
      line.setAttribute("points", xy.join(" ")); line.setAttribute("fill", "none"); line.setAttribute("stroke", "#2b4c7e"); line.setAttribute("stroke-width", "2");
      line.setAttribute("vector-effect", "non-scaling-stroke");
      svg.append(line);
      return svg;
    }

    function historyList(list, target) {
      target.replaceChildren();
      if (!list.length) { target.append(el("li", { text: "No transactions yet." })); return; }
      for (const e of list) {
        const t = e.transaction;
        target.append(el("li", {}, el("span", { class: e.reversed ? "undone" : "", text: signed(t.amountCents) + (t.note ? " " + t.note : "") + (e.reversed ? " (undone)" : "") }),
          el("span", { class: "hint", text: "by " + author(e.author) + ", " + when(t.createdAtMillis) })));
      }
    }

    function childCard(c, quick) {
      const card = el("article", { class: "child", "data-child-id": c.id, "aria-label": c.name });
      card.append(el("h2", {}, el("span", { class: "name", text: c.name }),
        el("button", { type: "button", class: "secondary rename", "data-key": "r" + c.id, "aria-label": "Rename " + c.name, text: "Rename", onclick: () => renameForm(card, c) })));
      card.append(el("p", { class: "balance" + (c.balanceCents < 0 ? " negative" : ""), "aria-label": c.name + "'s balance " + money(c.balanceCents), text: money(c.balanceCents) }));
      const svg = chart(c); if (svg) card.append(svg);
      const row = el("div", { class: "quick", role: "group", "aria-label": "Quick amounts for " + c.name });
      for (const cents of quick) {
        row.append(el("button", { type: "button", class: "quick-give", "data-key": "q" + cents + c.id, "aria-label": "Give " + money(cents) + " to " + c.name, text: "+" + money(cents),
          onclick: () => post("/api/give", { child: c.id, amount: plain(cents), note: "" }) }));
      }
      card.append(row);
      const form = el("form", { class: "row other" },
        el("label", {}, "Amount", el("input", { name: "amount", inputmode: "decimal", autocomplete: "off", "aria-label": "Amount for " + c.name })),
        el("label", {}, "Note", el("input", { name: "note", autocomplete: "off", "aria-label": "Note for " + c.name })),
        el("button", { type: "submit", value: "give", class: "give", "data-key": "g" + c.id, text: "Give" }),
        el("button", { type: "submit", value: "take", class: "secondary take", "data-key": "t" + c.id, text: "Take" }));
      form.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const kind = ev.submitter ? ev.submitter.value : "give";
        const ok = await post("/api/" + kind, { child: c.id, amount: form.amount.value, note: form.note.value });
        if (ok) { form.amount.value = ""; form.note.value = ""; }
      });
      card.append(form);
      card.append(allowanceBox(c));
      const list = el("ol", { class: "history", "aria-label": c.name + "'s history" });
      const details = el("details", { class: "child-history" }, el("summary", { text: "History" }), list);
      details.addEventListener("toggle", async () => {
        if (!details.open) return;
        const r = await fetch("/api/history?child=" + encodeURIComponent(c.id) + "&limit=50", { credentials: "same-origin" });
        const b = await r.json();
        if (r.ok) historyList(b.result.transactions, list); else $("error").textContent = b.error.message;
      });
      card.append(details);
      card.append(el("button", { type: "button", class: "secondary archive", text: "Archive " + c.name,
        onclick: () => { if (confirm("Archive " + c.name + "? The history is kept and you can restore it.")) post("/api/child/archive", { child: c.id }); } }));
      return card;
    }

    function allowanceBox(c) {
      const schedules = (state.allowances && state.allowances.schedules) || [];
      const s = schedules.find(x => x.childId === c.id && x.active);
      const text = s ? money(s.amountCents) + " every " + s.every + " on " + s.on
        + (s.nextPaymentAtMillis ? ", next " + new Date(s.nextPaymentAtMillis).toLocaleDateString() : "") : "none";
      const every = el("select", { name: "every", "aria-label": "Allowance period for " + c.name },
        el("option", { value: "week", text: "week" }), el("option", { value: "month", text: "month" }));
      if (s) every.value = s.every;
      const form = el("form", { class: "row allowance-form" },
        el("label", {}, "Amount", el("input", { name: "amount", inputmode: "decimal", autocomplete: "off", value: s ? plain(s.amountCents) : "", "aria-label": "Allowance amount for " + c.name })),
        el("label", {}, "Every", every),
        el("label", {}, "On", el("input", { name: "on", autocomplete: "off", value: s ? s.on : "", placeholder: "monday, or 1 to 28", "aria-label": "Allowance day for " + c.name })),
        el("button", { type: "submit", class: "set-allowance", "data-key": "a" + c.id, text: "Set allowance" }));
      form.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const fields = { child: c.id, amount: form.amount.value, every: form.every.value };
        if (form.on.value) fields.on = form.on.value;
        await post("/api/allowance/set", fields);
      });
      const box = el("details", { class: "allowance" }, el("summary", { class: "allowance-summary", text: "Allowance: " + text }), form);
      if (s) box.append(el("button", { type: "button", class: "secondary stop-allowance", "data-key": "s" + c.id, text: "Stop " + c.name + "'s allowance",
        onclick: () => post("/api/allowance/stop", { child: c.id }) }));
      return box;
    }

    function renameForm(card, c) {
      const input = el("input", { name: "name", value: c.name, "aria-label": "New name for " + c.name, autocomplete: "off" });
      const form = el("form", { class: "row rename-form" }, el("label", {}, "New name", input), el("button", { type: "submit", text: "Save name" }),
        el("button", { type: "button", class: "secondary", text: "Cancel", onclick: () => form.remove() }));
      form.addEventListener("submit", async (ev) => { ev.preventDefault(); if (await post("/api/child/rename", { child: c.id, name: input.value })) form.remove(); });
      card.querySelector("h2").after(form);
      input.focus(); input.select();
    }

    function renderTimes() {
      for (const li of document.querySelectorAll("#peers li[data-last]")) {
        const last = Number(li.dataset.last);
        li.querySelector(".ago").textContent = last ? "last synced " + ago(last) : "never synced";
      }
    }

    function render() {
      const children = state.children.children;
      const quick = state.quick ? state.quick.quickAmountsCents : [5, 10, 15, 20, 25, 50];
      const box = $("children");
      // Keep open forms and history panels: rebuild only when not typing in a card.
      const focused = document.activeElement && box.contains(document.activeElement) && document.activeElement.tagName === "INPUT";
      if (!focused) {
        const open = new Set([...box.querySelectorAll("details[open]")].map(d => d.closest(".child").dataset.childId));
        // A keyboard user keeps their place: the focused button is focused again after the rebuild.
        const key = document.activeElement && box.contains(document.activeElement) ? document.activeElement.dataset.key : null;
        box.replaceChildren();
        const active = children.filter(c => !c.archived && !c.mergedInto);  // a merged child counts in another's card
        if (!active.length) box.append(el("p", { text: "No children yet: add one under \"Everyone at once, add a child\"." }));
        for (const c of active) {
          const card = childCard(c, quick);
          box.append(card);
          if (open.has(c.id)) { const d = card.querySelector("details"); d.open = true; }
        }
        if (key) { const again = box.querySelector('[data-key="' + CSS.escape(key) + '"]'); if (again) again.focus(); }
      }
      const archived = children.filter(c => c.archived && !c.mergedInto);
      $("archived").replaceChildren(...(archived.length ? [el("h3", { text: "Archived children" })] : []), ...archived.map(c =>
        el("div", { class: "archived-child" }, el("span", { text: c.name + " " + money(c.balanceCents) }),
          el("button", { type: "button", class: "secondary restore", text: "Restore " + c.name, onclick: () => post("/api/child/restore", { child: c.id }) }))));
      const s = state.status;
      $("sync").textContent = s ? words[s.state] || s.state : "";
      $("sync").className = "pill " + (s ? s.state : "");
      const lines = [];
      if (s) {
        if (s.attentionReason) lines.push("Changes and sync are stopped: " + s.attentionReason);
        if (s.pendingChanges && s.state !== "synced") lines.push(s.pendingChanges + " change(s) not yet on every laptop.");
        if (s.deferred) lines.push(s.deferred + " transaction(s) waiting for their child to arrive.");
        if (s.conflicts) lines.push(s.conflicts + " conflicting cop" + (s.conflicts === 1 ? "y" : "ies") + " seen (`kidledger conflicts` lists them).");
        for (const c of s.sameIdConflicts || []) lines.push((c.kind === "child" ? "A child was added twice with one id" : "An entry has two versions") + ": kept the one by " + author(c.kept.author) + ", set aside the one by " + author(c.lost.author) + ".");
      }
      $("sync-text").replaceChildren(...lines.map(l => el("p", { text: l })));
      if (state.page && state.page.household) { $("title").textContent = state.page.household.name; document.title = state.page.household.name + " · kidledger"; }
      $("peers").replaceChildren(...(s && s.peers.length ? s.peers.map(p => el("li", { "data-last": p.lastSyncMillis || 0 },
        p.address + ": ", el("span", { class: "ago" }), p.lastError ? el("span", { class: "hint", text: " (last attempt failed: " + p.lastError + ")" }) : null))
        : [el("li", { text: "No other laptop yet (kidledger invite / join)." })]));
      const dup = new Map();
      for (const c of children.filter(c => !c.archived && !c.mergedInto)) { const k = c.name.toLowerCase(); dup.set(k, (dup.get(k) || 0) + 1); }
      for (const [name, n] of dup) if (n > 1) $("sync-text").append(el("p", { text: "Two children are named \"" + name + "\" (perhaps added on two laptops): rename one, or make them one with `kidledger child merge`." }));
      const notes = $("sync-text").children.length;
      $("sync-summary").textContent = "Sync, laptops and members" + (notes ? " (" + notes + (notes === 1 ? " note)" : " notes)") : "");
      $("members").replaceChildren(...((state.members && state.members.members) || []).map(m => el("li", {
        text: m.name + " (" + m.fingerprint + ")" + (m.owner ? ", owner" : "") + (m.revoked ? ", revoked" : "") })));
      const u = state.undo && state.undo.wouldUndo;
      $("undo-bar").hidden = !u;
      const all = (state.undo && state.undo.wouldUndoAll) || [];
      if (u) $("undo-preview").textContent = "Undo " + (all.length > 1 ? "the " + u.transaction.source + " of " + signed(u.transaction.amountCents) + " for " + all.length + " children" : signed(u.transaction.amountCents) + " for " + u.childName) + (u.transaction.note ? " (\"" + u.transaction.note + "\")" : "") + ", made by " + author(u.author) + " on " + when(u.transaction.createdAtMillis) + "?";
      if (document.activeElement !== $("quick-input")) $("quick-input").value = quick.map(plain).join(" ");
      renderTimes();
    }

    document.addEventListener("DOMContentLoaded", () => {
      $("undo").addEventListener("click", () => post("/api/undo", {}));
      $("all-form").addEventListener("submit", (ev) => { ev.preventDefault(); const f = ev.target; post("/api/" + (ev.submitter ? ev.submitter.value : "give-all"), { amount: f.amount.value, note: f.note.value }); });
      $("add-form").addEventListener("submit", async (ev) => { ev.preventDefault(); const input = ev.target.elements.namedItem("name"); if (await post("/api/child/add", { name: input.value })) input.value = ""; });
      $("quick-form").addEventListener("submit", (ev) => { ev.preventDefault(); post("/api/quick", { amounts: $("quick-input").value }); });
      refresh(true);
      setInterval(refresh, 1000);
    });
    """#
}
