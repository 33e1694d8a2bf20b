// Live approvals inbox: "approval.requested" events on the "approvals" topic become rows of the pending
// table (socket, reconnects and indicator: live-table.js, loaded first). The cells mirror
// templates/dashboard/approvals/inbox.html; approvals-badge.js marks rows resolved elsewhere.
//
// Every pending row counts down to its expiry, read against the server's clock (the page says what
// time it was there). At its expiry a row stops being actionable at once (its buttons disabled, a note
// says it expired and was refused); a moment later it leaves the pending list for "Recently resolved",
// as does a row decided elsewhere. The countdown is text; a polite live region says what changed, and
// says how long the next approval has left at most once a minute.
(function () {
  "use strict";

  const live = window.ToolgateLive;
  const table = document.querySelector("[data-approvals-live]");
  if (!live || !table) return;

  const config = live.readJson("approvals-live-config");
  const PLACEHOLDER = "00000000-0000-0000-0000-000000000000";
  const LEAVE_AFTER_MS = 4000; // long enough to read why the row goes
  const SOON_SECONDS = 60;
  const ANNOUNCE_EVERY_MS = 60000;
  const OUTCOMES = {
    pending: ["◷", "Pending"],
    allowed: ["✓", "Allowed"],
    denied: ["✕", "Denied"],
    timed_out: ["⊘", "Timed out"],
  };
  const skew = config.server_now ? Date.parse(config.server_now) - Date.now() : 0;
  const recentTable = document.querySelector("[data-approvals-recent]");
  const announcer = document.querySelector("[data-approvals-announce]");
  const resolvedData = {}; // id -> the approval as its resolving event described it
  let lastAnnounced = 0;

  function serverNow() { return Date.now() + skew; }

  function csrfToken() {
    const input = document.querySelector("#csrf-holder [name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function announce(text) {
    if (announcer) announcer.textContent = text;
  }

  function button(label, value, className) {
    const node = live.el("button", label, "button " + className);
    node.type = "submit";
    node.name = "decision";
    node.value = value;
    return node;
  }

  function outcome(status) {
    const known = OUTCOMES[status] || [OUTCOMES.pending[0], status];
    const node = live.el("span", null, "outcome outcome-" + status);
    node.dataset.outcome = status;
    const icon = live.el("span", known[0], "outcome-icon");
    icon.setAttribute("aria-hidden", "true");
    node.append(icon, " " + known[1]);
    return node;
  }

  function buildRow(data) {
    const row = document.createElement("tr");
    live.cell(row, "time-cell").append(live.timeNode(data.created_at));

    const agent = live.cell(row);
    agent.append(live.el("code", data.agent));
    const session = live.el("div", data.session_key || "—", "mono small muted session");
    session.title = "Session key";
    agent.append(session);

    const command = live.cell(row);
    command.append(live.el("code", data.command, "command"));
    command.append(live.el("div", data.reason, "small muted reason"));

    const expiry = live.cell(row, "time-cell expiry-cell");
    expiry.append(live.timeNode(data.expires_at));
    const countdown = live.el("div", null, "countdown");
    countdown.dataset.countdown = "";
    const icon = live.el("span", "◷", "outcome-icon");
    icon.setAttribute("aria-hidden", "true");
    const text = live.el("span", "pending");
    text.dataset.countdownText = "";
    countdown.append(icon, " ", text);
    expiry.append(countdown);

    const actions = live.cell(row, "approval-actions");
    actions.dataset.status = "pending";
    const form = live.el("form", null, "actions");
    form.method = "post";
    form.action = config.decide_url.replace(PLACEHOLDER, data.id);
    const csrf = document.createElement("input");
    csrf.type = "hidden";
    csrf.name = "csrfmiddlewaretoken";
    csrf.value = csrfToken();
    const label = live.el("label", "Reason", "visually-hidden");
    label.htmlFor = "reason-" + data.id;
    const reason = document.createElement("input");
    reason.id = "reason-" + data.id;
    reason.name = "reason";
    reason.maxLength = 500;
    reason.placeholder = "Reason (optional)";
    const always = button("Allow always…", "allow-always", "");
    always.formAction = config.always_url.replace(PLACEHOLDER, data.id);
    const deny = live.el("a", "Deny…", "button danger");
    deny.href = config.deny_url.replace(PLACEHOLDER, data.id);
    form.append(csrf, label, reason, button("Allow once", "allow-once", "primary"), " ", always, " ", deny);
    actions.append(form);
    window.setTimeout(tick, 0); // its countdown, once it is in the table
    return row;
  }

  function expiresAt(row) {
    const node = row.querySelector("td.expiry-cell time");
    return node ? Date.parse(node.getAttribute("datetime")) : NaN;
  }

  function remainingText(seconds) {
    if (seconds < 60) return seconds + " s left";
    const minutes = Math.floor(seconds / 60);
    return minutes + " min " + String(seconds % 60).padStart(2, "0") + " s left";
  }

  // Not actionable any more: the buttons are disabled and the row says why (approvals-badge.js may have
  // done the same first; the note is added once).
  function markExpired(row, cell, expires) {
    cell.dataset.status = "timed_out";
    row.querySelectorAll("button, input").forEach(function (node) { node.disabled = true; });
    row.querySelectorAll("a.button").forEach(function (link) {
      link.removeAttribute("href");
      link.setAttribute("aria-disabled", "true");
    });
    if (!cell.querySelector(".expired-note")) {
      const note = live.el("div", "This approval expired at ", "expired-note");
      note.append(live.timeNode(new Date(expires).toISOString()), " and was refused: nothing ran.");
      cell.append(note);
    }
  }

  function emptyRow(tbody, text, columns) {
    if (tbody.querySelector("tr[data-id]") || tbody.querySelector("tr.empty")) return;
    const row = tbody.insertRow();
    row.className = "empty";
    const cell = row.insertCell();
    cell.colSpan = columns;
    cell.textContent = text;
  }

  // The pending row goes to the top of "Recently resolved", as it reads now.
  function leave(row) {
    const id = row.dataset.id;
    const data = resolvedData[id] || {};
    const status = data.status && data.status !== "pending" ? data.status : "timed_out";
    const times = row.querySelectorAll("td.time-cell time");
    const command = row.querySelector("code.command");
    const agent = row.querySelector("td:nth-child(2) code");
    row.remove();
    emptyRow(table.tBodies[0], "Nothing waits for a decision.", 5);
    const what = "“" + (command ? command.textContent : "") + "”";
    announce(status === "timed_out"
      ? "Approval " + what + " expired and was refused; it left the pending list."
      : "Approval " + what + " was " + OUTCOMES[status][1].toLowerCase() + "; it left the pending list.");
    if (!recentTable) return;
    const tbody = recentTable.tBodies[0];
    const empty = tbody.querySelector("tr.empty");
    if (empty) empty.remove();
    const done = document.createElement("tr");
    done.dataset.id = id;
    const created = live.cell(done, "time-cell");
    if (times.length) created.append(times[0].cloneNode(true));
    live.cell(done).append(live.el("code", agent ? agent.textContent : data.agent || ""));
    live.cell(done).append(live.el("code", command ? command.textContent : data.command || "", "command"));
    const result = live.cell(done);
    result.append(outcome(status));
    if (data.decision) result.append(live.el("div", data.decision, "small muted"));
    const by = live.cell(done, "small");
    by.textContent = data.decided_by && data.decided_by.label ? data.decided_by.label : "—";
    const why = data.decision_reason || (status === "timed_out" ? "expired without a decision" : "");
    if (why) by.append(live.el("div", why, "muted"));
    done.classList.add("is-new");
    tbody.insertBefore(done, tbody.firstChild);
    const max = parseInt(recentTable.dataset.maxRows || "20", 10);
    while (tbody.rows.length > max) tbody.deleteRow(-1);
  }

  function tick() {
    const now = serverNow();
    let soonest = Infinity;
    let waiting = 0;
    table.querySelectorAll("tbody tr[data-id]").forEach(function (row) {
      if (row.dataset.leaving) return;
      const cell = row.querySelector("td.approval-actions");
      if (!cell) return;
      const expires = expiresAt(row);
      if (cell.dataset.status === "pending" && !isNaN(expires) && expires <= now) markExpired(row, cell, expires);
      if (cell.dataset.status !== "pending") {
        row.dataset.leaving = "1";
        row.classList.add("is-leaving");
        const text = row.querySelector("[data-countdown-text]");
        if (text) text.textContent = cell.dataset.status === "timed_out" ? "expired" : "decided";
        window.setTimeout(function () { leave(row); }, LEAVE_AFTER_MS);
        return;
      }
      if (isNaN(expires)) return;
      const seconds = Math.max(0, Math.ceil((expires - now) / 1000));
      const countdown = row.querySelector("[data-countdown]");
      const text = row.querySelector("[data-countdown-text]");
      if (text) text.textContent = remainingText(seconds);
      if (countdown) countdown.dataset.urgency = seconds <= SOON_SECONDS ? "soon" : "";
      waiting += 1;
      soonest = Math.min(soonest, seconds);
    });
    if (waiting && Date.now() - lastAnnounced >= ANNOUNCE_EVERY_MS) {
      lastAnnounced = Date.now();
      const minutes = Math.ceil(soonest / 60);
      announce(waiting + (waiting === 1 ? " approval waits" : " approvals wait") +
        "; the next expires in " + (soonest < 60 ? "less than a minute" : minutes + " minutes") + ".");
    }
  }

  lastAnnounced = Date.now(); // nothing to say the moment the page opens
  tick();
  window.setInterval(tick, 1000);

  if (window.ToolgateSocket) {
    window.ToolgateSocket.subscribe("approvals", function (event) {
      const data = event.data || {};
      if ((event.type === "approval.decided" || event.type === "approval.timed_out") && data.id) {
        resolvedData[data.id] = data;
        window.setTimeout(tick, 0); // after approvals-badge.js has marked the row
      }
    });
  }

  live.start({
    table: table,
    topic: "approvals",
    eventType: "approval.requested",
    matches: function (data) { return data.status === "pending"; },
    buildRow: buildRow,
  });
})();
