/// The page: HTML, CSS and JavaScript embedded in the binary (no CDN, no fonts, no build step).
/// The script talks to the JSON API of docs/UI.md only; the HTML carries the token for its POSTs.
public enum PageAssets {
    // long-function: one HTML document as one literal.
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
          <div class="sync-head">
            <p id="sync-pill" class="pill" role="status"><span class="sr">Sync status: </span><span id="sync">loading…</span></p>
            <p id="last-sync"></p>
          </div>
        </header>
        <main>
          <div id="setup" hidden></div>
          <div id="household-app">
          <p id="attention" role="alert" hidden></p>
          <p id="message" role="status" aria-live="polite"></p>
          <p id="warning" role="alert"></p>
          <p id="error" role="alert"></p>
          <section id="undo-bar" aria-label="undo" hidden>
            <span id="undo-preview"></span>
            <button id="undo" type="button" aria-describedby="undo-preview">Undo</button>
            <button id="undo-mine" type="button" class="secondary">Undo my last change</button>
          </section>
          <section id="children" aria-label="children" tabindex="-1"></section>
          <details id="family">
            <summary>Everyone at once, add a child, archived children<span id="archived-count"></span></summary>
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
            <div id="household-actions"></div>
            <div id="invite-box"></div>
            <section id="relay" aria-labelledby="relay-title"><h3 id="relay-title">Relay</h3><ul id="relays"></ul><div id="relay-add"></div></section>
          </details>
          <details id="settings">
            <summary>Settings: quick amounts on this laptop</summary>
            <form id="quick-form" class="row">
              <label>Quick amounts (up to six, e.g. 0.05 0.10 0.25 1) <input name="amounts" id="quick-input" autocomplete="off" required></label>
              <button type="submit">Save</button>
            </form>
            <p class="hint">Each laptop keeps its own buttons; they are never synced.</p>
          </details>
          <details id="zone-settings">
            <summary>Settings: the family's time zone</summary>
            <form id="zone-form" class="row">
              <label>Time zone <input name="zone" id="zone-input" list="zone-list" autocomplete="off" spellcheck="false" required></label>
              <datalist id="zone-list"></datalist>
              <button type="submit">Save</button>
            </form>
            <p class="hint" id="zone-hint">Allowance days start at midnight in this zone on every laptop, and times here are shown in it.</p>
          </details>
          <details id="limit-settings">
            <summary>Settings: ask before large amounts</summary>
            <form id="limit-form" class="row">
              <label>Ask before amounts above <input name="amount" id="limit-input" inputmode="decimal" autocomplete="off" required></label>
              <button type="submit">Save</button>
            </form>
            <p class="hint" id="limit-hint">A give or take above this amount asks first, on every laptop of the family. Type "never" to never ask.</p>
          </details>
          <p id="backup"><a href="/api/backup" download>Download a backup</a> of this laptop's ledger and keys. Keep it private: whoever holds it holds the ledger and can sign as this laptop.</p>
          <details id="sign-in">
            <summary>Signed in on this browser</summary>
            <p class="hint">This browser stays signed in for months. To sign in again later, open Kid Ledger from the applications menu.</p>
            <div class="row">
              <button id="sign-out" type="button" class="secondary">Sign out this browser</button>
              <button id="sign-out-all" type="button" class="secondary">Sign out every browser</button>
            </div>
          </details>
          </div>
          <div id="toast" class="toast" role="status" aria-live="polite" hidden></div>
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
    .pill.synced{background:#c9f0d2}.pill.pending{background:#fde9b6}.pill.offline{background:#e3e3e3}.pill.alone{background:#dfe7fb}.pill.attentionRequired{background:#f8c4c4}.pill.relayed{background:#cdeee3}
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
    .sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
    .sync-head{display:flex;flex-wrap:wrap;align-items:center;gap:.2em .8em}
    #last-sync{margin:0;font-size:.9em}
    #attention{background:#f8c4c4;color:#5a0d0d;border-radius:.8em;padding:.6em 1em;font-weight:600;margin:0 0 1em}
    #attention[hidden]{display:none}
    #warning{color:#8a4b00;font-weight:600;margin:.2em 0}
    #warning:empty{margin:0}
    .same-name{background:#fff1c2;border-radius:.4em;padding:.3em .6em;font-size:.92em;margin:.4em 0}
    .child-id{font-size:.7em;color:#555;font-weight:400;margin-left:.3em}
    .child h2 .name{overflow-wrap:anywhere}
    ol.history li{flex-wrap:wrap;align-items:center}
    ol.history button{min-height:2.2em;padding:.15em .6em;font-size:.9em}
    .set-aside{display:block;width:100%;color:#8a4b00;font-size:.9em}
    #sync-text p{margin:.3em 0}
    .same-name p{margin:0 0 .3em}
    .same-name button{min-height:2.2em;padding:.15em .7em}
    .merge-form{margin:.5em 0 0;padding:.5em 0 0;border-top:1px solid #e0c868}
    .merge-form fieldset{border:0;padding:0;margin:0;min-width:0}
    .merge-form legend{font-weight:600;padding:0}
    label.merge-choice{display:flex;align-items:center;gap:.5em;margin:.3em 0;font-size:1em;overflow-wrap:anywhere}
    .merge-choice input{width:1.3em;height:1.3em;flex:none;margin:0}
    .merge-what{margin:.4em 0}
    .merge-buttons{display:flex;flex-wrap:wrap;gap:.5em}
    .merge-buttons button{max-width:100%;overflow-wrap:anywhere}
    @media (max-width:420px){main{padding:.5em}.balance{font-size:2.2em}}
    """

    /// The script: renders the state, polls it every second (a 304 when nothing changed), posts
    /// changes with the token header, and shows the CLI's message or error.
    public static let script = #"""
    "use strict";
    const token = document.querySelector('meta[name="kidledger-token"]').content;
    let etag = null, state = null, busy = false, pendingFocus = null, dirty = false, lastError = "";
    const $ = (id) => document.getElementById(id);
    const words = { synced: "synced", pending: "changes pending", offline: "offline", alone: "only on this laptop", attentionRequired: "attention required",
      relayed: "synced through the relay" };
    const notesMax = 5;

    function money(cents) {
      const negative = cents < 0, abs = Math.abs(cents);
      const dollars = Math.floor(abs / 100), rest = abs % 100;
      return (negative ? "-" : "") + "$" + dollars.toLocaleString("en-US") + "." + String(rest).padStart(2, "0");
    }
    // "1.25" from 125: the amount as the CLI reads it, made with integer arithmetic only.
    function plain(cents) { return Math.floor(cents / 100) + "." + String(cents % 100).padStart(2, "0"); }
    function signed(cents) { return (cents > 0 ? "+" : "") + money(cents); }
    // "just now", "2 minutes ago", "3 hours ago", "5 days ago".
    function ago(millis) {
      const s = Math.max(0, Math.round((Date.now() - millis) / 1000));
      if (s < 45) return "just now";
      const m = Math.max(1, Math.round(s / 60));
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
    function setText(e, text) { if (e.textContent !== text) e.textContent = text; }
    function author(a) { return a && a.name ? a.name : (a && a.device ? "device " + a.device.slice(0, 8) : "?"); }
    function when(ms) { return new Date(ms).toLocaleString(undefined, zoneOptions()); }
    function shortId(id) { return String(id).replace(/-/g, "").slice(0, 8); }
    // The member who writes from a device (replica id), for conflicts.
    function deviceName(replicaId) {
      for (const m of (state.members && state.members.members) || []) if ((m.devices || []).includes(replicaId)) return m.name;
      return "device " + shortId(replicaId);
    }
    function limited(lines, more) {
      if (lines.length <= notesMax) return lines;
      return lines.slice(0, notesMax).concat([more(lines.length - notesMax)]);
    }

    async function post(path, fields) {
      if (busy) return null;
      busy = true;
      $("error").textContent = ""; $("warning").textContent = "";
      try {
        const r = await fetch(path, { method: "POST", credentials: "same-origin",
          headers: { "Content-Type": "application/x-www-form-urlencoded", "X-KidLedger-Token": token },
          body: new URLSearchParams(fields || {}).toString() });
        const body = await r.json();
        if (!r.ok) { $("message").textContent = ""; lastError = body.error ? body.error.message : ("error " + r.status); $("error").textContent = humane(lastError); return null; }
        $("message").textContent = humane(body.message || "Done.");
        // A take that leaves a balance below zero is written, with the CLI's warning.
        const warnings = (body.result && body.result.warnings) || [];
        $("warning").textContent = warnings.map(w => "Warning: " + w).join(" ");
        await refresh(true);
        return body.result || {};
      } catch (e) { lastError = "kidledger is not answering on this laptop: is it running?"; $("error").textContent = lastError; return null; }
      finally { busy = false; }
    }

    async function getJSON(path) {
      const r = await fetch(path, { credentials: "same-origin" });
      const b = await r.json();
      if (!r.ok) { $("error").textContent = humane(b.error ? b.error.message : "error " + r.status); return null; }
      return b.result;
    }

    async function refresh(force) {
      try {
        const r = await fetch("/api/state", { credentials: "same-origin", headers: (etag && !force) ? { "If-None-Match": etag } : {} });
        if (r.status === 304) { if (dirty) render(); else renderTimes(); return; }
        if (!r.ok) {
          if (await setupNeeded()) return;
          const b = await r.json().catch(() => null); $("error").textContent = humane(b && b.error ? b.error.message : "error " + r.status); return;
        }
        etag = r.headers.get("ETag");
        state = await r.json();
        hideSetup();
        render();
      } catch (e) { $("sync").textContent = "daemon not answering"; $("sync-pill").className = "pill offline"; }
    }

    // What an undo would reverse, from `undo --dry-run`'s document: amount, child(ren), note, author, time.
    function undoText(preview) {
      const u = preview.wouldUndo, all = preview.wouldUndoAll || [u], t = u.transaction;
      const what = all.length > 1 || t.source === "give-all" || t.source === "take-all"
        ? "the " + t.source + " of " + signed(t.amountCents) + " for " + all.length + (all.length === 1 ? " child" : " children")
          + " (" + all.map(e => e.childName).join(", ") + ")"
        : signed(t.amountCents) + " for " + u.childName;
      return "Undo " + what + (t.note ? " (\"" + t.note + "\")" : "") + ", made by " + author(u.author) + " on " + when(t.createdAtMillis) + "?";
    }

    // Undo one entry of the history: the CLI's preview first (`undo --dry-run ID`), then `undo ID`.
    async function undoEntry(id) {
      const preview = await getJSON("/api/undo-preview?id=" + encodeURIComponent(id));
      if (preview && confirm(undoText(preview))) { const r = await post("/api/undo", { id: preview.wouldUndo.transaction.id }); if (r) showUndone(r); }
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
      if (lo < 0) {
        const zero = document.createElementNS(ns, "line"), y = (h - 2 - (0 - lo) * (h - 4) / (hi - lo)).toFixed(1);
        zero.setAttribute("x1", "0"); zero.setAttribute("x2", String(w)); zero.setAttribute("y1", y); zero.setAttribute("y2", y);
        zero.setAttribute("stroke", "#a11"); zero.setAttribute("stroke-dasharray", "4 3"); zero.setAttribute("vector-effect", "non-scaling-stroke");
        svg.append(zero);
      }
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
        const what = signed(t.amountCents) + (t.note ? " " + t.note : "") + (e.reversed ? " (undone)" : "");
        const item = el("li", {}, el("span", { class: e.reversed ? "undone" : "", text: what }),
          el("span", { class: "hint", text: "by " + author(e.author) + ", " + when(t.createdAtMillis) }));
        if (!e.reversed && t.source !== "undo" && !t.reverses) {
          item.append(el("button", { type: "button", class: "secondary undo-entry", "data-key": "u" + t.id,
            "aria-label": "Undo " + signed(t.amountCents) + " for " + e.childName + " made by " + author(e.author) + " on " + when(t.createdAtMillis),
            text: "Undo", onclick: () => undoEntry(t.id) }));
        }
        for (const lost of e.conflicts || []) {
          item.append(el("span", { class: "set-aside", text: "Another version of this entry, by " + author(lost.author)
            + (lost.transaction ? " (" + signed(lost.transaction.amountCents) + ")" : "") + ", was set aside on every laptop." }));
        }
        target.append(item);
      }
      if (pendingFocus) { const again = target.querySelector('[data-key="' + CSS.escape(pendingFocus) + '"]'); if (again) { again.focus(); pendingFocus = null; } }
    }

    function childCard(c, quick, sameAs) {
      const card = el("article", { class: "child", "data-child-id": c.id, "aria-label": c.name });
      card.append(el("h2", {}, el("span", { class: "name", text: c.name }), sameAs ? el("span", { class: "child-id", text: "id " + shortId(c.id) }) : null,
        el("button", { type: "button", class: "secondary rename", "data-key": "r" + c.id, "aria-label": "Rename " + c.name, text: "Rename", onclick: () => renameForm(card, c) })));
      if (sameAs) {
        const note = el("div", { class: "same-name", role: "note" },
          el("p", { text: "Same name as " + sameAs.map(o => o.name + " (id " + shortId(o.id) + ")").join(" and ")
            + ": one child added on two laptops? Merge them into one (nothing is deleted), or rename one so each child has one name." }),
          el("button", { type: "button", class: "secondary merge-open", "data-key": "mo" + c.id, "aria-expanded": "false",
            "aria-label": "Merge… " + [c].concat(sameAs).map(o => o.name).join(" and ") + ": choose which to keep", text: "Merge…",
            onclick: () => openMerge(card, c) }));
        card.append(note);
        if (mergeDraft && mergeDraft.id === c.id) { note.append(mergeForm(card, c)); note.querySelector(".merge-open").setAttribute("aria-expanded", "true"); }
      }
      card.append(el("p", { class: "balance" + (c.balanceCents < 0 ? " negative" : "") }, el("span", { class: "sr", text: "Balance: " }),
        el("span", { class: "amount", text: money(c.balanceCents) })));
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
        el("button", { type: "submit", value: "give", class: "give", "data-key": "g" + c.id, "aria-label": "Give this amount to " + c.name, text: "Give" }),
        el("button", { type: "submit", value: "take", class: "secondary take", "data-key": "t" + c.id, "aria-label": "Take this amount from " + c.name, text: "Take" }));
      form.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const kind = ev.submitter ? ev.submitter.value : "give";
        if (!largeOK(kind, form.amount.value, c.name)) return;
        const ok = await send("/api/" + kind, { child: c.id, amount: form.amount.value, note: form.note.value }, form);
        if (ok) { form.amount.value = ""; form.note.value = ""; }
      });
      card.append(form);
      card.append(allowanceBox(c));
      const list = el("ol", { class: "history", "aria-label": c.name + "'s history" });
      const details = el("details", { class: "child-history" }, el("summary", { text: "History", "aria-label": c.name + "'s history" }), list);
      details.addEventListener("toggle", () => { if (details.open) loadHistory(details, c); });
      card.dataset.seen = c.balanceCents + "/" + c.transactionCount;
      card.append(details);
      card.append(el("button", { type: "button", class: "secondary archive", text: "Archive " + c.name,
        onclick: () => { if (confirm("Archive " + c.name + "? The history is kept and you can restore it.")) post("/api/child/archive", { child: c.id }); } }));
      // Every control keeps a key, so a keyboard user keeps their place when the cards are rebuilt.
      card.querySelectorAll("button, summary, input, select").forEach((e, i) => { if (!e.dataset.key) e.dataset.key = c.id + ":" + i; });
      return card;
    }

    // A card's balance, chart and open history, updated in place.
    function updateCard(card, c) {
      card.querySelector(".balance .amount").textContent = money(c.balanceCents);
      const merging = card.querySelector(".merge-form"); if (merging) fillMerge(merging);
      card.querySelector(".balance").classList.toggle("negative", c.balanceCents < 0);
      const old = card.querySelector("svg.chart"), svg = chart(c);
      if (old && svg) old.replaceWith(svg); else if (old) old.remove(); else if (svg) card.querySelector(".balance").after(svg);
      const seen = c.balanceCents + "/" + c.transactionCount;
      if (card.dataset.seen !== seen) {
        card.dataset.seen = seen;
        const details = card.querySelector("details.child-history");
        if (details.open) loadHistory(details, c);
      }
    }

    // How many entries each child's history shows (50, then 50 more at a time).
    const historyLimits = new Map();
    async function loadHistory(details, c) {
      const limit = historyLimits.get(c.id) || 50;
      const result = await getJSON("/api/history?child=" + encodeURIComponent(c.id) + "&limit=" + (limit + 1));
      if (!result) return;
      const list = result.transactions;
      historyList(list.slice(0, limit), details.querySelector("ol.history"));
      const old = details.querySelector("button.more"); if (old) old.remove();
      if (list.length > limit) details.append(el("button", { type: "button", class: "secondary more", "data-key": "m" + c.id,
        "aria-label": "Show older entries of " + c.name + "'s history", text: "Show older entries",
        onclick: async () => {
          historyLimits.set(c.id, limit + 50);
          await loadHistory(details, c);
          (details.querySelector("button.more") || details.querySelector("summary")).focus();
        } }));
    }

    function allowanceBox(c) {
      const schedules = (state.allowances && state.allowances.schedules) || [];
      const s = schedules.find(x => x.childId === c.id && x.active);
      const text = s ? money(s.amountCents) + " every " + s.every + " on " + s.on
        + (s.nextPaymentAtMillis ? ", next " + new Date(s.nextPaymentAtMillis).toLocaleDateString(undefined, zoneOptions()) : "") : "none";
      const every = el("select", { name: "every", "aria-label": "Allowance period for " + c.name },
        el("option", { value: "week", text: "week" }), el("option", { value: "month", text: "month" }));
      if (s) every.value = s.every;
      const form = el("form", { class: "row allowance-form" },
        el("label", {}, "Amount", el("input", { name: "amount", inputmode: "decimal", autocomplete: "off", value: s ? plain(s.amountCents) : "", "aria-label": "Allowance amount for " + c.name })),
        el("label", {}, "Every", every),
        el("label", {}, "On", el("input", { name: "on", autocomplete: "off", value: s ? s.on : "", placeholder: "monday, or 1 to 28", "aria-label": "Allowance day for " + c.name })),
        el("button", { type: "submit", class: "set-allowance", "data-key": "a" + c.id, "aria-label": "Set " + c.name + "'s allowance", text: "Set allowance" }));
      form.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const fields = { child: c.id, amount: form.amount.value, every: form.every.value };
        if (form.on.value) fields.on = form.on.value;
        await send("/api/allowance/set", fields, form);
      });
      const box = el("details", { class: "allowance" }, el("summary", { class: "allowance-summary", text: "Allowance: " + text }), form);
      if (s) box.append(el("button", { type: "button", class: "secondary stop-allowance", "data-key": "s" + c.id, text: "Stop " + c.name + "'s allowance",
        onclick: () => post("/api/allowance/stop", { child: c.id }) }));
      return box;
    }

