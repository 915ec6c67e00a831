/// The page's household parts (issue 41), apart from the home screen's script so the two merge
/// easily: start or join a household, the recovery secret and its check, invite the other
/// laptop (short code and QR code), the members (rename yourself, revoke, recover ownership), the
/// attention banner's button, unmerge, merge into any child, undo --mine and "Undone — give it
/// back", errors next to their field, successes next to their card, and the question before an
/// unusually large amount. Served after ``script`` in one `app.js`; it uses that script's helpers
/// (`$`, `el`, `post`, `money`, `state`).
extension PageAssets {
    /// The style of the household parts.
    public static let householdStyle = """
    #setup{max-width:40em;margin:0 auto}
    #setup[hidden],#household-app[hidden]{display:none}
    .panel{background:#fff;border-radius:.8em;padding:1em;margin:0 0 1em;box-shadow:0 1px 3px #0002}
    .panel h2{margin:0 0 .4em;font-size:1.25em}
    .panel form{display:flex;flex-direction:column;gap:.6em;align-items:stretch}
    .panel form button{align-self:flex-start}
    .secret{font:600 1.15em/1.6 ui-monospace,monospace;letter-spacing:.05em;background:#f6f7fb;border:2px dashed #2b4c7e;border-radius:.5em;padding:.6em;word-spacing:.4em;overflow-wrap:anywhere}
    .field-error{color:#a11;font-weight:600;margin:.2em 0 0;font-size:.95em}
    input[aria-invalid="true"],select[aria-invalid="true"]{border:2px solid #a11;background:#fff5f5}
    .card-message{color:#176b2c;font-weight:600;margin:.3em 0;font-size:.95em}
    .card-message:empty{display:none}
    .short-code{font:700 1.8em/1.2 ui-monospace,monospace;letter-spacing:.08em;margin:.2em 0}
    .qr{width:12em;max-width:100%;height:auto;image-rendering:pixelated;display:block;margin:.5em 0}
    .member{display:flex;flex-wrap:wrap;gap:.4em .8em;align-items:center;margin:.3em 0}
    .member .who{flex:1 1 10em;overflow-wrap:anywhere}
    .toast{position:fixed;left:50%;bottom:1em;transform:translateX(-50%);background:#1d2430;color:#fff;border-radius:.6em;padding:.6em 1em;display:flex;gap:.8em;align-items:center;z-index:3;max-width:calc(100% - 2em)}
    .toast[hidden]{display:none}
    .toast button{background:#fff;color:#1d2430}
    .toast span,.toast button{white-space:nowrap}
    #attention button{margin:.5em 0 0;display:block;background:#fff;color:#5a0d0d;border-color:#5a0d0d}
    .merged-note{font-size:.92em;margin:.4em 0}
    .merged-note button,.merge-any button{min-height:2.2em;padding:.15em .7em}
    @media print{body *{visibility:hidden}#secret-box,#secret-box *{visibility:visible}#secret-box{position:absolute;left:0;top:0;box-shadow:none}#secret-box button,#secret-box form{display:none}}
    """

    /// The script of the household parts (after ``script``, in the same file).
    public static let householdScript = #"""

    // ---- Household: start, join, invite, members, recovery (issue 41) ----
    let setupShown = false, secretShown = null, inviteOpen = null, knownMembers = null, toastTimer = null;

