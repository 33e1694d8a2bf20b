// The pending-approvals count in the navigation, kept current over the page's socket (live-socket.js,
// topic "approvals"):
// every approvals event re-reads the count from the server (no arithmetic on events that may be
// missed). On the inbox page a row resolved elsewhere is marked and its buttons disabled.
(function () {
  "use strict";

  const script = document.currentScript;
  const badge = document.querySelector('[data-nav-badge="approvals"]');
  if (!script || !badge || !window.ToolgateSocket) return;
  // The number sits in a pill that also says "pending" to screen readers; the pill is what hides.
  const pill = badge.closest(".nav-badge") || badge;
  const countUrl = script.dataset.countUrl;
  const RESOLVED = { "approval.decided": true, "approval.timed_out": true };

  function refresh() {
    fetch(countUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (body) {
        if (!body || typeof body.pending !== "number") return;
        badge.textContent = String(body.pending);
        pill.hidden = body.pending === 0;
      })
      .catch(function () {});
  }

  function markResolved(data) {
    const row = document.querySelector('[data-approvals-live] tr[data-id="' + CSS.escape(data.id) + '"]');
    if (!row) return;
    const cell = row.querySelector(".approval-actions");
    if (!cell || cell.dataset.status !== "pending") return;
    cell.dataset.status = data.status;
    row.querySelectorAll("button, input").forEach(function (node) { node.disabled = true; });
    row.querySelectorAll("a.button").forEach(function (link) {
      link.removeAttribute("href");
      link.setAttribute("aria-disabled", "true");
    });
    const by = data.decided_by && data.decided_by.label ? " by " + data.decided_by.label : "";
    const note = document.createElement("div");
    note.className = "small resolved-note";
    note.textContent = (data.decision || data.status) + by;
    cell.append(note);
  }

  // A pending row is never actionable past its expiry, even before the server's "approval.timed_out"
  // arrives: its expiry cell is read against the server's clock (the page says what time it was there).
  const expiry = document.getElementById("approvals-live-config");
  const skew = (function () {
    try {
      const config = JSON.parse(expiry ? expiry.textContent : "{}");
      return config.server_now ? Date.parse(config.server_now) - Date.now() : 0;
    } catch (error) { return 0; }
  })();

  function expireDue() {
    document.querySelectorAll('[data-approvals-live] td.approval-actions[data-status="pending"]').forEach(
      function (cell) {
        const row = cell.closest("tr");
        const times = row ? row.querySelectorAll("td.time-cell time") : [];
        const expires = times.length > 1 ? Date.parse(times[1].getAttribute("datetime")) : NaN;
        if (!isNaN(expires) && expires <= Date.now() + skew) {
          markResolved({ id: row.dataset.id, status: "timed_out", decision: "expired" });
        }
      }
    );
  }
  if (expiry) window.setInterval(expireDue, 1000);

  window.ToolgateSocket.onState(function (state) {
    if (state === "live") refresh(); // whatever changed while connecting
  });
  window.ToolgateSocket.subscribe("approvals", function (event) {
    if (RESOLVED[event.type]) markResolved(event.data || {});
    refresh();
  });

  refresh();
})();