    // Same-name children made one on the page: which child to keep (each with its balance and short
    // id), what will happen, then `child merge -- FROM INTO` by id for each of the others. The
    // question is kept across rebuilds of the cards (mergeDraft), so a change arriving from the
    // other laptop never closes it; its balances and words follow the state.
    let mergeDraft = null;   // { id: the card's child, keep: the child to keep }
    function sameGroup(id) {
      const byId = new Map(state.children.children.map(x => [x.id, x]));
      const group = (state.children.sameNames || []).find(g => g.includes(id)) || [];
      return group.map(x => byId.get(x)).filter(x => x && !x.archived && !x.mergedInto);
    }
    function focusKey(key) {
      const e = $("children").querySelector('[data-key="' + CSS.escape(key) + '"]');
      if (e) e.focus();
      return e;
    }
    // "Zoë's $2.00 and its history will count in Zoe's: …" in a parent's words.
    function mergeWhat(group, keepId) {
      const keep = group.find(x => x.id === keepId), others = group.filter(x => x.id !== keepId);
      if (!keep || !others.length) return "";
      // Names equal to the letter are told apart by their short ids.
      const who = (x) => group.some(y => y !== x && y.name === x.name) ? x.name + " (id " + shortId(x.id) + ")" : x.name;
      const total = group.reduce((sum, x) => sum + x.balanceCents, 0);
      const one = others.length === 1;
      const schedules = (state.allowances && state.allowances.schedules) || [];
      const stopping = others.filter(o => schedules.some(s => s.childId === o.id && s.active));
      return others.map(o => who(o) + "'s " + money(o.balanceCents)).join(" and ") + (one ? " and its history" : " and their histories")
        + " will count in " + who(keep) + "'s: " + who(keep) + " will have " + money(total) + ", on every laptop, and "
        + others.map(who).join(" and ") + (one ? " will no longer have a card of its own." : " will no longer have cards of their own.")
        + (stopping.length ? " " + stopping.map(o => who(o) + "'s allowance").join(" and ") + (stopping.length === 1 ? " stops." : " stop.") : "")
        + " Nothing is deleted, and it can be undone: Unmerge " + others.map(who).join(" and ") + ", on " + who(keep) + "'s card.";
    }
    // The question's words and balances from the state now.
    function fillMerge(form) {
      const group = sameGroup(form.dataset.childId), keepId = mergeDraft ? mergeDraft.keep : form.dataset.childId;
      for (const span of form.querySelectorAll(".merge-choice span")) {
        const x = group.find(y => y.id === span.dataset.id);
        if (x) setText(span, "Keep " + x.name + ": " + money(x.balanceCents) + ", id " + shortId(x.id));
      }
      const keep = group.find(x => x.id === keepId);
      setText(form.querySelector(".merge-what"), mergeWhat(group, keepId));
      setText(form.querySelector(".merge-confirm"), keep ? "Merge " + group.filter(x => x !== keep).map(x => x.name).join(" and ") + " into " + keep.name : "Merge");
    }
    function mergeForm(card, c) {
      const group = sameGroup(c.id);
      if (!mergeDraft || mergeDraft.id !== c.id || !group.some(x => x.id === mergeDraft.keep)) mergeDraft = { id: c.id, keep: c.id };
      const close = () => { mergeDraft = null; form.remove(); const b = focusKey("mo" + c.id); if (b) b.setAttribute("aria-expanded", "false"); };
      const what = el("p", { class: "merge-what", id: "merge-what-" + c.id, "aria-live": "polite" });
      const choices = el("fieldset", {}, el("legend", { text: "Which child to keep?" }));
      for (const x of group) {
        const radio = el("input", { type: "radio", name: "keep", value: x.id, "data-key": "mk" + c.id + x.id });
        radio.checked = x.id === mergeDraft.keep;
        radio.addEventListener("change", () => { if (radio.checked && mergeDraft) { mergeDraft.keep = x.id; fillMerge(form); } });
        choices.append(el("label", { class: "merge-choice" }, radio, el("span", { "data-id": x.id })));
      }
      const form = el("form", { class: "merge-form", "data-child-id": c.id, "aria-label": "Merge " + group.map(x => x.name).join(" and ") }, choices, what,
        el("div", { class: "merge-buttons" },
          el("button", { type: "submit", class: "merge-confirm", "data-key": "mc" + c.id, "aria-describedby": what.id }),
          el("button", { type: "button", class: "secondary merge-cancel", "data-key": "mx" + c.id, text: "Cancel", onclick: close })));
      form.addEventListener("keydown", (ev) => { if (ev.key === "Escape") { ev.preventDefault(); close(); } });
      form.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const keep = mergeDraft && mergeDraft.keep, all = sameGroup(c.id);
        if (!all.some(x => x.id === keep)) return;
        const said = [];
        for (const from of all.filter(x => x.id !== keep)) {
          if (!(await post("/api/child/merge", { from: from.id, into: keep }))) break;   // the CLI's refusal is shown
          said.push($("message").textContent);
        }
        if (!said.length) return;
        if (said.length > 1) $("message").textContent = said.join(" ");
        mergeDraft = null;
        render();
        focusKey("r" + keep);
      });
      fillMerge(form);
      return form;
    }
    function openMerge(card, c) {
      const open = card.querySelector(".merge-form");
      if (open) { const r = open.querySelector("input:checked"); if (r) r.focus(); return; }
      for (const other of $("children").querySelectorAll(".merge-form")) {
        other.remove();
        for (const b of $("children").querySelectorAll(".merge-open")) b.setAttribute("aria-expanded", "false");
      }
      mergeDraft = { id: c.id, keep: c.id };
      const form = mergeForm(card, c);
      card.querySelector(".same-name").append(form);
      card.querySelector(".merge-open").setAttribute("aria-expanded", "true");
      const r = form.querySelector("input:checked"); if (r) r.focus();
    }

    function renameForm(card, c) {
      const old = card.querySelector(".rename-form"); if (old) old.remove();
      const back = () => { const b = $("children").querySelector('[data-key="r' + CSS.escape(c.id) + '"]'); if (b) b.focus(); };
      const input = el("input", { name: "name", value: c.name, "aria-label": "New name for " + c.name, autocomplete: "off" });
      const form = el("form", { class: "row rename-form" }, el("label", {}, "New name", input), el("button", { type: "submit", text: "Save name" }),
        el("button", { type: "button", class: "secondary", text: "Cancel", onclick: () => { form.remove(); back(); } }));
      form.addEventListener("keydown", (ev) => { if (ev.key === "Escape") { form.remove(); back(); } });
      form.addEventListener("submit", async (ev) => { ev.preventDefault(); if (await send("/api/child/rename", { child: c.id, name: input.value }, form)) { form.remove(); render(); back(); } });
      card.querySelector("h2").after(form);
      input.focus(); input.select();
    }

    // The other laptops: the peers this laptop dials and the laptops that dial in (status's dialsIn).
    function laptops() {
      const s = state && state.status;
      return s ? (s.peers || []).concat(s.dialsIn || []) : [];
    }

    function lastSync() {
      return Math.max(0, ...laptops().map(p => p.lastSyncMillis || 0));
    }

    function renderTimes() {
      for (const li of document.querySelectorAll("#peers li[data-last]")) {
        const last = Number(li.dataset.last);
        li.querySelector(".ago").textContent = last ? "last synced " + ago(last) : "never synced";
      }
      $("last-sync").textContent = pillDetail();
      renderZone();
      renderLimit();
      renderRelayTimes();
    }

    // The family's time zone (`household timezone`): times are shown in it, and its control.
    function zoneOptions() {
      const z = state && state.zone && state.zone.effective;
      if (!z) return {};
      try { new Intl.DateTimeFormat(undefined, { timeZone: z }); return { timeZone: z }; } catch (e) { return {}; }
    }
    function renderZone() {
      const z = state.zone;
      if (!z) return;
      if (document.activeElement !== $("zone-input")) $("zone-input").value = z.effective;
      const now = new Date().toLocaleTimeString(undefined, Object.assign({ hour: "2-digit", minute: "2-digit" }, zoneOptions()));
      setText($("zone-hint"), "Now " + now + " in " + z.effective + (z.known ? "" : " (this laptop does not know " + z.timeZone + " yet, so it uses UTC)")
        + ". Allowance days start at midnight in this zone on every laptop, and times here are shown in it.");
    }
    function setUpZone() {
      if (Intl.supportedValuesOf) $("zone-list").replaceChildren(...Intl.supportedValuesOf("timeZone").map(z => el("option", { value: z })));
      $("zone-form").addEventListener("submit", (ev) => { ev.preventDefault(); send("/api/household/timezone", { zone: $("zone-input").value.trim() }, ev.target); });
    }

    // The words beside the pill, from the state `status` computed (never a second judgment here):
    // who is offline and since when, or the invitation to invite when the ledger is only here.
    function pillDetail() {
      const s = state && state.status;
      if (!s) return "";
      const name = l => l.name ? l.name + "'s laptop" : "the other laptop";
      if (s.state === "alone") return "Invite another laptop so the ledger is kept in two places.";
      if (s.state === "offline") return (s.laptops || []).filter(l => l.state === "offline").map(l => name(l) + ": last seen " + ago(l.lastSyncMillis)).join("; ");
      if (s.state === "relayed") return relayedDetail(s);
      if (s.state === "pending") return (s.laptops || []).filter(l => l.state !== "synced").map(l => "sending to " + name(l)).join("; ");
      const last = lastSync();
      return last ? "last sync " + ago(last) : "";
    }

    // The CLI's notes of `status` and `conflicts`, in words a parent reads.
    function notes(s) {
      const lines = [];
      if (s.joinInterrupted) lines.push("Joining the household did not finish on this laptop: ask the owner's page for a new code and join again.");
      if ((s.state === "pending" || s.state === "offline") && s.pendingChanges) lines.push(s.pendingChanges + (s.pendingChanges === 1 ? " change" : " changes") + " not yet on every laptop.");
      if (s.deferred) lines.push(s.deferred + " transaction(s) waiting for their child to arrive.");
      // A laptop of an older kidledger gets what it can read; the rest waits for its update.
      // (The versions in parentheses are for the terminal.)
      for (const o of s.olderLaptops || []) lines.push(humane(o.message.replace(/ \([^()]*\)$/, "")) + ". It gets everything else meanwhile.");
      for (const group of s.sameNames || []) {
        const names = group.map(id => { const c = state.children.children.find(x => x.id === id); return (c ? c.name : "?") + " (id " + shortId(id) + ")"; });
        lines.push(names.join(" and ") + " have the same name (added on two laptops?): merge them with Merge… on a card (nothing is deleted), or rename one so each child has one name.");
      }
      const k = state.conflicts || { fieldConflicts: [], transactionConflicts: s.conflicts, sameIdConflicts: s.sameIdConflicts || [] };
      lines.push(...limited((k.fieldConflicts || []).map(c => "Changed on two laptops at once: " + (c.name || "?") + "'s " + c.field + " \"" + c.loserValue + "\" (by "
        + deviceName(c.loserReplicaId) + ", " + when(c.loserAtMillis) + ") lost to \"" + c.winnerValue + "\" (by " + deviceName(c.winnerReplicaId) + ", "
        + when(c.winnerAtMillis) + "); every laptop keeps \"" + c.winnerValue + "\"."), n => "and " + n + " more changes made on two laptops at once."));
      if (k.transactionConflicts) lines.push(k.transactionConflicts + " conflicting cop" + (k.transactionConflicts === 1 ? "y" : "ies") + " of entries seen; the same copy was kept on every laptop.");
      lines.push(...limited((k.sameIdConflicts || []).map(c => (c.kind === "child" ? "A child was added twice with one id" : "An entry has two versions") + ": kept the one by "
        + author(c.kept.author) + ", set aside the one by " + author(c.lost.author) + "."), n => "and " + n + " more."));
      if (s.forged) lines.push(s.forged + " record(s) not signed by a member were refused.");
      return lines;
    }

    function render() {
      const children = state.children.children;
      const quick = state.quick ? state.quick.quickAmountsCents : [5, 10, 15, 20, 25, 50];
      const byId = new Map(children.map(c => [c.id, c]));
      const sameAs = new Map();
      for (const group of state.children.sameNames || []) for (const id of group) sameAs.set(id, group.filter(x => x !== id).map(x => byId.get(x)).filter(Boolean));
      const box = $("children");
      const active = children.filter(c => !c.archived && !c.mergedInto);  // a merged child counts in another's card
      // The cards are rebuilt only when what they are made of changed (children, names, quick
      // amounts, same names, allowances), and not while the user types or chooses in one: otherwise
      // each card's balance, chart and open history are updated in place, so a click is never lost.
      const shape = JSON.stringify([active.map(c => [c.id, c.name]), quick, state.children.sameNames, state.allowances]);
      const a = document.activeElement;
      const typing = a && box.contains(a) && (a.tagName === "INPUT" || a.tagName === "SELECT");
      if (shape === box.dataset.shape || (typing && box.dataset.shape)) {
        for (const card of box.querySelectorAll("article.child")) {
          const c = byId.get(card.dataset.childId);
          if (c) updateCard(card, c);
        }
        dirty = shape !== box.dataset.shape;
      } else {
        dirty = false;
        box.dataset.shape = shape;
        const open = new Set([...box.querySelectorAll("details[open]")].map(d => d.closest(".child").dataset.childId + " " + d.className));
        // A keyboard user keeps their place: the focused control is focused again after the rebuild.
        const key = a && box.contains(a) ? a.dataset.key : null;
        box.replaceChildren();
        if (!active.length) box.append(el("p", { text: "No children yet: add one under \"Everyone at once, add a child\"." }));
        for (const c of active) {
          const card = childCard(c, quick, sameAs.get(c.id));
          box.append(card);
          for (const d of card.querySelectorAll("details")) if (open.has(c.id + " " + d.className)) d.open = true;
        }
        if (key) {
          const again = box.querySelector('[data-key="' + CSS.escape(key) + '"]');
          if (again) again.focus(); else { pendingFocus = key; box.focus(); }
        }
      }
      const archived = children.filter(c => c.archived && !c.mergedInto);
      $("archived-count").textContent = archived.length ? " (" + archived.length + ")" : "";
      $("archived").replaceChildren(...(archived.length ? [el("h3", { text: "Archived children" })] : []), ...archived.map(c =>
        el("div", { class: "archived-child" }, el("span", { text: c.name + " " + money(c.balanceCents) }),
          el("button", { type: "button", class: "secondary restore", text: "Restore " + c.name, onclick: () => post("/api/child/restore", { child: c.id }) }))));
      const s = state.status;
      // Live regions are written only when their words change (a screen reader reads each change).
      setText($("sync"), s ? words[s.state] || s.state : "");
      $("sync-pill").className = "pill " + (s ? s.state : "");
      const attention = s && s.state === "attentionRequired";
      // A second household record signed by the owner's key (status's ownerKeyWarning) shows here too.
      const ownerKeyWarning = s && s.ownerKeyWarning ? humane(s.ownerKeyWarning) + "." : "";
      $("attention").hidden = !attention && !ownerKeyWarning;
      setText($("attention"), [attention ? "Changes and sync are stopped: " + (s.attentionReason || "attention required")
        + ". The balances below are this laptop's last known state and may be stale." : "", ownerKeyWarning].filter(t => t).join(" "));
      const lines = s ? notes(s) : [];
      $("sync-text").replaceChildren(...lines.map(l => el("p", { text: l })));
      $("sync-summary").textContent = "Sync, laptops and members" + (lines.length ? " (" + lines.length + (lines.length === 1 ? " note)" : " notes)") : "");
      if (state.page && state.page.household) { $("title").textContent = state.page.household.name; document.title = state.page.household.name + " · kidledger"; }
      const members = (state.members && state.members.members) || [];
      const owner = (key) => { const m = members.find(m => m.key === key); return m ? personName(m) + "'s laptop" : null; };
      const others = s ? s.peers.map(p => el("li", { "data-last": p.lastSyncMillis || 0 },
        (owner(p.memberKey) ? owner(p.memberKey) + " (" + p.address + ")" : p.address) + ": ", el("span", { class: "ago" }),
        p.sameDeviceAs ? el("span", { class: "hint", text: " (the same laptop as " + p.sameDeviceAs + ")" }) : null,
        p.lastError ? el("span", { class: "hint", text: " (last attempt failed: " + humane(p.lastError) + ")" }) : null,
        p.updateNeeded ? el("span", { class: "hint", text: " (" + humane(p.updateNeeded.replace(/ \([^()]*\)$/, "")) + ")" }) : null))
        .concat((s.dialsIn || []).map(d => el("li", { "data-last": d.lastSyncMillis || 0 },
          d.name + "'s laptop (dials in from " + d.host + "): ", el("span", { class: "ago" }),
          el("span", { class: "hint", text: " (it runs no daemon: it gets this laptop's changes when it next syncs)" }),
          d.updateNeeded ? el("span", { class: "hint", text: " (" + humane(d.updateNeeded.replace(/ \([^()]*\)$/, "")) + ")" }) : null))) : [];
      $("peers").replaceChildren(...others);
      const u = state.undo && state.undo.wouldUndo;
      $("undo-bar").hidden = !u;
      if (u) { $("undo-preview").textContent = undoText(state.undo); $("undo").dataset.id = u.transaction.id; }
      if (document.activeElement !== $("quick-input")) $("quick-input").value = quick.map(plain).join(" ");
      renderHousehold();
      renderRelays();
      renderTimes();
    }

    document.addEventListener("DOMContentLoaded", () => {
      // Undo what the preview shows (`undo ID`), even when a newer entry arrived since.
      $("undo").addEventListener("click", async () => { const r = await post("/api/undo", $("undo").dataset.id ? { id: $("undo").dataset.id } : {}); if (r) showUndone(r); });
      $("undo-mine").addEventListener("click", undoMine);
      $("all-form").addEventListener("submit", (ev) => {
        ev.preventDefault(); const f = ev.target, kind = ev.submitter ? ev.submitter.value : "give-all";
        if (largeOK(kind === "take-all" ? "take" : "give", f.amount.value, "every child")) send("/api/" + kind, { amount: f.amount.value, note: f.note.value }, f);
      });
      $("add-form").addEventListener("submit", async (ev) => { ev.preventDefault(); const input = ev.target.elements.namedItem("name"); if (await send("/api/child/add", { name: input.value }, ev.target)) input.value = ""; });
      $("quick-form").addEventListener("submit", (ev) => { ev.preventDefault(); send("/api/quick", { amounts: $("quick-input").value }, ev.target); });
      setUpZone();
      setUpLimit();
      refresh(true);
      setInterval(refresh, 1000);
    });

    // Sign-out (docs/UI.md, "Signing in"): the page server clears the cookie; "every browser"
    // replaces the page key first. Then the page reloads, signed out.
    async function signOut(path, question) {
      if (!confirm(question)) return;
      try {
        const r = await fetch(path, { method: "POST", credentials: "same-origin", headers: { "X-KidLedger-Token": token } });
        const b = await r.json().catch(() => null);
        if (!r.ok) { $("error").textContent = b && b.error ? b.error.message : "error " + r.status; return; }
      } catch (e) { $("error").textContent = "The daemon did not answer: is `kidledger serve` running?"; return; }
      location.replace("/");
    }
    document.addEventListener("DOMContentLoaded", () => {
      $("sign-out").addEventListener("click", () => signOut("/api/sign-out", "Sign out this browser? Open Kid Ledger from the applications menu to sign in again."));
      $("sign-out-all").addEventListener("click", () => signOut("/api/sign-out-all", "Sign out every browser on this laptop, this one too? Do this if someone else may have used the page."));
    });
    """#
}