    // The CLI's words made a parent's: no command, no flag.
    const actions = [
      [/\s*\(`kidledger child rename [^`]*` renames the archived one\)/g, ""],
      [/`kidledger init[^`]*`/g, "Start a household"], [/`kidledger join[^`]*`/g, "Join a household"],
      [/`kidledger invite[^`]*`/g, "Invite the other laptop"], [/`kidledger account switch ([^`]*)`/g, "the button Switch back to $1"],
      [/`kidledger child restore ([^`]*)`/g, "Restore $1 under \"Everyone at once, add a child, archived children\""],
      [/`kidledger child unmerge ([^`]*)`/g, "Unmerge on the card"], [/`kidledger recover[^`]*`/g, "Recover ownership"],
      [/\brun recover\b/g, "recover ownership with the paper secret (The owner's laptop is lost? Recover ownership, on a member's page)"],
      [/`kidledger revoke[^`]*`/g, "Revoke"], [/`kidledger serve[^`]*`/g, "the kidledger service"],
      [/`kidledger service install[^`]*`/g, "the kidledger service"], [/`kidledger [^`]*`/g, "the page"],
    ];
    const flags = { on: "the day", every: "the period", note: "the note", name: "your name", amount: "the amount", minutes: "the time" };
    function humane(message) {
      let m = String(message || "");
      m = m.replace(/^--on (\S+): /, "Day $1: ");
      m = m.replace(/--([a-z][a-z-]*)\b/g, (all, f) => flags[f] || "that");
      for (const [re, words] of actions) m = m.replace(re, words);
      m = m.replace(/\(see the page[^)]*\)/g, "").replace(/run the page/g, "use the page").replace(/\s+\./g, ".");
      // A member's key fingerprint (people are named, never shown as fingerprints).
      m = m.replace(/\s*\(?\b(key )?[0-9a-f]{4}(-[0-9a-f]{4}){3,}\b\)?/gi, "");
      return m.charAt(0).toUpperCase() + m.slice(1);
    }
    // The field a message is about: the flag it names, else the amount, a name, a code, a secret.
    function fieldFor(form, message) {
      if (!form || !form.elements) return null;
      const named = (n) => form.elements.namedItem(n);
      const flag = /--([a-z][a-z-]*)/.exec(message || "");
      if (flag && named(flag[1])) return named(flag[1]);
      const tests = [["amount", /amount|cent|\$|fraction|number|dollar|quarter|too large|overflow/i], ["secret", /secret/i],
        ["code", /code|invitation/i], ["yourName", /your name|display name|member/i], ["name", /name/i], ["amounts", /quick|amount/i]];
      for (const [n, re] of tests) if (named(n) && re.test(message)) return named(n);
      return form.querySelector("input, select");
    }
    function clearFieldErrors(form) {
      if (!form || !form.querySelectorAll) return;
      for (const e of form.querySelectorAll("[aria-invalid]")) { e.removeAttribute("aria-invalid"); e.removeAttribute("aria-describedby"); }
      for (const e of form.querySelectorAll(".field-error")) e.remove();
    }
    let errorIds = 0;
    // The error next to the field that caused it; the field marked invalid and described by it.
    function showFieldError(form, message) {
      clearFieldErrors(form);
      const field = fieldFor(form, message), text = humane(message);
      if (!field) { $("error").textContent = text; return; }
      const p = el("p", { class: "field-error", id: "field-error-" + (++errorIds), role: "alert", text });
      field.setAttribute("aria-invalid", "true");
      field.setAttribute("aria-describedby", p.id);
      (field.closest("label") || field).after(p);
      field.focus();
    }
    // The success next to the card (or form) it is about.
    function showCardMessage(form, message) {
      const home = form && form.closest ? (form.closest("article.child") || form.closest(".panel") || form) : null;
      if (!home) return;
      let p = home.querySelector(":scope > .card-message");
      if (!p) { p = el("p", { class: "card-message", role: "status" }); home.append(p); }
      p.textContent = humane(message || "Done.");
    }
    // post() with its error at the field and its success at the card.
    async function send(path, fields, form) {
      clearFieldErrors(form);
      const before = $("error").textContent;
      const result = await post(path, fields);
      if (!result) {
        const message = $("error").textContent;
        if (message && message !== before) { $("error").textContent = ""; showFieldError(form, message); }
        return null;
      }
      const message = $("message").textContent;
      if (form) { $("message").textContent = ""; showCardMessage(form, message); }
      return result;
    }
    // Cents from what a parent typed ("1,500", "$12.50"), for the question only: the CLI reads it.
    function roughCents(text) {
      const m = /^\s*\$?\s*([0-9][0-9,]*)(?:\.([0-9]{1,2}))?\s*$/.exec(String(text || ""));
      if (!m) return null;
      return Number(m[1].replace(/,/g, "")) * 100 + (m[2] ? Number(m[2].padEnd(2, "0")) : 0);
    }
    // The household's limit for asking first (`household limit`, on every laptop; 0: never ask).
    function limitCents() {
      const c = state && state.quick ? state.quick.confirmAboveCents : null;
      return typeof c === "number" ? c : 100000;
    }
    // An unusually large amount asks first.
    function largeOK(kind, amountText, who) {
      const cents = roughCents(amountText);
      const limit = limitCents();
      if (cents == null || limit === 0 || cents <= limit) return true;
      return confirm((kind === "take" ? "Take " : "Give ") + money(cents) + (kind === "take" ? " from " : " to ") + who + "? That is more than "
        + money(limit) + ", the household's limit for asking first.");
    }
    function renderLimit() {
      const limit = limitCents();
      if (document.activeElement !== $("limit-input")) $("limit-input").value = limit === 0 ? "never" : plain(limit);
      setText($("limit-hint"), (limit === 0 ? "The page never asks before a give or take." : "A give or take above " + money(limit) + " asks first.")
        + " This is the family's setting: it applies on every laptop. Type \"never\" to never ask.");
    }
    function setUpLimit() {
      $("limit-form").addEventListener("submit", (ev) => { ev.preventDefault(); send("/api/household/limit", { amount: $("limit-input").value.trim() }, ev.target); });
    }

    // ---- Before there is a household: Start or Join ----
    async function setupNeeded() {
      try {
        const r = await fetch("/api/account", { credentials: "same-origin" });
        if (r.status === 503) return setupShown;
        const b = await r.json();
        if (!r.ok || !b.result || b.result.household) return false;
        showSetup(b.result);
        return true;
      } catch (e) { return false; }
    }
    function showSetup() {
      $("household-app").hidden = true;
      $("setup").hidden = false;
      $("sync").textContent = "no household yet"; $("sync-pill").className = "pill";
      if (setupShown) return;
      setupShown = true;
      const start = el("form", { id: "start-form", "aria-labelledby": "start-title" },
        el("label", {}, "The household's name", el("input", { name: "name", autocomplete: "off", required: "", placeholder: "The Millers" })),
        el("label", {}, "Your name (what the family calls you)", el("input", { name: "yourName", autocomplete: "off", required: "", placeholder: "Mom" })),
        el("button", { type: "submit", id: "start-household", text: "Start a household" }));
      start.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const r = await send("/api/household/start", { name: start.name.value, yourName: start.yourName.value }, start);
        if (r && r.recoverySecret) showSecret(r);
      });
      const join = el("form", { id: "join-form", "aria-labelledby": "join-title" },
        el("label", {}, "The code the other laptop shows (Invite the other laptop, on its page)",
          el("input", { name: "code", autocomplete: "off", required: "", placeholder: "ABCD-EFGH-JKMN", autocapitalize: "characters", spellcheck: "false" })),
        el("label", {}, "Your name (what the family calls you)", el("input", { name: "yourName", autocomplete: "off", placeholder: "Dad" })),
        el("button", { type: "submit", id: "join-household", text: "Join" }),
        el("p", { class: "hint", text: "On the same home network, type the short code: it can take up to half a minute to find the other laptop. From another network, paste the long code instead: with a relay added to the household, it joins through the relay (up to a minute)." }));
      join.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const fields = { code: join.code.value };
        if (join.yourName.value) fields.yourName = join.yourName.value;
        join.querySelector("button").disabled = true;
        const status = el("p", { class: "hint", role: "status", text: "Looking for the other laptop…" });
        join.append(status);
        const r = await send("/api/household/join", fields, join);
        status.remove();
        join.querySelector("button").disabled = false;
        if (r) showJoined(r);
      });
      $("setup").replaceChildren(
        el("section", { class: "panel", id: "start-panel" }, el("h2", { id: "start-title", text: "Start a household" }),
          el("p", { text: "For the first laptop of the family: you will own the household and invite the other laptops." }), start),
        el("section", { class: "panel", id: "join-panel" }, el("h2", { id: "join-title", text: "Join a household" }),
          el("p", { text: "For another laptop: on the first laptop's page, choose Invite the other laptop and type the code it shows here." }), join));
    }
    function hideSetup() {
      if (secretShown) return;      // the recovery secret stays until it was written back
      $("setup").hidden = true;
      $("household-app").hidden = false;
      setupShown = false;
    }
    // The recovery secret, once, with a print view; two of its groups asked back before going on.
    function showSecret(r) {
      const groups = r.recoverySecret.split(/[\s-]+/).filter(Boolean);
      const pick = [1 + Math.floor(Math.random() * (groups.length / 2)), Math.floor(groups.length / 2) + 1 + Math.floor(Math.random() * (groups.length / 2 - 1))];
      secretShown = { groups, pick };
      const check = el("form", { id: "secret-check" },
        el("p", { text: "To be sure it is written down, type two of its groups from your paper:" }),
        el("label", {}, "Group " + pick[0], el("input", { name: "first", autocomplete: "off", spellcheck: "false", required: "" })),
        el("label", {}, "Group " + pick[1], el("input", { name: "second", autocomplete: "off", spellcheck: "false", required: "" })),
        el("button", { type: "submit", id: "secret-done", text: "I wrote it down: continue" }));
      check.addEventListener("submit", (ev) => {
        ev.preventDefault();
        clearFieldErrors(check);
        const same = (a, b) => a.trim().toUpperCase().replace(/[^0-9A-Z]/g, "") === b.toUpperCase().replace(/[^0-9A-Z]/g, "");
        if (!same(check.first.value, groups[pick[0] - 1])) return showFieldError(check, "Group " + pick[0] + " does not match the secret: check your paper (first field)", check.first);
        if (!same(check.second.value, groups[pick[1] - 1])) {
          clearFieldErrors(check);
          const p = el("p", { class: "field-error", id: "field-error-" + (++errorIds), role: "alert", text: "Group " + pick[1] + " does not match the secret: check your paper." });
          check.second.setAttribute("aria-invalid", "true"); check.second.setAttribute("aria-describedby", p.id);
          check.second.closest("label").after(p); check.second.focus();
          return;
        }
        secretShown = null;
        $("setup").replaceChildren();
        hideSetup();
        $("message").textContent = "The household \"" + r.name + "\" is ready. Add the children, then invite the other laptop (under Sync, laptops and members).";
        refresh(true);
      });
      const list = el("ol", { class: "secret", id: "secret-groups", "aria-label": "Recovery secret, " + groups.length + " groups" });
      list.style.listStyle = "none"; list.style.display = "flex"; list.style.flexWrap = "wrap"; list.style.gap = ".2em .8em";
      groups.forEach((g, i) => list.append(el("li", { text: g, title: "group " + (i + 1) })));
      $("setup").replaceChildren(el("section", { class: "panel", id: "secret-box" },
        el("h2", { text: "The household's recovery secret" }),
        el("p", { text: "Write it on paper and keep it away from this laptop. It is shown only now. If this laptop is ever lost or stolen, "
          + "type it on another member's laptop (Recover ownership, on its page): that laptop becomes the owner and can shut this one out." }),
        list,
        el("button", { type: "button", class: "secondary", id: "print-secret", text: "Print it", onclick: () => window.print() }),
        check));
      $("setup").hidden = false; $("household-app").hidden = true;
      check.first.focus();
    }
    function showJoined(r) {
      $("setup").replaceChildren();
      hideSetup();
      $("message").textContent = "Joined \"" + (r.household ? r.household.name : "the household") + "\"." + (r.ownerFingerprint ? " The inviting laptop's fingerprint was " + r.ownerFingerprint + ": it matches what its page showed under Invite the other laptop." : "");
      refresh(true);
    }

    // ---- With a household: members, invite, recovery, attention ----
    // A member whose chosen name has not arrived yet is named by its invitation ("member 1a2b-…"):
    // people are never shown by fingerprint.
    function placeholder(m) { return !m.chosenName && /^member [0-9a-f]{4}-/.test(m.name || ""); }
    function personName(m) { return placeholder(m) ? "A new member" : m.name; }
    function me() {
      const account = state && state.account;
      const members = (state && state.members && state.members.members) || [];
      return account ? members.find(m => m.key === account.key) : null;
    }
    function attentionButton(s) {
      const box = $("attention");
      const old = box.querySelector("button"); if (old) old.remove();
      const account = state && state.account;
      if (!s || s.state !== "attentionRequired" || !account) return;
      const reason = s.attentionReason || "";
      const why = humane(reason.replace(/[;.]?\s*Switch back with.*$/, ""));
      box.textContent = (/stopped/.test(reason) ? why : "Changes and sync are stopped: " + why) + ". The balances below are this laptop's last known state and may be stale.";
      if (account.memberAccount && account.memberAccount !== account.account) {
        box.append(el("button", { type: "button", id: "switch-back", text: "Switch back to " + account.memberAccount,
          onclick: async () => { if (await post("/api/account/switch", { account: account.memberAccount })) $("message").textContent = "Signed in again as " + account.memberAccount + ": changes and sync go on."; } }));
      }
    }
    function memberLine(m, mine, owner) {
      const what = [m.owner ? "owner" : "", m.formerOwner ? "former owner" : "", m.revoked ? "shut out" : "", mine ? "you" : ""].filter(Boolean).join(", ");
      const line = el("li", { class: "member", "data-key": "member-" + m.key }, el("span", { class: "who", text: personName(m) + (what ? " (" + what + ")" : "") }));
      if (mine && !m.revoked) line.append(el("button", { type: "button", class: "secondary rename-me", text: "Change your name", onclick: () => renameMe(line, m) }));
      if (owner && !mine && !m.owner && !m.revoked) line.append(el("button", { type: "button", class: "secondary revoke", "aria-label": "Revoke " + m.name, text: "Revoke " + m.name,
        onclick: () => revoke(m) }));
      return line;
    }
    function renameMe(line, m) {
      if (line.querySelector("form")) return;
      const input = el("input", { name: "name", value: m.name, autocomplete: "off", "aria-label": "Your name" });
      const form = el("form", { class: "row" }, el("label", {}, "Your name", input), el("button", { type: "submit", text: "Save" }),
        el("button", { type: "button", class: "secondary", text: "Cancel", onclick: () => form.remove() }));
      form.addEventListener("submit", async (ev) => { ev.preventDefault(); if (await send("/api/member/rename", { name: input.value }, form)) form.remove(); });
      line.append(form); input.focus(); input.select();
    }
    async function revoke(m) {
      const question = "Revoke " + m.name + "? " + m.name + "'s laptops are shut out of the household for good: what " + m.name
        + " already did stays, anything " + m.name + " does from now on is refused on every laptop, and " + m.name
        + "'s page shows the ledger as stopped. This cannot be undone (" + m.name + " can be invited again as a new member).";
      if (!confirm(question)) return;
      const r = await post("/api/member/revoke", { member: m.key.slice(0, 16) });
      if (r) $("message").textContent = m.name + " is revoked: the other laptops learn it at their next sync.";
    }
    async function invite(button) {
      const r = await post("/api/invite", {});
      if (!r) { $("error").textContent = humane($("error").textContent); return; }
      $("message").textContent = "";
      inviteOpen = { members: ((state.members && state.members.members) || []).map(m => m.key), result: r };
      renderInvite();
    }
    function renderInvite() {
      const box = $("invite-box");
      if (!inviteOpen) { box.replaceChildren(); return; }
      const r = inviteOpen.result;
      const img = r.qrSvg ? el("img", { class: "qr", alt: "QR code of the invitation (the long code below)", src: "data:image/svg+xml;charset=utf-8," + encodeURIComponent(r.qrSvg) }) : null;
      const fingerprint = el("details", { class: "fingerprint" }, el("summary", { text: "Compare the fingerprint" }),
        el("p", { text: "After joining, the other laptop's page shows the inviting laptop's fingerprint. It must be: " + r.fingerprint + "." }));
      const long = el("details", {}, el("summary", { text: "From another network: the long code" }),
        el("p", { class: "secret", id: "long-code", text: r.code }));
      box.replaceChildren(el("div", { class: "panel", id: "invite-panel", role: "region", "aria-label": "Invitation" },
        el("p", { text: "On the other laptop, open its kidledger page, choose Join a household and type:" }),
        el("p", { class: "short-code", id: "short-code", text: r.shortCode || "" }), img,
        el("p", { class: "hint", text: "The code works once, until " + new Date(r.expiresAtMillis).toLocaleString() + ". Keep this laptop on and kidledger running meanwhile." }),
        fingerprint, long,
        el("button", { type: "button", class: "secondary", text: "Close", onclick: () => { inviteOpen = null; renderInvite(); } })));
      const panel = $("invite-panel");
      if (panel && panel.scrollIntoView) panel.scrollIntoView({ block: "nearest" });
    }
    function recoverForm() {
      const form = el("form", { id: "recover-form", class: "row" },
        el("label", {}, "The recovery secret from the paper", el("input", { name: "secret", autocomplete: "off", spellcheck: "false", required: "" })),
        el("button", { type: "submit", text: "Recover ownership" }));
      form.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        if (!confirm("Make this laptop the household's owner? The lost owner's laptop can then no longer invite or shut anyone out; revoke it next.")) return;
        const r = await send("/api/recover", { secret: form.secret.value }, form);
        if (r) { form.secret.value = ""; showCardMessage(form, "This laptop owns the household now. If the old owner's laptop was lost or stolen, revoke it (just above)."); }
      });
      return el("details", { id: "recover" }, el("summary", { text: "The owner's laptop is lost? Recover ownership" }),
        el("p", { class: "hint", text: "Type the recovery secret that was written on paper when the household was started. This laptop becomes the owner on every laptop." }), form);
    }
    function renderHousehold() {
      const s = state.status, members = (state.members && state.members.members) || [], mine = me();
      const owner = !!(mine && mine.owner);
      // A new member appears without reload; an open invitation that was used closes. The new
      // member is announced once its chosen name arrived (a moment after the join).
      if (inviteOpen && members.some(m => !inviteOpen.members.includes(m.key))) { inviteOpen = null; renderInvite(); }
      if (knownMembers) {
        const fresh = members.filter(m => !knownMembers.includes(m.key) && !placeholder(m));
        if (fresh.length) $("message").textContent = fresh.map(personName).join(" and ") + " joined the household.";
        knownMembers = knownMembers.concat(fresh.map(m => m.key));
      } else knownMembers = members.map(m => m.key);
      const shape = JSON.stringify([members.map(m => [m.key, m.name, m.owner, m.revoked, m.formerOwner]), mine && mine.key]);
      const list = $("members");
      if (list.dataset.shape !== shape && !list.querySelector("form")) {
        list.dataset.shape = shape;
        list.replaceChildren(...members.map(m => memberLine(m, mine && m.key === mine.key, owner)));
      }
      const actions = $("household-actions");
      const wanted = (owner ? "owner" : "member") + (s && s.state === "attentionRequired" ? "!" : "");
      if (actions.dataset.shape !== wanted) {
        actions.dataset.shape = wanted;
        actions.replaceChildren(...(owner ? [el("button", { type: "button", id: "invite", text: "Invite the other laptop", onclick: (ev) => invite(ev.target) })] : []),
          ...(owner ? [] : [recoverForm()]));
      }
      if (!$("peers").querySelector("li[data-last]")) {
        const only = el("li", { text: "No other laptop yet" + (owner ? ": invite one with Invite the other laptop, below." : ": the owner's page invites one.") });
        $("peers").replaceChildren(only);
      }
      attentionButton(s);
      renderMerged();
    }
    // ---- Children: unmerge, merge into any other child ----
    function renderMerged() {
      const children = (state.children && state.children.children) || [];
      for (const card of $("children").querySelectorAll("article.child")) {
        const c = children.find(x => x.id === card.dataset.childId); if (!c) continue;
        const merged = children.filter(x => x.mergedInto === c.id);
        const key = merged.map(x => x.id + x.name).join() + "|" + children.filter(x => !x.archived && !x.mergedInto).map(x => x.id + x.name).join();
        if (card.dataset.mergedShape === key) continue;
        card.dataset.mergedShape = key;
        for (const old of card.querySelectorAll(".merged-note, .merge-any")) old.remove();
        if (merged.length) card.querySelector(".balance").before(el("div", { class: "merged-note" },
          el("span", { text: "Includes " + merged.map(x => x.name).join(" and ") + " (merged). " }),
          ...merged.map(x => el("button", { type: "button", class: "secondary unmerge", "data-key": "um" + x.id, text: "Unmerge " + x.name,
            onclick: async () => { if (confirm("Unmerge " + x.name + "? " + x.name + " gets a card of its own again, with its own entries; " + c.name + " keeps its own.")) await send("/api/child/unmerge", { child: x.id }, card); } }))));
        const others = children.filter(x => !x.archived && !x.mergedInto && x.id !== c.id);
        if (!others.length) continue;
        const select = el("select", { name: "into", "aria-label": "Merge " + c.name + " into" }, ...others.map(o => el("option", { value: o.id, text: o.name })));
        const form = el("form", { class: "row merge-any" }, el("label", {}, "Merge " + c.name + " into", select),
          el("button", { type: "submit", class: "secondary", text: "Merge" }));
        form.addEventListener("submit", async (ev) => {
          ev.preventDefault();
          const into = others.find(o => o.id === select.value); if (!into) return;
          if (!confirm(c.name + "'s " + money(c.balanceCents) + " and history will count in " + into.name + "'s: " + into.name + " will have "
            + money(c.balanceCents + into.balanceCents) + " on every laptop, and " + c.name + " will no longer have a card of its own. Nothing is deleted: Unmerge on "
            + into.name + "'s card undoes it.")) return;
          await send("/api/child/merge", { from: c.id, into: into.id }, form);
        });
        const more = el("details", { class: "merge-any" }, el("summary", { text: "Merge " + c.name + " into another child" }), form);
        card.querySelector("details.child-history").after(more);
      }
    }
    // ---- Undo: "Undone — give it back" for a few seconds ----
    function showUndone(result) {
      const t = $("toast");
      const entries = result && result.entries && result.entries.length ? result.entries : (result && result.original ? [{ original: result.original }] : []);
      clearTimeout(toastTimer);
      const back = entries.map(e => e.original).filter(Boolean);
      t.replaceChildren(el("span", { text: back.length ? "Undone —" : "Undone" }), back.length ? el("button", { type: "button", id: "give-back", text: "Give it back", onclick: async () => {
        t.hidden = true;
        for (const o of back) {
          const kind = o.amountCents < 0 ? "/api/take" : "/api/give";
          if (!(await post(kind, { child: o.childId, amount: plainAbs(o.amountCents), note: o.note || "" }))) break;
        }
      } }) : null);
      t.hidden = false;
      toastTimer = setTimeout(() => { t.hidden = true; }, 8000);
    }
    function plainAbs(cents) { return plain(Math.abs(cents)); }
    async function undoMine() {
      const r = await post("/api/undo-mine", {});
      if (r) showUndone(r);
    }
    """#
}
